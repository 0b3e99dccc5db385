// The on-disk cache: per component and resource, an append-only journal of records (an object
// written, an object removed, the scopes listed whole) over a compacted snapshot:
//   <cacheDir>/<component>/<resource>.<version>.<group>/snapshot.<gen>, journal.<gen>
// (records: disk-records.ts). Writes of one moment are grouped: one writev() per journal carries a
// burst, and the promise of each batch resolves once all of it is in the file (the kernel has it:
// it survives a SIGKILL of the hub). A batch stands or falls whole, after any crash too.
// Durability against power loss is shared: one fdatasync per journal per round, however many
// records the round carries (`flush()` waits for it). A torn tail is cut off at load; damage is
// not believed (disk-load.ts). A journal grown well past its live data is compacted into a new
// snapshot (disk-compact.ts). One process owns the dir (lock.ts); a write the disk refuses is
// rejected, logged once per streak, and reported by health() (disk-health.ts).
import path from 'node:path'
import type { Logger } from 'pino'
import { durableMkdir, syncDir } from '../durable-dirs.ts'
import { compact } from './disk-compact.ts'
import type { CompactionContext } from './disk-compact.ts'
import { CollectionFiles } from './disk-files.ts'
import { HealthTracker } from './disk-health.ts'
import type { DiskHealth } from './disk-health.ts'
import { asError, errorCode, errorMessage, nodeDiskIO, writeFully } from './disk-io.ts'
import type { DiskIO } from './disk-io.ts'
import { loadCollections } from './disk-load.ts'
import type { DiskEntry, LoadProgress, LoadReport } from './disk-load.ts'
import { checkComponent, stateDir } from './disk-paths.ts'
import { defaultMaxRecordBytes, encodeRecords, payloadBytes, putHeader, recordOf } from './disk-records.ts'
import type { CollectionMeta, DiskOp, EncodedRecord } from './disk-records.ts'
import { acquireDirLock, CacheDirLockedError } from './lock.ts'
import { cacheDirError, checkCacheDir } from './disk-dir.ts'
import type { DirLock } from './lock.ts'
import { objectKey, resourceDirName } from './types.ts'
import type { CachedObject, ResourceKey } from './types.ts'

export type { CollectionMeta, DiskOp } from './disk-records.ts'
export { ObjectTooLargeError } from './disk-records.ts'
export type { DiskHealth } from './disk-health.ts'
export type { DiskIO, DiskFile, DirEntry } from './disk-io.ts'
export { CacheDirLockedError } from './lock.ts'
export { CacheDirUnusableError } from './disk-dir.ts'
export type { DiskEntry, LoadFailure, LoadProgress, LoadReport } from './disk-load.ts'
export { validPathComponent } from './disk-paths.ts'

export interface DiskCacheOptions {
  /** the file operations (tests inject faults here) */
  io?: DiskIO
  /** the largest record written and loaded (tests) */
  maxRecordBytes?: number
  /** compact a journal once it is this large and at least twice its collection's live data (tests) */
  compactAfterBytes?: number
  /** how often the lock is checked to still be ours (tests) */
  lockCheckMs?: number
}

const defaultCompactAfterBytes = 4 * 1024 * 1024

const closedError = () => new Error('disk cache closed')

export class DiskCache {
  readonly stats = { writes: 0, removes: 0, bytesWritten: 0, errors: 0, appends: 0, syncs: 0, compactions: 0, compactionFailures: 0 }
  private readonly collections = new Map<string, CollectionFiles>()
  private writeScheduled = false
  private writing: Promise<void> = Promise.resolve()
  private syncing: Promise<void> | undefined
  private readonly syncWaiters: { resolve: () => void; reject: (error: Error) => void }[] = []
  private readonly tracker: HealthTracker
  private readonly compaction: CompactionContext
  private readonly maxRecordBytes: number
  private readonly compactAfterBytes: number
  private closed = false
  private closing: Promise<void> | undefined
  /** why the lock was lost (another process may write the dir): nothing more is written */
  private lockLost: Error | undefined

