// The on-disk cache: one file per object under
//   <cacheDir>/<component>/<resource>.<version>.<group>/<namespace | _cluster>/<name>
// Each file is one JSON header line followed by the body bytes. Writes are atomic (temp file in
// the same directory, fdatasync, rename, directory fsync), so a crash at any point leaves the
// previous or the new version of a file, never a torn one. Loading reports broken files and skips
// them; it never deletes an object file and never throws because of one.
import { randomBytes } from 'node:crypto'
import { chmod, mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from 'pino'
import { clusterScopeDir, parseResourceDir, resourceDirName } from './types.ts'
import type { CachedObject, ResourceKey } from './types.ts'

export interface DiskEntry {
  key: ResourceKey
  object: CachedObject
}

/** What a collection knows besides its objects: the scopes listed whole, and the newest list's version. */
export interface CollectionMeta {
  listResourceVersion: string
  listed: { namespace: string; labelSelector: string; fieldSelector: string; resourceVersion: string }[]
}

export interface LoadFailure {
  path: string
  reason: string
  /** the object the file stood for, when its path says so: it is missing now, and lists must not pretend otherwise */
  object?: { key: ResourceKey; namespace: string; name: string }
}

export interface LoadReport {
  loaded: number
  failed: LoadFailure[]
}

/** Per resource directory, next to the namespace directories (no namespace can start with '_'). */
export const collectionMetaFile = '_scopes'

/** The first line of a cache file: the object without its body, a format version and the body's size. */
type FileHeader = Omit<CachedObject, 'body'> & { v: 1; size: number }

/** fs operations in flight at once (they run on libuv's thread pool, 4 threads unless UV_THREADPOOL_SIZE says otherwise) */
const maxInFlight = 32
/** longest path component we accept: Kubernetes names are at most 253 characters, file names 255 bytes */
const maxComponentLength = 253
/**
 * Kubernetes object names are DNS subdomains (`[a-z0-9]([-a-z0-9.]*[a-z0-9])?`) or, for a few kinds
 * such as RBAC roles, path segments that in practice use `:` (`system:node-proxier`). Components
 * are lower-cased User-Agent products; resource directories are `<plural>.<version>.<group>`.
 * Anything else (`/`, `\0`, `%`, upper case, a leading `.` so never `.` or `..`) is refused.
 */
const componentPattern = /^[a-z0-9][-a-z0-9._:]*$/
/** Temp files start with '.', which no valid object name does, so they can never shadow an object. */
const tmpMarker = '.tmp-'

function isTmpName(name: string): boolean {
  return name.startsWith('.') && name.includes(tmpMarker)
}

export function validPathComponent(value: string): boolean {
  return value.length <= maxComponentLength && componentPattern.test(value)
}

function checkComponent(what: string, value: string): void {
  if (typeof value !== 'string' || !validPathComponent(value)) {
    throw new Error(`disk cache: invalid ${what} ${JSON.stringify(value)}: must match ${componentPattern.source} and be at most ${maxComponentLength} characters`)
  }
}

function errorCode(error: unknown): string | undefined {
  return (error as { code?: string })?.code
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

interface Waiter {
  resolve: () => void
  reject: (error: Error) => void
}

interface Op {
  file: string
  dir: string
  /** undefined: remove the file */
  data?: { header: Buffer; body: Buffer }
  waiters: Waiter[]
  done: Promise<void>
  settle: (error?: Error) => void
}

interface DirState {
  running: boolean
  waiters: Waiter[]
}

/** A FIFO with O(1) shift. */
class Queue<T> {
  private items: T[] = []
  private head = 0
  get length(): number {
    return this.items.length - this.head
  }
  push(item: T): void {
    this.items.push(item)
  }
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head++] = undefined as T
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
}

/** Runs fn over items with at most `limit` in flight. */
async function forEachLimited<T>(items: Iterable<T>, limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const iterator = items[Symbol.iterator]()
  const worker = async () => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) await fn(next.value)
  }
  await Promise.all(Array.from({ length: limit }, worker))
}

export class DiskCache {
  readonly stats = { writes: 0, removes: 0, bytesWritten: 0, errors: 0 }

