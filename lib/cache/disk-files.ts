// One collection's files (one component's view of one resource): which generation is current,
// where each live object's record lies, what waits to be written, and the compaction's state.
import path from 'node:path'
import type { DiskFile, DiskIO } from './disk-io.ts'
import type { CollectionMeta, EncodedRecord, Header } from './disk-records.ts'
import { objectKey } from './types.ts'
import type { ResourceKey } from './types.ts'

export interface Location {
  file: string
  /** offset and size of the body within the file */
  bodyAt: number
  size: number
  /** bytes of the whole record, for the live-data total */
  recordBytes: number
}

export interface Waiter {
  resolve: () => void
  reject: (error: Error) => void
}

/** first wait after a failed compaction, doubled at each failure up to the most */
export const compactionBackoffMs = { first: 1_000, most: 60_000 }

export class CollectionFiles {
  /** the current generation: new records go to journal.<gen> */
  gen = 0
  journal: DiskFile | undefined
  /** bytes of journal.<gen> known whole: a journal opened again is cut back to this */
  journalSize = 0
  /** bytes of every journal not yet compacted (a failed compaction leaves older ones in place) */
  journalBytes = 0
  readonly live = new Map<string, Location>()
  liveBytes = 0
  meta: CollectionMeta | undefined
  /** records waiting for the next write, and who waits for them to be written */
  pending: EncodedRecord[] = []
  /** bodies of objects in `pending`, for readBody meanwhile (undefined: a removal) */
  readonly unwritten = new Map<string, Buffer | undefined>()
  waiters: Waiter[] = []
  dirty = false
  /** the compaction under way */
  compacting: Promise<void> | undefined
  /** damage was found at load: a compaction rewrites the good records, whatever the sizes */
  needsRewrite = false
  compactNotBefore = 0
  compactBackoffMs = 0
  compactRetry: NodeJS.Timeout | undefined
  /** read handles by file name, kept open so a compaction can unlink files still being read */
  readonly readers = new Map<string, Promise<DiskFile>>()

  constructor(
    readonly key: ResourceKey,
    readonly dir: string,
    private readonly io: DiskIO,
  ) {}

  journalName(gen = this.gen): string {
    return path.join(this.dir, `journal.${gen}`)
  }

  snapshotName(gen = this.gen): string {
    return path.join(this.dir, `snapshot.${gen}`)
  }

  reader(file: string): Promise<DiskFile> {
    let handle = this.readers.get(file)
    if (!handle) {
      handle = this.io.open(file, 'r')
      this.readers.set(file, handle)
      handle.catch(() => this.readers.delete(file))
    }
    return handle
  }

  /** A record now in a file: what the collection holds changes accordingly. */
  apply(header: Header, at: Location): void {
    if (header.t === 'b') return
    if (header.t === 'm') {
      const { t: _t, ...meta } = header
      this.meta = meta
      return
    }
    const id = objectKey(header.namespace, header.name)
    const before = this.live.get(id)
    if (before) this.liveBytes -= before.recordBytes
    if (header.t === 'r') {
      this.live.delete(id)
      return
    }
    this.live.set(id, at)
    this.liveBytes += at.recordBytes
  }

  /** Compaction has not failed lately, and there is enough to gain (or damage to rewrite). */
  wantsCompaction(afterBytes: number, now: number): boolean {
    if (this.compacting || now < this.compactNotBefore) return false
    return this.needsRewrite || (this.journalBytes > afterBytes && this.journalBytes > 2 * this.liveBytes)
  }

  compactionFailed(now: number): number {
    this.compactBackoffMs = Math.min(compactionBackoffMs.most, this.compactBackoffMs === 0 ? compactionBackoffMs.first : this.compactBackoffMs * 2)
    this.compactNotBefore = now + this.compactBackoffMs
    return this.compactBackoffMs
  }

  compactionSucceeded(): void {
    this.compactBackoffMs = 0
    this.compactNotBefore = 0
    this.needsRewrite = false
  }

  async closeFiles(): Promise<void> {
    clearTimeout(this.compactRetry)
    await this.journal?.close().catch(() => {})
    this.journal = undefined
    for (const reader of this.readers.values()) await reader.then(h => h.close()).catch(() => {})
    this.readers.clear()
  }
}

/** the most a compaction reads at once, and the widest stretch of dead records it reads over */
const copyChunkBytes = 4 * 1024 * 1024
const copyGapBytes = 64 * 1024

export interface CopyRun {
  file: string
  start: number
  end: number
  records: [string, Location][]
}

/**
 * The live records in file order, in runs a compaction reads with one pread each: records of one
 * file that lie together (dead records of up to copyGapBytes between them are read and skipped),
 * up to copyChunkBytes a run. A watch's records mostly lie together in the journal: one read and
 * one write per run, not one each per object.
 */
export function copyRuns(live: ReadonlyMap<string, Location>): CopyRun[] {
  const start = (at: Location) => at.bodyAt - (at.recordBytes - at.size)
  const sorted = [...live].sort(([, a], [, b]) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.bodyAt - b.bodyAt))
  const runs: CopyRun[] = []
  let run: CopyRun | undefined
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
