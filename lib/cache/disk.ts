// The on-disk cache: per component and resource, an append-only journal of records (an object
// written, an object removed, the scopes listed whole) over a compacted snapshot:
//   <cacheDir>/<component>/<resource>.<version>.<group>/snapshot.<gen>, journal.<gen>
// A record is [u32 length][u32 crc32][JSON header line + body]. Writes of one moment are grouped:
// one write() per journal carries a burst, and the promise of each record resolves once it is in
// the file (the kernel has it: it survives a SIGKILL of the hub). Durability against power loss
// is shared: one fdatasync per journal per round, however many records the round carries
// (`flush()` waits for it). A torn tail (a crash mid-write, a power cut before the sync) fails its
// checksum and is cut off at load: every object is then at a version it had, never torn. A
// journal grown well past its live data is compacted into a new snapshot (written whole, synced,
// renamed), and the old files go.
import { chmod, open, readdir, readFile, rename, rm, truncate, unlink } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import path from 'node:path'
import type { Logger } from 'pino'
import { durableMkdir, syncDir } from '../durable-dirs.ts'
import { objectKey, parseResourceDir, resourceDirName } from './types.ts'
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
}

export interface LoadReport {
  loaded: number
  failed: LoadFailure[]
}

/** The hub's own small state (not apiserver objects) lives here, apart from the collections. */
const stateDir = '_state'

/** Longest path component accepted (component and resource directory names). */
const maxComponentLength = 253
/**
 * Components are lower-cased User-Agent products and resource directories `<plural>.<version>.<group>`:
 * anything else (`/`, `\0`, `%`, upper case, a leading `.`, so never `.` or `..`) is refused.
 */
const componentPattern = /^[a-z0-9][-a-z0-9._:]*$/
/** a record larger than this is damage, not an object (etcd caps objects at ~1.5 MiB) */
const maxRecordBytes = 64 * 1024 * 1024
/** compact a journal once it is this large and at least twice its collection's live data */
const compactAfterBytes = 4 * 1024 * 1024

export function validPathComponent(value: string): boolean {
  return value.length <= maxComponentLength && componentPattern.test(value)
}

