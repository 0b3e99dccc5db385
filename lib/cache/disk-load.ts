// Reading one collection back: the newest snapshot, then the journals after it, in order. A torn
// tail (a write a crash cut short: a record or a batch) is cut off; damage inside a file is not
// believed: what came before it loads, and the collection lists no scope whole.
import path from 'node:path'
import type { Logger } from 'pino'
import type { CollectionFiles } from './disk-files.ts'
import { errorCode, errorMessage } from './disk-io.ts'
import type { DiskIO } from './disk-io.ts'
import { notACollection, validPathComponent } from './disk-paths.ts'
import { scanRecords } from './disk-records.ts'
import type { CollectionMeta } from './disk-records.ts'
import { objectKey, parseResourceDir } from './types.ts'
import type { CachedObject, ResourceKey } from './types.ts'

export interface DiskEntry {
  key: ResourceKey
  object: CachedObject
}

export interface LoadFailure {
  path: string
  reason: string
  /** the collection whose records were lost (damage, an unreadable file), when the path is one's */
  key?: ResourceKey
}

export interface LoadReport {
  loaded: number
  failed: LoadFailure[]
}

export interface LoadContext {
  io: DiskIO
  log: Logger
  limit: number
  cacheDir: string
  /** the collection's files, made on first use */
  collection(key: ResourceKey): CollectionFiles
  /** rewrites a damaged collection's good records (a compaction, before any new write) */
  rewrite(files: CollectionFiles): void
}

/** What the load tells as it goes: the collections it will read (in that order), and each once read. */
export interface LoadProgress {
  planned?(keys: ResourceKey[]): void
  /** a collection read, with what could not be read of it */
  loaded?(key: ResourceKey, failed: LoadFailure[]): void
}

/**
 * Every collection under the cache dir, read back, smallest first, one at a time with a turn of
 * the event loop between them (the hub answers what is loaded while the rest loads: a large or
 * damaged collection does not hold up a small one); what cannot be read is reported, never
 * silently emptied.
 */
export async function loadCollections(
  context: LoadContext,
  onEntry: (entry: DiskEntry) => void,
  onMeta: (key: ResourceKey, meta: CollectionMeta) => void,
  progress: LoadProgress = {},
): Promise<LoadReport> {
  const { io, log, cacheDir } = context
  const report: LoadReport = { loaded: 0, failed: [] }
  const fail = (file: string, reason: string, key?: ResourceKey) => {
    report.failed.push(key ? { path: file, reason, key: { ...key } } : { path: file, reason })
    log.warn({ path: file, reason }, `disk cache: ${file}: ${reason}`)
  }
  const plan: { key: ResourceKey; bytes: number }[] = []
  for (const component of await io.readdir(cacheDir).catch(() => [])) {
    if (notACollection(component.name)) continue
    if (!component.isDirectory() || !validPathComponent(component.name)) {
      fail(path.join(cacheDir, component.name), 'not a component directory')
      continue
    }
    const componentDir = path.join(cacheDir, component.name)
    for (const resource of await io.readdir(componentDir).catch(() => [])) {
      const parsed = validPathComponent(resource.name) ? parseResourceDir(resource.name) : undefined
      if (!resource.isDirectory() || !parsed) {
        fail(path.join(componentDir, resource.name), 'not a resource directory (<resource>.<version>.<group>)')
        continue
      }
      const dir = path.join(componentDir, resource.name)
      let bytes = 0
      for (const file of await io.readdir(dir).catch(() => [])) bytes += (await io.stat(path.join(dir, file.name)).catch(() => ({ size: 0 }))).size
      plan.push({ key: { component: component.name, ...parsed }, bytes })
    }
  }
  plan.sort((a, b) => a.bytes - b.bytes)
  progress.planned?.(plan.map(p => ({ ...p.key })))
  for (const { key } of plan) {
    const files = context.collection(key)
    const read = await readCollection(io, log, context.limit, files, (file, reason) => fail(file, reason, files.key))
    if (read.damaged.length > 0) {
      await setDamagedAside(io, log, files, read.damaged)
      files.needsRewrite = true
      context.rewrite(files)
    }
    for (const object of read.objects.values()) {
      report.loaded++
      onEntry({ key: { ...files.key }, object })
    }
    if (files.meta) onMeta({ ...files.key }, files.meta)
    progress.loaded?.(
      { ...key },
      report.failed.filter(
        f => f.key && f.key.component === key.component && f.key.group === key.group && f.key.version === key.version && f.key.resource === key.resource,
      ),
    )
    await new Promise(resolve => setImmediate(resolve))
  }
  log.info(`disk cache: loaded ${report.loaded} object(s) from ${cacheDir}${report.failed.length > 0 ? `, ${report.failed.length} problem(s)` : ''}`)
  return report
}