  private constructor(
    readonly cacheDir: string,
    private readonly log: Logger,
    private readonly io: DiskIO,
    private readonly lock: DirLock,
    options: DiskCacheOptions,
  ) {
    this.tracker = new HealthTracker(log, io, cacheDir)
    this.maxRecordBytes = options.maxRecordBytes ?? defaultMaxRecordBytes
    this.compactAfterBytes = options.compactAfterBytes ?? defaultCompactAfterBytes
    this.compaction = this.compactionContext()
  }

  /**
   * Takes the cache dir: created (0700) if missing, locked before anything in it is read or written.
   * Throws CacheDirLockedError when another live process holds it, CacheDirUnusableError when it
   * cannot be created, locked or written.
   */
  static async open(cacheDir: string, log: Logger, options: DiskCacheOptions = {}): Promise<DiskCache> {
    const io = options.io ?? nodeDiskIO
    const root = path.resolve(cacheDir)
    const unusable = (what: string, error: unknown) => cacheDirError(root, errorCode(error) ?? 'EIO', `cannot ${what}: ${errorMessage(error)}`)
    // before mkdir: what it would hide (EROFS as ENOENT) or loop on (a pseudo-filesystem) is told here
    await checkCacheDir(root)
    try {
      await durableMkdir(root, io)
    } catch (error) {
      // mkdir -p of a path that is a file
      if (errorCode(error) === 'EEXIST') throw cacheDirError(root, 'ENOTDIR', 'it is a file, not a directory')
      throw unusable('create it', error)
    }
    let cache: DiskCache | undefined
    let lock: DirLock
    try {
      lock = await acquireDirLock(root, { io, checkMs: options.lockCheckMs, onLost: reason => cache?.lostLock(reason) })
    } catch (error) {
      if (error instanceof CacheDirLockedError) throw error
      throw unusable('lock and write it', error)
    }
    // a directory the hub does not own may refuse the chmod and still be writable (the lock wrote in it)
    await io
      .chmod(root, 0o700)
      .catch(error => log.warn({ dir: root, err: errorMessage(error) }, 'disk cache: cannot make the cache dir 0700; other users may read it'))
    cache = new DiskCache(root, log, io, lock, options)
    return cache
  }

  /** the disk's health: durable=false from a failed write/sync/compaction until a write and sync succeed again */
  health(): DiskHealth {
    return this.tracker.health()
  }

  /** whether `object` can be written: the record it makes is within the one limit the loader accepts */
  fits(object: CachedObject): boolean {
    return payloadBytes(putHeader(object), object.body) <= this.maxRecordBytes
  }

  private files(key: ResourceKey): CollectionFiles {
    checkComponent('component', key.component)
    const resourceDir = resourceDirName(key)
    checkComponent('resource directory', resourceDir)
    const id = `${key.component}/${resourceDir}`
    let files = this.collections.get(id)
    if (!files) {
      files = new CollectionFiles({ ...key }, path.join(this.cacheDir, key.component, resourceDir), this.io)
      this.collections.set(id, files)
    }
    return files
  }

  /**
   * One collection's ops as one atomic batch, in order: one promise, resolved once every record is
   * in the file, rejected if any is not. A load applies a batch only if every record of it is whole.
   * An object over the record limit rejects it with ObjectTooLargeError, and nothing of it is written.
   */
  write(key: ResourceKey, ops: readonly DiskOp[]): Promise<void> {
    if (this.closed) return Promise.reject(closedError())
    if (ops.length === 0) return Promise.resolve()
    let files: CollectionFiles
    let records: EncodedRecord[]
    try {
      files = this.files(key)
      const headed = ops.map(recordOf)
      records = encodeRecords(ops.length > 1 ? [{ header: { t: 'b', n: ops.length } }, ...headed] : headed, this.maxRecordBytes)
    } catch (error) {
      return Promise.reject(error)
    }
    for (const op of ops) {
      if (op.t === 'put') {
        files.unwritten.set(objectKey(op.object.namespace, op.object.name), op.object.body)
        this.stats.writes++
      } else if (op.t === 'remove') {
        files.unwritten.set(objectKey(op.namespace, op.name), undefined)
        this.stats.removes++
      }
    }
    return this.append(files, records)
  }

  put(key: ResourceKey, object: CachedObject): Promise<void> {
    return this.write(key, [{ t: 'put', object }])
  }

