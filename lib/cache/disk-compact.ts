// Compaction: the live records copied into a new snapshot, written whole (temp file, every write
// checked, synced, renamed, directory synced), then every older generation removed. Nothing old is
// touched until the new snapshot is in place: a full disk, a short write or EIO leaves the previous
// files as they were, and the next try waits.
import path from 'node:path'
import type { Logger } from 'pino'
import { syncDir } from '../durable-dirs.ts'
import { copyRuns } from './disk-files.ts'
import type { CollectionFiles, Location } from './disk-files.ts'
import type { HealthTracker } from './disk-health.ts'
import { errorMessage, writeFully } from './disk-io.ts'
import type { DiskIO } from './disk-io.ts'
import { encodeRecords } from './disk-records.ts'
import type { CollectionMeta } from './disk-records.ts'

/** Bytes a snapshot of these records takes (reported when it does not fit). */
export function snapshotBytes(live: ReadonlyMap<string, Location>): number {
  let bytes = 0
  for (const at of live.values()) bytes += at.recordBytes
  return bytes
}

/**
 * Writes `live` (read from the files they lie in) and `meta` as `snapshot`. Resolves with where
 * each record now lies; rejects with nothing of it left behind (the temp file is removed).
 */
export async function writeSnapshot(
  io: DiskIO,
  files: CollectionFiles,
  live: ReadonlyMap<string, Location>,
  meta: CollectionMeta | undefined,
  snapshot: string,
  limit: number,
): Promise<Map<string, Location>> {
  const tmp = `${snapshot}.tmp`
  const moved = new Map<string, Location>()
  try {
    const out = await io.open(tmp, 'w', 0o600)
    try {
      let offset = 0
      for (const run of copyRuns(live)) {
        const chunk = Buffer.allocUnsafe(run.end - run.start)
        const { bytesRead } = await (await files.reader(run.file)).read(chunk, 0, chunk.length, run.start)
        if (bytesRead !== chunk.length) throw new Error(`${run.file}: short read at ${run.start}`)
        const parts: Buffer[] = []
        let bytes = 0
        for (const [id, at] of run.records) {
          const header = at.recordBytes - at.size
          const recordAt = at.bodyAt - header - run.start
          parts.push(chunk.subarray(recordAt, recordAt + at.recordBytes))
          moved.set(id, { ...at, file: snapshot, bodyAt: offset + header })
          offset += at.recordBytes
          bytes += at.recordBytes
        }
        await writeFully(out, parts, bytes)
      }
      if (meta) {
        const [record] = encodeRecords([{ header: { t: 'm', ...meta } }], limit)
        await writeFully(out, record.parts, record.bytes)
      }
      await out.datasync()
    } finally {
      await out.close()
    }
    await io.rename(tmp, snapshot)
  } catch (error) {
    await io.unlink(tmp).catch(() => {})
    throw error
  }
  await syncDir(files.dir, io)
  return moved
}

/**
 * Removes every snapshot and journal older than generation `gen` (a compaction that failed earlier
 * may have left several), and closes their read handles.
 */
export async function removeOlderGenerations(io: DiskIO, files: CollectionFiles, gen: number): Promise<void> {
  for (const entry of await io.readdir(files.dir)) {
    const match = /^(?:snapshot|journal)\.(\d+)$/.exec(entry.name)
    if (!match || Number(match[1]) >= gen) continue
    const file = path.join(files.dir, entry.name)
    const reader = files.readers.get(file)
    files.readers.delete(file)
    await io.unlink(file).catch(() => {})
    void reader?.then(h => h.close()).catch(() => {})
  }
}

export interface CompactionContext {
  io: DiskIO
  log: Logger
  limit: number
  stats: { compactions: number; compactionFailures: number }
  tracker: HealthTracker
  /** runs `step` between two writes of the cache (no append is under way meanwhile) */
  betweenWrites<T>(step: () => Promise<T>): Promise<T>
  /** tries again in `waitMs` */
  retryLater(files: CollectionFiles, waitMs: number): void
}

/**
 * A new snapshot of the live records (copied as they are), then a new journal; the old files go
 * once the snapshot is durable and renamed into place. Records written meanwhile go to the new
 * journal, which a load replays over the new snapshot. A failure keeps every old file, and the
 * next try waits (1 s, doubling to a minute).
 */
export async function compact(context: CompactionContext, files: CollectionFiles): Promise<void> {
  const { io } = context
  let needed = 0
  try {
    // the switch happens between two writes: everything before it is in the old files
    const old = await context.betweenWrites(async () => {
      const journal = files.journal
      files.journal = undefined
      if (journal) {
        try {
          await journal.datasync()
        } finally {
          await journal.close().catch(() => {})
        }
      }
      const before = { live: new Map(files.live), meta: files.meta, journalBytes: files.journalBytes }
      files.gen++
      files.journalSize = 0
      files.journalBytes = 0
      return before
    })
    const gen = files.gen
    needed = snapshotBytes(old.live)
    let moved: Map<string, Location>
    try {
      moved = await writeSnapshot(io, files, old.live, old.meta, files.snapshotName(gen), context.limit)
    } catch (error) {
      // the journals not compacted are still to be
      files.journalBytes += old.journalBytes
      throw error
    }
    // what was not written again meanwhile now lives in the snapshot
    const current = files.journalName(gen)
    for (const [id, at] of moved) {
      const now = files.live.get(id)
      if (now && now.file !== current) files.live.set(id, at)
    }
    await removeOlderGenerations(io, files, gen)
    files.compactionSucceeded()
    context.stats.compactions++
    context.tracker.compacted(files.dir)
  } catch (error) {
    context.stats.compactionFailures++
    const waitMs = files.compactionFailed(Date.now())
    context.tracker.failed('compaction', files.dir, error, needed)
    context.log.debug({ dir: files.dir, err: errorMessage(error), retryInMs: waitMs }, 'disk cache: compaction failed; the previous files stay')
    context.retryLater(files, waitMs)
  }
}
