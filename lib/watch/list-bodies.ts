// Whole lists from the shared watch caches kept as the bytes written, per cache, selection and
// filter, until the cache or what the filters read changes. A list at resourceVersion=0 is then
// one write of bytes already made: no sort, no filtering, no assembly, nothing to collect. Every
// client of one list shares the one copy (an unread one holds a reference, not a copy).
// Bounded in bytes hub-wide; a body not read for `idleMs` is let go, so a hub at rest holds none.
import { LRUCache } from 'lru-cache'

/** What a body was made from: any change to one of them makes another body. */
export interface BodyStamp {
  /** the cache's objects (WatchCache.generation) */
  generation: number
  /** the list's resourceVersion, which a BOOKMARK moves without changing an object */
  resourceVersion: bigint
  /** what the filters read (ResponseFilter.generation); undefined: no filter */
  filters: object | undefined
}

interface Kept {
  stamp: BodyStamp
  body: Buffer
  /** tells the filters' reports what building the body told them, as each list is one more run */
  replay: () => void
}

export interface ListBodiesOptions {
  /** bytes of bodies kept hub-wide */
  maxBytes: number
  /** a body not read for this long is let go */
  idleMs: number
}

export const defaultListBodies: ListBodiesOptions = { maxBytes: 64 * 1024 * 1024, idleMs: 15_000 }

const sameStamp = (a: BodyStamp, b: BodyStamp): boolean => a.generation === b.generation && a.resourceVersion === b.resourceVersion && a.filters === b.filters

export class ListBodies {
  private readonly kept: LRUCache<string, Kept>

  constructor(options: ListBodiesOptions = defaultListBodies) {
    this.kept = new LRUCache<string, Kept>({
      maxSize: options.maxBytes,
      sizeCalculation: kept => Math.max(1, kept.body.length),
      ttl: options.idleMs,
      ttlAutopurge: true,
      updateAgeOnGet: true,
    })
  }

  /** The body kept for `key` when made from the same state, its reports told again; else undefined. */
  get(key: string, stamp: BodyStamp): Buffer | undefined {
    const kept = this.kept.get(key)
    if (!kept) return undefined
    if (!sameStamp(kept.stamp, stamp)) {
      this.kept.delete(key)
      return undefined
    }
    kept.replay()
    return kept.body
  }

  set(key: string, stamp: BodyStamp, body: Buffer, replay: () => void): void {
    this.kept.set(key, { stamp, body, replay })
  }

  /** bytes held now */
  get bytes(): number {
    return this.kept.calculatedSize
  }

  clear(): void {
    this.kept.clear()
  }
}