  /** Objects of one collection, appended together as one batch: one promise for all of them (a list's items). */
  putAll(key: ResourceKey, objects: readonly CachedObject[]): Promise<void> {
    return this.write(
      key,
      objects.map(object => ({ t: 'put', object })),
    )
  }

  remove(key: ResourceKey, namespace: string, name: string): Promise<void> {
    return this.write(key, [{ t: 'remove', namespace, name }])
  }

  putCollectionMeta(key: ResourceKey, meta: CollectionMeta): Promise<void> {
    return this.write(key, [{ t: 'meta', meta }])
  }

  /**
   * Opens a collection's journal ahead of its first write (a watch cache about to list), in the
   * order of writes: a first list's write then goes out at once, while its answer is being built.
   */
  prepare(key: ResourceKey): void {
    if (this.closed) return
    let files: CollectionFiles
    try {
      files = this.files(key)
    } catch {
      return // its writes will say why
    }
    this.writing = this.writing.then(async () => {
      if (!files.journal && !this.closed)
        await this.openJournal(files).catch(error =>
          this.log.warn({ err: errorMessage(error), dir: files.dir }, 'disk cache: journal not opened ahead; the first write tries again'),
        )
    })
  }

  /** The body as the latest write left it (waiting, or in a file); undefined when removed or never written. */
  async readBody(key: ResourceKey, namespace: string, name: string): Promise<Buffer | undefined> {
    const files = this.files(key)
    const id = objectKey(namespace, name)
    if (files.unwritten.has(id)) return files.unwritten.get(id)
    const at = files.live.get(id)
    if (!at) return undefined
    if (this.closed) throw closedError()
    const handle = await files.reader(at.file)
    const body = Buffer.allocUnsafe(at.size)
    const { bytesRead } = await handle.read(body, 0, at.size, at.bodyAt)
    if (bytesRead !== at.size) throw new Error(`disk cache: ${at.file}: short read of ${id}`)
    return body
  }

  /**
   * Replaces one piece of the hub's own state (`_state/<name>.json`) atomically: written to a temp
   * file, synced, renamed into place, the directory synced. A failure leaves the previous state.
   */
  async writeState(name: string, value: unknown): Promise<void> {
    if (this.closed) throw closedError()
    checkComponent('state name', name)
    const dir = path.join(this.cacheDir, stateDir)
    const file = path.join(dir, `${name}.json`)
    const tmp = `${file}.tmp`
    const data = Buffer.from(JSON.stringify(value))
    try {
      await durableMkdir(dir, this.io)
      const handle = await this.io.open(tmp, 'w', 0o600)
      try {
        await writeFully(handle, [data], data.length)
        await handle.datasync()
      } finally {
        await handle.close()
      }
      await this.io.rename(tmp, file)
      await syncDir(dir, this.io)
    } catch (error) {
      await this.io.unlink(tmp).catch(() => {})
      this.tracker.failed('write', dir, error, data.length)
      throw error
    }
    this.tracker.replaced(dir)
  }