interface CollectionRead {
  objects: Map<string, CachedObject>
  /** files damaged inside (not at a torn tail): their good records are to be rewritten */
  damaged: string[]
  /** damaged or unreadable files: the scopes listed whole are not believed */
  failed: boolean
}

const generationOf = (names: readonly string[], prefix: string) =>
  names.filter(n => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length))).map(n => Number(n.slice(prefix.length)))

/** Reads a collection's files into `files` (live records, meta, generation) and returns its objects. */
async function readCollection(
  io: DiskIO,
  log: Logger,
  limit: number,
  files: CollectionFiles,
  fail: (file: string, reason: string) => void,
): Promise<CollectionRead> {
  const names = (await io.readdir(files.dir).catch(() => [])).map(entry => entry.name)
  const snapshotGen = Math.max(-1, ...generationOf(names, 'snapshot.'))
  const gen = Math.max(0, snapshotGen, ...generationOf(names, 'journal.').filter(g => g >= snapshotGen))
  files.gen = gen
  const objects = new Map<string, CachedObject>()
  const read: CollectionRead = { objects, damaged: [], failed: false }
  const leaveCurrentJournal = (file: string) => {
    // new records go to a new journal, never after the bad part of this one
    if (file === files.journalName(gen)) {
      files.gen = gen + 1
      files.journalSize = 0
    }
  }
  const readFile = async (file: string, isJournal: boolean) => {
    let bytes: Buffer
    try {
      bytes = await io.readFile(file)
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return
      fail(file, `cannot read: ${errorMessage(error)}; lists of this resource answer as never listed until it is listed again`)
      read.failed = true
      leaveCurrentJournal(file)
      return
    }
    const { end, torn } = scanRecords(bytes, limit, record => {
      const { header } = record
      files.apply(header, { file, bodyAt: record.bodyAt, size: record.size, recordBytes: record.recordBytes })
      if (header.t === 'p') {
        const { t: _t, size: _size, ...meta } = header
        objects.set(objectKey(header.namespace, header.name), { ...meta, body: Buffer.from(bytes.subarray(record.bodyAt, record.bodyAt + record.size)) })
      } else if (header.t === 'r') {
        objects.delete(objectKey(header.namespace, header.name))
      }
    })
    if (isJournal) files.journalBytes += end
    if (file === files.journalName(gen)) files.journalSize = end
    if (end === bytes.length) return
    if (isJournal && torn) {
      // the tail of a write a crash interrupted: the records before it stand
      log.warn({ path: file, at: end, bytes: bytes.length - end }, `disk cache: ${file}: cut a torn tail of ${bytes.length - end} bytes`)
      await io.truncate(file, end).catch(error => fail(file, `cannot cut the torn tail: ${errorMessage(error)}`))
      return
    }
    fail(
      file,
      `damaged at byte ${end} of ${bytes.length}: the records after it are lost; lists of this resource answer as never listed until it is listed again`,
    )
    read.damaged.push(file)
    read.failed = true
    leaveCurrentJournal(file)
  }
  if (snapshotGen >= 0) await readFile(files.snapshotName(snapshotGen), false)
  for (let g = Math.max(0, snapshotGen); g <= gen; g++) await readFile(files.journalName(g), true)
  // leftovers of earlier generations, and temp files of an interrupted compaction
  for (const name of names) {
    const keep =
      name === `snapshot.${snapshotGen}` || (/^journal\.\d+$/.test(name) && Number(name.slice(8)) >= Math.max(0, snapshotGen)) || name.endsWith('.damaged')
    if (!keep) await io.rm(path.join(files.dir, name))
  }
  // what a scope list says whole may lie past the damage (a meta record after it included)
  if (read.failed && files.meta) files.meta = { ...files.meta, listed: [] }
  return read
}

/**
 * Keeps a copy of each damaged file as `<file>.damaged` (a hard link: the original goes when the
 * good records are rewritten), replacing the copies an earlier load kept.
 */
async function setDamagedAside(io: DiskIO, log: Logger, files: CollectionFiles, damaged: readonly string[]): Promise<void> {
  for (const entry of await io.readdir(files.dir).catch(() => [])) {
    if (entry.name.endsWith('.damaged')) await io.unlink(path.join(files.dir, entry.name)).catch(() => {})
  }
  for (const file of damaged) {
    await io.link(file, `${file}.damaged`).catch(error => log.warn({ path: file, err: errorMessage(error) }, 'disk cache: no copy of the damaged file kept'))
  }
}