  /** ops not yet started, by file path: a newer op for the same path replaces the data (coalescing) */
  private readonly pending = new Map<string, Op>()
  /** file paths with an op between open and rename/unlink; the next op for them waits */
  private readonly running = new Set<string>()
  private readonly ready = new Queue<string>()
  private active = 0
  /** every op not yet settled, for flush() */
  private readonly outstanding = new Set<Promise<void>>()
  /** directories known to exist durably (or being created) */
  private readonly madeDirs = new Map<string, Promise<void>>()
  private readonly dirStates = new Map<string, DirState>()
  /** bodies of writes started but not yet renamed into place: what read() must see meanwhile */
  private readonly writing = new Map<string, Buffer>()
  /** temp files this instance is writing right now, so load() leaves them alone */
  private readonly liveTmp = new Set<string>()

  private constructor(
    readonly cacheDir: string,
    private readonly log: Logger,
  ) {}

  static async open(cacheDir: string, log: Logger): Promise<DiskCache> {
    const root = path.resolve(cacheDir)
    await mkdir(root, { recursive: true, mode: 0o700 })
    await chmod(root, 0o700)
    const cache = new DiskCache(root, log)
    cache.madeDirs.set(root, Promise.resolve())
    return cache
  }

  private dirFor(key: ResourceKey, namespace: string): string {
    checkComponent('component', key.component)
    const resourceDir = resourceDirName(key)
    checkComponent('resource directory', resourceDir)
    if (namespace !== '') checkComponent('namespace', namespace)
    return path.join(this.cacheDir, key.component, resourceDir, namespace === '' ? clusterScopeDir : namespace)
  }

  private fileFor(key: ResourceKey, namespace: string, name: string): { dir: string; file: string } {
    if (typeof namespace !== 'string') throw new Error(`disk cache: invalid namespace ${JSON.stringify(namespace)}`)
    const dir = this.dirFor(key, namespace)
    checkComponent('name', name)
    const file = path.join(dir, name)
    // Belt and braces: the pattern already rules out separators and dot segments.
    if (path.dirname(file) !== dir || !file.startsWith(this.cacheDir + path.sep)) {
      throw new Error(`disk cache: path ${JSON.stringify(file)} escapes ${this.cacheDir}`)
    }
    return { dir, file }
  }

  put(key: ResourceKey, object: CachedObject): Promise<void> {
    let location: { dir: string; file: string }
    try {
      location = this.fileFor(key, object.namespace, object.name)
      if (object.format !== 'json' && object.format !== 'protobuf') throw new Error(`disk cache: invalid format ${JSON.stringify(object.format)}`)
      if (!Buffer.isBuffer(object.body)) throw new Error('disk cache: body must be a Buffer')
    } catch (error) {
      return Promise.reject(error)
    }
    const header: FileHeader = {
      v: 1,
      apiVersion: object.apiVersion,
      kind: object.kind,
      namespace: object.namespace,
      name: object.name,
      resourceVersion: object.resourceVersion,
      format: object.format,
      size: object.body.length,
    }
    if (object.fields) header.fields = object.fields
    if (object.scopes) header.scopes = object.scopes
    const data = { header: Buffer.from(JSON.stringify(header) + '\n'), body: object.body }
    return this.enqueue(location.dir, location.file, data)
  }

  /** Replaces a collection's meta file (atomically, like an object's). */
  putCollectionMeta(key: ResourceKey, meta: CollectionMeta): Promise<void> {
    let dir: string
    try {
      dir = path.dirname(this.dirFor(key, ''))
    } catch (error) {
      return Promise.reject(error)
    }
    const data = { header: Buffer.from(JSON.stringify({ v: 1, ...meta }) + '\n'), body: Buffer.alloc(0) }
    return this.enqueue(dir, path.join(dir, collectionMetaFile), data)
  }