  /** A piece of the hub's own state, or undefined when there is none (or it cannot be read). */
  async readState(name: string): Promise<unknown> {
    checkComponent('state name', name)
    try {
      return JSON.parse((await this.io.readFile(path.join(this.cacheDir, stateDir, `${name}.json`))).toString('utf8'))
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

  /**
   * Stops: what is pending is written and synced, a compaction under way finishes, every file is
   * closed and the lock released. Any later write rejects ('disk cache closed').
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true
      await this.flush().catch(() => {})
      for (const files of this.collections.values()) {
        clearTimeout(files.compactRetry)
        await files.compacting
      }
      for (const files of this.collections.values()) await files.closeFiles()
      await this.lock.release()
    })()
    return this.closing
  }

  /**
   * For tests: stops as a kill -9 would. Nothing more is written, flushed or closed (files stay as
   * the io left them: a test's io closes them), timers stop, and the lock is released so that
   * another instance can open the dir in the same process.
   */
  async abandon(): Promise<void> {
    this.closed = true
    this.closing ??= Promise.resolve()
    for (const files of this.collections.values()) clearTimeout(files.compactRetry)
    await this.lock.release()
  }

  private lostLock(reason: string): void {
    this.lockLost = new Error(`disk cache: ${reason}; nothing more is written`)
    this.tracker.failed('lock', this.cacheDir, this.lockLost)
  }

  private append(files: CollectionFiles, records: EncodedRecord[]): Promise<void> {
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
    let bytes = 0
    for (const record of records) bytes += record.bytes
    try {
      if (this.lockLost) throw this.lockLost
      if (!files.journal) await this.openJournal(files)
      const file = files.journalName()
      const start = files.journalSize
      const parts: Buffer[] = []
      for (const record of records) for (const part of record.parts) parts.push(part)
      await writeFully(files.journal!, parts, bytes)
      files.journalSize += bytes
      files.journalBytes += bytes
      this.stats.bytesWritten += bytes
      this.stats.appends++
      let offset = start
      for (const { header, bytes: recordBytes } of records) {
        const size = header.t === 'p' ? header.size : 0
        files.apply(header, { file, bodyAt: offset + recordBytes - size, size, recordBytes })
        offset += recordBytes
      }
      // in the file now: read from there, unless a newer write is waiting
      for (const [id, body] of bodies) if (files.unwritten.get(id) === body) files.unwritten.delete(id)
      files.dirty = true
      this.tracker.wrote(files.dir)
      for (const w of waiters) w.resolve()
    } catch (error) {
      this.stats.errors++
      const err = asError(error)
      this.tracker.failed('write', files.dir, err, bytes)
      // whatever reached the file is cut off when it is opened again
      await files.journal?.close().catch(() => {})
      files.journal = undefined
      for (const w of waiters) w.reject(err)
      return
    }
    if (files.wantsCompaction(this.compactAfterBytes, Date.now())) this.startCompaction(files)
  }

  /** Opens the current journal for appending, cut to the records known whole. */
  private async openJournal(files: CollectionFiles): Promise<void> {
    await durableMkdir(files.dir, this.io)
    const handle = await this.io.open(files.journalName(), 'a', 0o600)
    try {
      if ((await handle.stat()).size !== files.journalSize) await handle.truncate(files.journalSize)
      await syncDir(files.dir, this.io)
    } catch (error) {
      await handle.close().catch(() => {})
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
              this.tracker.synced(files.dir)
            } catch (error) {
              files.dirty = true
              failure = asError(error)
              this.tracker.failed('sync', files.dir, failure)
            }
          }),
        )
        this.stats.syncs += dirty.length
        for (const w of waiters) failure ? w.reject(failure) : w.resolve()
        if (failure) break
      }
    })().finally(() => {
      this.syncing = undefined
    })
  }

  private startCompaction(files: CollectionFiles): void {
    if (this.closed || files.compacting) return
    files.compacting = compact(this.compaction, files).finally(() => {
      files.compacting = undefined
    })
  }

  /** What a compaction needs of the cache: where it may switch journals, and what to tell. */
  private compactionContext(): CompactionContext {
    return {
      io: this.io,
      log: this.log,
      limit: this.maxRecordBytes,
      stats: this.stats,
      tracker: this.tracker,
      betweenWrites: <T>(step: () => Promise<T>) => {
        const done = this.writing.then(step)
        this.writing = done.then(
          () => undefined,
          () => undefined,
        )
        return done
      },
      retryLater: (files, waitMs) => {
        if (this.closed) return
        files.compactRetry = setTimeout(() => {
          if (files.wantsCompaction(this.compactAfterBytes, Date.now())) this.startCompaction(files)
        }, waitMs)
        files.compactRetry.unref()
      },
    }
  }

  /**
   * Reads every collection: the newest snapshot, then its journals; a torn tail is cut off. Damage
   * is reported with its collection, which then lists no scope whole (onMeta gets `listed: []`);
   * its good records are rewritten as a fresh snapshot, the damaged file kept as `<file>.damaged`.
   */
  load(onEntry: (entry: DiskEntry) => void, onMeta: (key: ResourceKey, meta: CollectionMeta) => void = () => {}, progress?: LoadProgress): Promise<LoadReport> {
    return loadCollections(
      {
        io: this.io,
        log: this.log,
        limit: this.maxRecordBytes,
        cacheDir: this.cacheDir,
        collection: key => this.files(key),
        rewrite: files => this.startCompaction(files),
      },
      onEntry,
      onMeta,
      progress,
    )
  }
}
