// Hands the store's changes to the disk, one atomic batch per change, and owns what happens when the
// disk refuses one (ENOSPC, EIO, a short write): the change stays in memory (its bodies pinned),
// the collection is "lagging", and every later change of that collection joins the lag instead of
// going to disk on its own. A retry (with backoff) writes memory's current state of everything
// lagging in a collection, and the collection's meta record, as ONE batch. So whatever the disk
// holds after any crash is a state the collection really was in: the last one written whole.
import type { Logger } from 'pino'
import type { CachedObject, ResourceKey } from './types.ts'
import { objectKey, resourceDirName } from './types.ts'
import type { CollectionMeta, DiskCache, DiskOp } from './disk.ts'

/** What the store holds now, for a retry: an object's current state (undefined: removed), its meta. */
export interface CurrentState {
  object(key: ResourceKey, namespace: string, name: string): CachedObject | undefined
  meta(key: ResourceKey): CollectionMeta | undefined
}

interface Lagging {
  key: ResourceKey
  /** objects whose disk state lags memory, with the body memory had when it last changed (pinned) */
  objects: Map<string, { namespace: string; name: string; body: Buffer | undefined }>
  meta: boolean
  error: string
}

export class Persister {
  private readonly lagging = new Map<string, Lagging>()
  private retryTimer: NodeJS.Timeout | undefined
  private retryDelay: number
  private retrying = false
  readonly stats = { writeFailures: 0 }

  constructor(
    private readonly disk: DiskCache,
    private readonly current: CurrentState,
    private readonly log: Logger,
    private readonly retryMs = 1_000,
  ) {
    this.retryDelay = retryMs
  }

  private static id(key: ResourceKey): string {
    return `${key.component}/${resourceDirName(key)}`
  }

  /** Objects whose latest state is not on disk yet. */
  get unsavedCount(): number {
    let count = 0
    for (const lag of this.lagging.values()) count += lag.objects.size
    return count
  }

  /** A body that is only in memory (its write is lagging): the store must not lose it to its LRU. */
  pinned(key: ResourceKey, namespace: string, name: string): Buffer | undefined {
    return this.lagging.get(Persister.id(key))?.objects.get(objectKey(namespace, name))?.body
  }

  /** Why the disk does not hold what memory holds, or undefined when it does. */
  lagReason(): string | undefined {
    for (const lag of this.lagging.values())
      return `${this.unsavedCount} object(s) of ${this.lagging.size} collection(s) only in memory (first: ${Persister.id(lag.key)}: ${lag.error})`
    return undefined
  }

  /**
   * Writes one change as one batch. Resolves when it is on disk or, failing that, kept for a retry:
   * the caller goes on serving from memory either way.
   */
  async write(key: ResourceKey, ops: readonly DiskOp[]): Promise<void> {
    if (ops.length === 0) return
    const lag = this.lagging.get(Persister.id(key))
    if (lag) {
      this.join(lag, ops)
      return
    }
    try {
      await this.disk.write(key, ops)
    } catch (error) {
      this.stats.writeFailures += ops.length
      // another write of the collection may have failed first, while this one was under way
      let fresh = this.lagging.get(Persister.id(key))
      if (!fresh) {
        fresh = { key, objects: new Map(), meta: false, error: (error as Error).message }
        this.lagging.set(Persister.id(key), fresh)
        // the disk says it once per failure streak (what failed, how much room it needs); this is per collection
        this.log.debug(
          { component: key.component, resource: resourceDirName(key), err: fresh.error },
          'cache: a write failed; the collection is kept in memory and written again, whole, once the disk takes it',
        )
      }
      this.join(fresh, ops)
      this.scheduleRetry()
    }
  }

  private join(lag: Lagging, ops: readonly DiskOp[]): void {
    for (const op of ops) {
      if (op.t === 'meta') lag.meta = true
      else if (op.t === 'put')
        lag.objects.set(objectKey(op.object.namespace, op.object.name), { namespace: op.object.namespace, name: op.object.name, body: op.object.body })
      else lag.objects.set(objectKey(op.namespace, op.name), { namespace: op.namespace, name: op.name, body: undefined })
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.retrying) return
    this.retryTimer = setTimeout(() => void this.retry(), this.retryDelay)
    this.retryTimer.unref()
  }

  /** Writes each lagging collection's current state as one batch. */
  async retry(): Promise<void> {
    this.retryTimer = undefined
    this.retrying = true
    let failed = false
    try {
      for (const [id, lag] of [...this.lagging]) {
        // what changes meanwhile joins this lag (and is not written on its own): the next round takes it
        const taken = new Map(lag.objects)
        const tookMeta = lag.meta
        lag.meta = false
        const ops: DiskOp[] = []
        for (const { namespace, name } of taken.values()) {
          const object = this.current.object(lag.key, namespace, name)
          ops.push(object ? { t: 'put', object } : { t: 'remove', namespace, name })
        }
        const meta = tookMeta ? this.current.meta(lag.key) : undefined
        if (meta) ops.push({ t: 'meta', meta })
        try {
          await this.disk.write(lag.key, ops)
        } catch (error) {
          failed = true
          this.stats.writeFailures += ops.length
          lag.meta ||= tookMeta
          lag.error = (error as Error).message
          continue
        }
        for (const [k, v] of taken) if (lag.objects.get(k) === v) lag.objects.delete(k)
        if (lag.objects.size === 0 && !lag.meta) {
          this.lagging.delete(id)
          this.log.debug({ component: lag.key.component, resource: resourceDirName(lag.key), objects: taken.size }, 'cache: the disk took the collection again')
        }
      }
    } finally {
      this.retrying = false
    }
    this.retryDelay = failed ? Math.min(this.retryDelay * 2, 60_000) : this.retryMs
    if (this.lagging.size > 0) this.scheduleRetry()
  }

  close(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer)
    this.retryTimer = undefined
  }
}