  remove(key: ResourceKey, namespace: string, name: string): Promise<void> {
    let location: { dir: string; file: string }
    try {
      location = this.fileFor(key, namespace, name)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.enqueue(location.dir, location.file, undefined)
  }

  /**
   * The body of one cached object, as the latest put left it (queued, being written, or on disk);
   * undefined when it is removed or was never written.
   */
  async readBody(key: ResourceKey, namespace: string, name: string): Promise<Buffer | undefined> {
    const { file } = this.fileFor(key, namespace, name)
    const queued = this.pending.get(file)
    if (queued) return queued.data?.body
    const inFlight = this.writing.get(file)
    if (inFlight) return inFlight
    let bytes: Buffer
    try {
      bytes = await readFile(file)
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return undefined
      throw error
    }
    const parsed = parseFile(bytes, namespace, name)
    if (typeof parsed === 'string') throw new Error(`disk cache: ${file}: ${parsed}`)
    return parsed.body
  }

  async flush(): Promise<void> {
    // Failed ops were logged and counted, and rejected their own callers; flush only waits.
    while (this.outstanding.size > 0) await Promise.allSettled([...this.outstanding])
  }

  private enqueue(dir: string, file: string, data: Op['data']): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter = { resolve, reject }
      const queued = this.pending.get(file)
      if (queued) {
        queued.data = data
        queued.waiters.push(waiter)
        return
      }
      let settle!: (error?: Error) => void
      const done = new Promise<void>(res => {
        settle = res as () => void
      })
      const op: Op = { file, dir, data, waiters: [waiter], done, settle }
      op.settle = (error?: Error) => {
        for (const w of op.waiters) (error ? w.reject(error) : w.resolve())
        this.outstanding.delete(done)
        settle()
      }
      this.outstanding.add(done)
      this.pending.set(file, op)
      if (!this.running.has(file)) this.ready.push(file)
      this.pump()
    })
  }

  private pump(): void {
    while (this.active < maxInFlight && this.ready.length > 0) {
      const file = this.ready.shift()!
      const op = this.pending.get(file)
      if (!op) continue
      this.pending.delete(file)
      this.running.add(file)
      this.active++
      void this.apply(op)
        .then(
          () => {
            this.release(file)
            return this.syncDir(op.dir)
          },
          error => {
            this.release(file)
            throw error
          },
        )
        .then(
          () => op.settle(),
          (error: unknown) => {
            this.stats.errors++
            const err = error instanceof Error ? error : new Error(String(error))
            this.log.error({ err, file: op.file }, `disk cache: ${op.data ? 'write' : 'remove'} failed: ${err.message}`)
            op.settle(err)
          },
        )
    }
  }

  private release(file: string): void {
    this.active--
    this.running.delete(file)
    if (this.pending.has(file)) this.ready.push(file)
    this.pump()
  }

  /** Up to the rename (or unlink): afterwards the op no longer holds a slot, only its directory's fsync. */
  private async apply(op: Op): Promise<void> {
    await this.ensureDir(op.dir)
    if (!op.data) {
      try {
        await unlink(op.file)
      } catch (error) {
        if (errorCode(error) !== 'ENOENT') throw error
      }
      this.stats.removes++
      return
    }
    const { header, body } = op.data
    this.writing.set(op.file, body)
    const base = path.basename(op.file)
    const tmp = path.join(op.dir, `.${base.slice(0, 200)}${tmpMarker}${randomBytes(6).toString('hex')}`)
    this.liveTmp.add(tmp)
    try {
      const handle = await open(tmp, 'wx', 0o600)
      try {
        const total = header.length + body.length
        const { bytesWritten } = await handle.writev([header, body])
        if (bytesWritten !== total) throw new Error(`short write: ${bytesWritten} of ${total} bytes`)
        await handle.datasync()
      } finally {
        await handle.close()
      }
      await rename(tmp, op.file)
      this.stats.writes++
      this.stats.bytesWritten += header.length + body.length
    } catch (error) {
      await unlink(tmp).catch(() => {})
      // the directory is not (or no longer) what was made: make it again on the next try
      if (['ENOENT', 'ENOTDIR'].includes(errorCode(error) ?? '')) this.forgetDirs(op.dir)
      throw error
    } finally {
      this.liveTmp.delete(tmp)
      if (this.writing.get(op.file) === body) this.writing.delete(op.file)
    }
  }

  private forgetDirs(dir: string): void {
    for (let d = dir; d !== this.cacheDir && d.startsWith(this.cacheDir); d = path.dirname(d)) this.madeDirs.delete(d)
  }

  /** Creates the directories under the cache root that lead to dir, each 0700, each made durable in its parent. */
  private ensureDir(dir: string): Promise<void> {
    const known = this.madeDirs.get(dir)
    if (known) return known
    const parent = path.dirname(dir)
    const made = (async () => {
      await this.ensureDir(parent)
      try {
        await mkdir(dir, { mode: 0o700 })
      } catch (error) {
        if (errorCode(error) === 'EEXIST') return
        throw error
      }
      await this.syncDir(parent)
    })()
    this.madeDirs.set(dir, made)
    made.catch(() => this.madeDirs.delete(dir))
    return made
  }

  /**
   * Resolves once an fsync of dir that started after this call has finished. Calls that arrive
   * while an fsync runs share the next one, so a burst costs a few fsyncs per directory, not one
   * per file.
   */
  private syncDir(dir: string): Promise<void> {
    let state = this.dirStates.get(dir)
    if (!state) {
      state = { running: false, waiters: [] }
      this.dirStates.set(dir, state)
    }
    const s = state
    return new Promise<void>((resolve, reject) => {
      s.waiters.push({ resolve, reject })
      if (!s.running) {
        s.running = true
        setImmediate(() => void this.runDirSync(dir, s))
      }
    })
  }

  private async runDirSync(dir: string, state: DirState): Promise<void> {
    while (state.waiters.length > 0) {
      const waiters = state.waiters
      state.waiters = []
      let failure: Error | undefined
      try {
        const handle = await open(dir, 'r')
        try {
          await handle.sync()
        } catch (error) {
          // Some filesystems cannot fsync a directory; the rename is as durable as they allow.
          if (!['EINVAL', 'ENOTSUP', 'EISDIR'].includes(errorCode(error) ?? '')) throw error
        } finally {
          await handle.close()
        }
      } catch (error) {
        failure = error instanceof Error ? error : new Error(String(error))
      }
      for (const w of waiters) (failure ? w.reject(failure) : w.resolve())
    }
    state.running = false
  }

  async load(onEntry: (entry: DiskEntry) => void, onMeta: (key: ResourceKey, meta: CollectionMeta) => void = () => {}): Promise<LoadReport> {
    const report: LoadReport = { loaded: 0, failed: [] }
    const fail = (file: string, reason: string, object?: LoadFailure['object']) => {
      report.failed.push(object ? { path: file, reason, object } : { path: file, reason })
      this.log.warn({ path: file, reason }, `disk cache: skipped ${file}: ${reason}`)
    }
    const list = async (dir: string) => {
      try {
        return await readdir(dir, { withFileTypes: true })
      } catch (error) {
        fail(dir, `cannot read directory: ${errorMessage(error)}`)
        return []
      }
    }
    const files: { file: string; key: ResourceKey; namespace: string; name: string }[] = []
    let removedTmp = 0

    for (const c of await list(this.cacheDir)) {
      const componentPath = path.join(this.cacheDir, c.name)
      if (!c.isDirectory()) {
        fail(componentPath, 'unexpected file at the top of the cache directory')
        continue
      }
      if (!validPathComponent(c.name)) {
        fail(componentPath, 'not a valid component name')
        continue
      }
      for (const r of await list(componentPath)) {
        const resourcePath = path.join(componentPath, r.name)
        const parsed = validPathComponent(r.name) ? parseResourceDir(r.name) : undefined
        if (!r.isDirectory() || !parsed) {
          fail(resourcePath, r.isDirectory() ? 'not a resource directory name (<resource>.<version>.<group>)' : 'unexpected file in a component directory')
          continue
        }
        const key: ResourceKey = { component: c.name, ...parsed }
        for (const n of await list(resourcePath)) {
          const namespacePath = path.join(resourcePath, n.name)
          if (n.name === collectionMetaFile && n.isFile()) {
            try {
              onMeta({ ...key }, parseMeta(await readFile(namespacePath)))
            } catch (error) {
              fail(namespacePath, `unreadable scope list (lists of this resource answer as never listed): ${errorMessage(error)}`)
            }
            continue
          }
          if (isTmpName(n.name) && n.isFile()) {
            if (!this.liveTmp.has(namespacePath)) await unlink(namespacePath).catch(() => {})
            continue
          }
          const namespace = n.name === clusterScopeDir ? '' : n.name
          if (!n.isDirectory() || (namespace !== '' && !validPathComponent(namespace))) {
            fail(namespacePath, n.isDirectory() ? 'not a valid namespace name' : 'unexpected file in a resource directory')
            continue
          }
          for (const f of await list(namespacePath)) {
            const file = path.join(namespacePath, f.name)
            if (isTmpName(f.name) && f.isFile()) {
              if (this.liveTmp.has(file)) continue
              try {
                await unlink(file)
                removedTmp++
              } catch (error) {
                fail(file, `cannot remove leftover temp file: ${errorMessage(error)}`)
              }
              continue
            }
            if (!f.isFile()) fail(file, 'not a regular file')
            else if (!validPathComponent(f.name)) fail(file, 'not a valid object name')
            else files.push({ file, key, namespace, name: f.name })
          }
        }
      }
    }
    if (removedTmp > 0) this.log.info(`disk cache: removed ${removedTmp} leftover temp file(s) of an interrupted write`)

    await forEachLimited(files, maxInFlight, async ({ file, key, namespace, name }) => {
      const object = { key: { ...key }, namespace, name }
      let bytes: Buffer
      try {
        bytes = await readFile(file)
      } catch (error) {
        fail(file, `cannot read: ${errorMessage(error)}`, object)
        return
      }
      const parsed = parseFile(bytes, namespace, name)
      if (typeof parsed === 'string') {
        fail(file, parsed, object)
        return
      }
      report.loaded++
      try {
        onEntry({ key: { ...key }, object: parsed })
      } catch (error) {
        fail(file, `rejected by the loader: ${errorMessage(error)}`)
        report.loaded--
      }
    })
    if (report.failed.length > 0) {
      this.log.warn(`disk cache: loaded ${report.loaded} object(s), skipped ${report.failed.length} broken file(s) in ${this.cacheDir}`)
    } else {
      this.log.info(`disk cache: loaded ${report.loaded} object(s) from ${this.cacheDir}`)
    }
    return report
  }
}