function checkComponent(what: string, value: string): void {
  if (typeof value !== 'string' || !validPathComponent(value)) {
    throw new Error(`disk cache: invalid ${what} ${JSON.stringify(value)}: must match ${componentPattern.source} and be at most ${maxComponentLength} characters`)
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

type PutHeader = Omit<CachedObject, 'body'> & { t: 'p'; size: number }
type RemoveHeader = { t: 'r'; namespace: string; name: string }
type MetaHeader = CollectionMeta & { t: 'm' }
type Header = PutHeader | RemoveHeader | MetaHeader

/**
 * Records' bytes: length, checksum, header line, body. The prefixes and header lines of a batch
 * share one buffer: a list's 10,000 records are one allocation, not 20,000 small ones.
 */
function encodeRecords(records: readonly { header: Header; body?: Buffer }[]): PendingRecord[] {
  const lines = records.map(r => JSON.stringify(r.header))
  let total = 0
  for (const line of lines) total += 9 + Buffer.byteLength(line) // length, checksum, line, '\n'
  const heads = Buffer.allocUnsafe(total)
  let at = 0
  return records.map(({ header, body }, i) => {
    const start = at
    const textLength = heads.write(lines[i], start + 8)
    heads[start + 8 + textLength] = 0x0a
    const lineLength = textLength + 1
    at = start + 8 + lineLength
    const line = heads.subarray(start + 8, at)
    const hasBody = body !== undefined && body.length > 0
    heads.writeUInt32BE(lineLength + (hasBody ? body.length : 0), start)
    heads.writeUInt32BE(hasBody ? crc32(body, crc32(line)) : crc32(line), start + 4)
    const head = heads.subarray(start, at)
    return { header, parts: hasBody ? [head, body] : [head], bytes: at - start + (hasBody ? body.length : 0) }
  })
}

function encodeRecord(header: Header, body?: Buffer): PendingRecord {
  return encodeRecords([{ header, body }])[0]
}

interface Location {
  file: string
  /** offset and size of the body within the file */
  bodyAt: number
  size: number
  /** bytes of the whole record, for the live-data total */
  recordBytes: number
}

/** the most a compaction reads at once, and the widest stretch of dead records it reads over */
const copyChunkBytes = 4 * 1024 * 1024
const copyGapBytes = 64 * 1024

/**
 * The live records in file order, in runs a compaction reads with one pread each: records of one
 * file that lie together (dead records of up to copyGapBytes between them are read and skipped),
 * up to copyChunkBytes a run. A watch's records mostly lie together in the journal: one read and
 * one write per run, not one each per object.
 */
function copyRuns(live: ReadonlyMap<string, Location>): { file: string; start: number; end: number; records: [string, Location][] }[] {
  const start = (at: Location) => at.bodyAt - (at.recordBytes - at.size)
  const sorted = [...live].sort(([, a], [, b]) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.bodyAt - b.bodyAt))
  const runs: { file: string; start: number; end: number; records: [string, Location][] }[] = []
  let run: (typeof runs)[number] | undefined
  for (const entry of sorted) {
    const at = entry[1]
    const from = start(at)
    const to = from + at.recordBytes
    if (run && run.file === at.file && from >= run.end && from - run.end <= copyGapBytes && to - run.start <= copyChunkBytes) {
      run.end = to
      run.records.push(entry)
    } else {
      run = { file: at.file, start: from, end: to, records: [entry] }
      runs.push(run)
    }
  }
  return runs
}

interface Waiter {
  resolve: () => void
  reject: (error: Error) => void
}

interface PendingRecord {
  header: Header
  parts: Buffer[]
  bytes: number
}

/** One component's view of one resource on disk. */
class CollectionFiles {
  gen = 0
  journal: FileHandle | undefined
  journalSize = 0
  readonly live = new Map<string, Location>()
  liveBytes = 0
  meta: CollectionMeta | undefined
  /** records waiting for the next write, and who waits for them to be written */
  pending: PendingRecord[] = []
  /** bodies of objects in `pending`, for readBody meanwhile */
  readonly unwritten = new Map<string, Buffer | undefined>()
  waiters: Waiter[] = []
  dirty = false
  compacting = false
  /** read handles by file name, kept open so a compaction can unlink files still being read */
  readonly readers = new Map<string, Promise<FileHandle>>()

  constructor(
    readonly key: ResourceKey,
    readonly dir: string,
  ) {}

  journalName(gen = this.gen): string {
    return path.join(this.dir, `journal.${gen}`)
  }

  snapshotName(gen = this.gen): string {
    return path.join(this.dir, `snapshot.${gen}`)
  }

  reader(file: string): Promise<FileHandle> {
    let handle = this.readers.get(file)
    if (!handle) {
      handle = open(file, 'r')
      this.readers.set(file, handle)
      handle.catch(() => this.readers.delete(file))
    }
    return handle
  }
}

export class DiskCache {
  readonly stats = { writes: 0, removes: 0, bytesWritten: 0, errors: 0, appends: 0, syncs: 0, compactions: 0 }
  private readonly collections = new Map<string, CollectionFiles>()
  private writeScheduled = false
  private writing: Promise<void> = Promise.resolve()
  private syncing: Promise<void> | undefined
  private readonly syncWaiters: Waiter[] = []

  private constructor(
    readonly cacheDir: string,
    private readonly log: Logger,
  ) {}

  static async open(cacheDir: string, log: Logger): Promise<DiskCache> {
    const root = path.resolve(cacheDir)
    await durableMkdir(root)
    await chmod(root, 0o700)
    return new DiskCache(root, log)
  }

  private files(key: ResourceKey): CollectionFiles {
    checkComponent('component', key.component)
    const resourceDir = resourceDirName(key)
    checkComponent('resource directory', resourceDir)
    const id = `${key.component}/${resourceDir}`
    let files = this.collections.get(id)
    if (!files) {
      files = new CollectionFiles({ ...key }, path.join(this.cacheDir, key.component, resourceDir))
      this.collections.set(id, files)
    }
    return files
  }

  put(key: ResourceKey, object: CachedObject): Promise<void> {
    return this.putAll(key, [object])
  }

  /** Objects of one collection, appended together: one promise for all of them (a list's items). */
  putAll(key: ResourceKey, objects: readonly CachedObject[]): Promise<void> {
    let files: CollectionFiles
    try {
      files = this.files(key)
      for (const object of objects) {
        if (object.format !== 'json' && object.format !== 'protobuf') throw new Error(`disk cache: invalid format ${JSON.stringify(object.format)}`)
        if (!Buffer.isBuffer(object.body)) throw new Error('disk cache: body must be a Buffer')
        if (typeof object.namespace !== 'string' || typeof object.name !== 'string' || object.name === '') throw new Error('disk cache: an object needs a name')
      }
    } catch (error) {
      return Promise.reject(error)
    }
    const records = encodeRecords(
      objects.map(object => {
        const header: PutHeader = {
          t: 'p',
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
        if (object.labels) header.labels = object.labels
        files.unwritten.set(objectKey(object.namespace, object.name), object.body)
        return { header, body: object.body }
      }),
    )
    this.stats.writes += objects.length
    return this.append(files, records)
  }

  remove(key: ResourceKey, namespace: string, name: string): Promise<void> {
    let files: CollectionFiles
    try {
      files = this.files(key)
    } catch (error) {
      return Promise.reject(error)
    }
    files.unwritten.set(objectKey(namespace, name), undefined)
    this.stats.removes++
    return this.append(files, [encodeRecord({ t: 'r', namespace, name })])
  }

  putCollectionMeta(key: ResourceKey, meta: CollectionMeta): Promise<void> {
    let files: CollectionFiles
    try {
      files = this.files(key)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.append(files, [encodeRecord({ t: 'm', ...meta })])
  }

  /**
   * Opens a collection's journal ahead of its first write (a watch cache about to list), in the
   * order of writes: a first list's write then goes out at once, while its answer is being built.
   */
  prepare(key: ResourceKey): void {
    let files: CollectionFiles
    try {
      files = this.files(key)
    } catch {
      return // its writes will say why
    }
    this.writing = this.writing.then(async () => {
      if (!files.journal) await this.openJournal(files).catch(error => this.log.warn({ err: errorMessage(error), dir: files.dir }, 'disk cache: journal not opened ahead; the first write tries again'))
    })
  }

  /** The body as the latest write left it (waiting, or in a file); undefined when removed or never written. */
  async readBody(key: ResourceKey, namespace: string, name: string): Promise<Buffer | undefined> {
    const files = this.files(key)
    const id = objectKey(namespace, name)
    if (files.unwritten.has(id)) return files.unwritten.get(id)
    const at = files.live.get(id)
    if (!at) return undefined
    const handle = await files.reader(at.file)
    const body = Buffer.allocUnsafe(at.size)
    const { bytesRead } = await handle.read(body, 0, at.size, at.bodyAt)
    if (bytesRead !== at.size) throw new Error(`disk cache: ${at.file}: short read of ${id}`)
    return body
  }

  /**
   * Replaces one piece of the hub's own state (`_state/<name>.json`) atomically: written to a temp
   * file, synced, renamed into place, the directory synced.
   */
  async writeState(name: string, value: unknown): Promise<void> {
    checkComponent('state name', name)
    const dir = path.join(this.cacheDir, stateDir)
    await durableMkdir(dir)
    const file = path.join(dir, `${name}.json`)
    const tmp = `${file}.tmp`
    const handle = await open(tmp, 'w', 0o600)
    try {
      await handle.writeFile(JSON.stringify(value))
      await handle.datasync()
    } finally {
      await handle.close()
    }
    await rename(tmp, file)
    await syncDir(dir)
  }

  /** A piece of the hub's own state, or undefined when there is none (or it cannot be read). */
  async readState(name: string): Promise<unknown> {
    checkComponent('state name', name)
    try {
      return JSON.parse(await readFile(path.join(this.cacheDir, stateDir, `${name}.json`), 'utf8'))
    } catch {
      return undefined
    }
  }

  /** Resolves once everything written so far is durable (fdatasync'd). */
  async flush(): Promise<void> {
    await this.writing
    if (this.writeScheduled) await new Promise<void>(resolve => setImmediate(resolve)).then(() => this.writing)
    await new Promise<void>((resolve, reject) => {
      this.syncWaiters.push({ resolve, reject })
      this.startSync()
    })
  }

  /** Stops: closes every file after what is pending has been written and synced. */
  async close(): Promise<void> {
    await this.flush().catch(() => {})
    for (const files of this.collections.values()) {
      await files.journal?.close().catch(() => {})
      files.journal = undefined
      for (const reader of files.readers.values()) await reader.then(h => h.close()).catch(() => {})
      files.readers.clear()
    }
  }

  private append(files: CollectionFiles, records: PendingRecord[]): Promise<void> {
    for (const record of records) files.pending.push(record)
    return new Promise((resolve, reject) => {
      files.waiters.push({ resolve, reject })
      if (records.length > 1) {
        // a batch (a list's items) is grouped already: it goes out now, not after whatever else
        // this turn of the event loop does (a list's answer is built while it is written)
        this.writing = this.writing.then(() => this.writeAll())
      } else if (!this.writeScheduled) {
        this.writeScheduled = true
        // everything appended in this turn of the event loop goes out in one write per journal
        setImmediate(() => {
          this.writeScheduled = false
          this.writing = this.writing.then(() => this.writeAll())
        })
      }
    })
  }

  private async writeAll(): Promise<void> {
    const batch = [...this.collections.values()].filter(f => f.pending.length > 0)
    await Promise.all(batch.map(files => this.writePending(files)))
    this.startSync()
  }

  private async writePending(files: CollectionFiles): Promise<void> {
    const records = files.pending
    const waiters = files.waiters
    const bodies = new Map(files.unwritten)
    files.pending = []
    files.waiters = []
    const bytes = records.reduce((sum, r) => sum + r.bytes, 0)
    try {
      if (!files.journal) await this.openJournal(files)
      const file = files.journalName()
      const start = files.journalSize
      const { bytesWritten } = await files.journal!.writev(records.flatMap(r => r.parts))
      if (bytesWritten !== bytes) throw new Error(`short write: ${bytesWritten} of ${bytes} bytes`)
      files.journalSize += bytes
      this.stats.bytesWritten += bytes
      this.stats.appends++
      let offset = start
      for (const { header, bytes: recordBytes } of records) {
        const size = header.t === 'p' ? header.size : 0
        this.apply(files, header, { file, bodyAt: offset + recordBytes - size, size, recordBytes })
        offset += recordBytes
      }
      // in the file now: read from there, unless a newer write is waiting
      for (const [id, body] of bodies) if (files.unwritten.get(id) === body) files.unwritten.delete(id)
      files.dirty = true
      for (const w of waiters) w.resolve()
    } catch (error) {
      this.stats.errors++
      const err = error instanceof Error ? error : new Error(String(error))
      this.log.error({ err, dir: files.dir }, `disk cache: write failed: ${err.message}`)
      // whatever reached the file is cut off when it is opened again
      await files.journal?.close().catch(() => {})
      files.journal = undefined
      for (const w of waiters) w.reject(err)
      return
    }
    if (files.journalSize > compactAfterBytes && files.journalSize > 2 * files.liveBytes && !files.compacting) void this.compact(files)
  }

  private apply(files: CollectionFiles, header: Header, at: Location): void {
    if (header.t === 'm') {
      files.meta = { listResourceVersion: header.listResourceVersion, listed: header.listed }
      return
    }
    const id = objectKey(header.namespace, header.name)
    const before = files.live.get(id)
    if (before) files.liveBytes -= before.recordBytes
    if (header.t === 'r') {
      files.live.delete(id)
      return
    }
    files.live.set(id, at)
    files.liveBytes += at.recordBytes
  }

  /** Opens the current journal for appending, cut to the records known whole. */
  private async openJournal(files: CollectionFiles): Promise<void> {
    await durableMkdir(files.dir)
    const name = files.journalName()
    const handle = await open(name, 'a', 0o600)
    try {
      if ((await handle.stat()).size !== files.journalSize) await handle.truncate(files.journalSize)
      await syncDir(files.dir)
    } catch (error) {
      await handle.close()
      throw error
    }
    files.journal = handle
  }

  /** One fdatasync per dirty journal; calls that arrive meanwhile share the next round. */
  private startSync(): void {
    if (this.syncing) return
    this.syncing = (async () => {
      const dirtyNow = () => [...this.collections.values()].filter(f => f.dirty && f.journal)
      while (this.syncWaiters.length > 0 || dirtyNow().length > 0) {
        const waiters = this.syncWaiters.splice(0)
        await this.writing
        // a journal closed since (a failed write, a compaction's switch) has nothing left to sync here
        for (const files of this.collections.values()) if (!files.journal) files.dirty = false
        const dirty = dirtyNow()
        let failure: Error | undefined
        await Promise.all(
          dirty.map(async files => {
            files.dirty = false
            try {
              await files.journal!.datasync()
            } catch (error) {
              files.dirty = true
              failure = error instanceof Error ? error : new Error(String(error))
            }
          }),
        )
        this.stats.syncs += dirty.length
        if (failure) this.log.error({ err: failure }, `disk cache: sync failed: ${failure.message}`)
        for (const w of waiters) (failure ? w.reject(failure) : w.resolve())
        if (failure) break
      }
    })().finally(() => {
      this.syncing = undefined
    })
  }

  /**
   * A new snapshot of the live records (copied as they are), then a new journal; the old files go
   * once the snapshot is durable and renamed into place. Records written meanwhile go to the new
   * journal, which a load replays over the new snapshot.
   */
  private async compact(files: CollectionFiles): Promise<void> {
    files.compacting = true
    try {
      // the switch happens between two writes: everything before it is in the old files
      const switched = this.writing.then(async () => {
        await files.journal?.datasync()
        await files.journal?.close()
        files.journal = undefined
        const old = { gen: files.gen, live: new Map(files.live), meta: files.meta }
        files.gen++
        files.journalSize = 0
        return old
      })
      this.writing = switched.then(() => undefined, () => undefined)
      const old = await switched
      const oldFiles = new Set([files.snapshotName(old.gen), files.journalName(old.gen)])
      const snapshot = files.snapshotName()
      const tmp = `${snapshot}.tmp`
      const out = await open(tmp, 'w', 0o600)
      const moved = new Map<string, Location>()
      try {
        let offset = 0
        for (const run of copyRuns(old.live)) {
          const chunk = Buffer.allocUnsafe(run.end - run.start)
          const { bytesRead } = await (await files.reader(run.file)).read(chunk, 0, chunk.length, run.start)
          if (bytesRead !== chunk.length) throw new Error(`${run.file}: short read at ${run.start}`)
          const parts: Buffer[] = []
          for (const [id, at] of run.records) {
            const header = at.recordBytes - at.size
            const recordAt = at.bodyAt - header - run.start
            parts.push(chunk.subarray(recordAt, recordAt + at.recordBytes))
            moved.set(id, { ...at, file: snapshot, bodyAt: offset + header })
            offset += at.recordBytes
          }
          await out.writev(parts)
        }
        if (old.meta) await out.writev(encodeRecord({ t: 'm', ...old.meta }).parts)
        await out.datasync()
      } finally {
        await out.close()
      }
      await rename(tmp, snapshot)
      await syncDir(files.dir)
      // what was not written again meanwhile now lives in the snapshot
      for (const [id, at] of moved) {
        const current = files.live.get(id)
        if (current && oldFiles.has(current.file)) files.live.set(id, at)
      }
      for (const name of oldFiles) {
        const reader = files.readers.get(name)
        files.readers.delete(name)
        await unlink(name).catch(() => {})
        void reader?.then(h => h.close()).catch(() => {})
      }
      this.stats.compactions++
    } catch (error) {
      this.log.error({ err: error, dir: files.dir }, `disk cache: compaction failed: ${errorMessage(error)}`)
    } finally {
      files.compacting = false
    }
  }

  /**
   * Reads every collection: the newest snapshot, then its journal; a torn tail is cut off.
   * Broken files are reported (and their objects are not loaded), never silently emptied.
   */
  async load(onEntry: (entry: DiskEntry) => void, onMeta: (key: ResourceKey, meta: CollectionMeta) => void = () => {}): Promise<LoadReport> {
    const report: LoadReport = { loaded: 0, failed: [] }
    const fail = (file: string, reason: string) => {
      report.failed.push({ path: file, reason })
      this.log.warn({ path: file, reason }, `disk cache: ${file}: ${reason}`)
    }
    for (const component of await readdir(this.cacheDir, { withFileTypes: true }).catch(() => [])) {
      if (component.name === stateDir) continue
      if (!component.isDirectory() || !validPathComponent(component.name)) {
        fail(path.join(this.cacheDir, component.name), 'not a component directory')
        continue
      }
      const componentDir = path.join(this.cacheDir, component.name)
      for (const resource of await readdir(componentDir, { withFileTypes: true }).catch(() => [])) {
        const parsed = validPathComponent(resource.name) ? parseResourceDir(resource.name) : undefined
        if (!resource.isDirectory() || !parsed) {
          fail(path.join(componentDir, resource.name), 'not a resource directory (<resource>.<version>.<group>)')
          continue
        }
        const files = this.files({ component: component.name, ...parsed })
        await this.loadCollection(files, report, fail, onEntry, onMeta)
      }
    }
    this.log.info(`disk cache: loaded ${report.loaded} object(s) from ${this.cacheDir}${report.failed.length > 0 ? `, ${report.failed.length} problem(s)` : ''}`)
    return report
  }

  private async loadCollection(
    files: CollectionFiles,
    report: LoadReport,
    fail: (file: string, reason: string) => void,
    onEntry: (entry: DiskEntry) => void,
    onMeta: (key: ResourceKey, meta: CollectionMeta) => void,
  ): Promise<void> {
    const names = await readdir(files.dir).catch(() => [] as string[])
    const gens = (prefix: string) => names.filter(n => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length))).map(n => Number(n.slice(prefix.length)))
    const snapshotGen = Math.max(-1, ...gens('snapshot.'))
    const gen = Math.max(0, snapshotGen, ...gens('journal.').filter(g => g >= snapshotGen))
    files.gen = gen
    const objects = new Map<string, CachedObject>()
    const read = async (file: string, isJournal: boolean) => {
      let bytes: Buffer
      try {
        bytes = await readFile(file)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') fail(file, `cannot read: ${errorMessage(error)}`)
        return
      }
      const { end, torn } = this.scan(files, file, bytes, objects)
      if (file === files.journalName(gen)) files.journalSize = end
      if (end === bytes.length) return
      if (isJournal && torn) {
        // the tail of a write a crash interrupted: the records before it stand
        this.log.warn({ path: file, at: end, bytes: bytes.length - end }, `disk cache: ${file}: cut a torn tail of ${bytes.length - end} bytes`)
        await truncate(file, end).catch(error => fail(file, `cannot cut the torn tail: ${errorMessage(error)}`))
        return
      }
      fail(file, `damaged at byte ${end} of ${bytes.length}: the records after it are lost; lists of this resource answer as never listed until it is listed again`)
      files.meta = undefined
      // new records go to a new journal, after the damage
      if (file === files.journalName(gen)) {
        files.gen = gen + 1
        files.journalSize = 0
      }
    }
    if (snapshotGen >= 0) await read(files.snapshotName(snapshotGen), false)
    for (let g = Math.max(0, snapshotGen); g <= gen; g++) await read(files.journalName(g), true)
    // leftovers of earlier generations, and temp files of an interrupted compaction
    for (const name of names) {
      const keep = name === `snapshot.${snapshotGen}` || (/^journal\.\d+$/.test(name) && Number(name.slice(8)) >= Math.max(0, snapshotGen)) || name.endsWith('.damaged')
      if (!keep) await rm(path.join(files.dir, name), { recursive: true, force: true })
    }
    for (const object of objects.values()) {
      report.loaded++
      onEntry({ key: { ...files.key }, object })
    }
    if (files.meta) onMeta({ ...files.key }, files.meta)
  }

  /**
   * Applies the records of one file in order. Returns where the good records end, and whether what
   * follows is a torn tail (an incomplete last record) rather than damage in the middle.
   */
  private scan(files: CollectionFiles, file: string, bytes: Buffer, objects: Map<string, CachedObject>): { end: number; torn: boolean } {
    let offset = 0
    while (offset < bytes.length) {
      if (offset + 8 > bytes.length) return { end: offset, torn: true }
      const length = bytes.readUInt32BE(offset)
      const next = offset + 8 + length
      if (length === 0 || length > maxRecordBytes) return { end: offset, torn: false }
      if (next > bytes.length) return { end: offset, torn: true }
      const payload = bytes.subarray(offset + 8, next)
      if (crc32(payload) !== bytes.readUInt32BE(offset + 4)) return { end: offset, torn: next === bytes.length }
      const newline = payload.indexOf(0x0a)
      let header: Header
      try {
        header = JSON.parse(payload.toString('utf8', 0, newline)) as Header
      } catch {
        return { end: offset, torn: false }
      }
      const body = payload.subarray(newline + 1)
      this.apply(files, header, { file, bodyAt: offset + 8 + newline + 1, size: body.length, recordBytes: 8 + length })
      if (header.t === 'p') {
        const { t: _t, size: _size, ...meta } = header
        objects.set(objectKey(header.namespace, header.name), { ...meta, body: Buffer.from(body) })
      } else if (header.t === 'r') {
        objects.delete(objectKey(header.namespace, header.name))
      }
      offset = next
    }
    return { end: offset, torn: false }
  }
}