/** The object in a cache file, or why the file is not one. */
function parseFile(bytes: Buffer, namespace: string, name: string): CachedObject | string {
  const newline = bytes.indexOf(0x0a)
  if (newline === -1) return 'no header line'
  let header: FileHeader
  try {
    header = JSON.parse(bytes.subarray(0, newline).toString('utf8'))
  } catch (error) {
    return `header is not JSON: ${errorMessage(error)}`
  }
  if (typeof header !== 'object' || header === null) return 'header is not an object'
  if (header.v !== 1) return `unknown header version ${JSON.stringify(header.v)}`
  for (const field of ['apiVersion', 'kind', 'namespace', 'name', 'resourceVersion'] as const) {
    if (typeof header[field] !== 'string') return `header field ${field} is not a string`
  }
  if (header.format !== 'json' && header.format !== 'protobuf') return `unknown format ${JSON.stringify(header.format)}`
  if (!Number.isSafeInteger(header.size) || header.size < 0) return 'header size is not a byte count'
  if (header.scopes !== undefined && (!Array.isArray(header.scopes) || header.scopes.some(v => typeof v !== 'string'))) return 'header scopes is not a list of strings'
  if (header.fields !== undefined) {
    if (typeof header.fields !== 'object' || header.fields === null || Array.isArray(header.fields)) return 'header fields is not an object'
    if (Object.values(header.fields).some(v => typeof v !== 'string')) return 'header fields has a value that is not a string'
  }
  const body = bytes.subarray(newline + 1)
  if (body.length !== header.size) return `size mismatch: header says ${header.size} bytes, body has ${body.length}`
  if (header.namespace !== namespace) return `header namespace ${JSON.stringify(header.namespace)} does not match its directory ${JSON.stringify(namespace)}`
  if (header.name !== name) return `header name ${JSON.stringify(header.name)} does not match the file name`
  if (header.format === 'json') {
    try {
      JSON.parse(body.toString('utf8'))
    } catch (error) {
      return `body is not JSON: ${errorMessage(error)}`
    }
  }
  const object: CachedObject = {
    apiVersion: header.apiVersion,
    kind: header.kind,
    namespace: header.namespace,
    name: header.name,
    resourceVersion: header.resourceVersion,
    format: header.format,
    body,
  }
  if (header.fields) object.fields = { ...header.fields }
  if (header.scopes) object.scopes = header.scopes
  return object
}

function parseMeta(bytes: Buffer): CollectionMeta {
  const meta = JSON.parse(bytes.toString('utf8')) as CollectionMeta & { v?: number }
  if (meta?.v !== 1) throw new Error(`unknown version ${JSON.stringify(meta?.v)}`)
  if (typeof meta.listResourceVersion !== 'string' || !Array.isArray(meta.listed)) throw new Error('not a scope list')
  for (const l of meta.listed) {
    if (!l || ['namespace', 'labelSelector', 'fieldSelector', 'resourceVersion'].some(f => typeof (l as unknown as Record<string, unknown>)[f] !== 'string')) {
      throw new Error('a listed scope is malformed')
    }
  }
  return { listResourceVersion: meta.listResourceVersion, listed: meta.listed }
}
