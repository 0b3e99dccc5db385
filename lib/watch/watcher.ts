// One local client's watch, served from a watch cache as kube-apiserver's cacher serves it: from
// now (resourceVersion unset), from the current state (0: ADDED events first), or replaying the
// events after N (410 Expired in the stream when N is older than the window); WatchList's initial
// events end with the annotated BOOKMARK; BOOKMARKs about every minute and just before
// timeoutSeconds when asked for. The client's filter (service topology) is applied to what it is
// sent, and a topology change re-filters it live. The initial state is written as the client takes
// it (what waits meanwhile is the cache's own objects, not frames). A client that does not keep up
// is closed once its backlog passes a budget (--max-watch-backlog) or it takes nothing for a while
// (--stall-timeout), so it never holds the others back or the hub's memory; it re-watches.
import type { CachedObject } from '../cache/types.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { failure } from '../api/status.ts'
import { FilteredWatch } from './refilter.ts'
import { writeAsTaken } from './frame-sink.ts'
import type { Frame, FrameSink } from './frame-sink.ts'
import type { CacheEvent, CacheListener, WatchCache } from './cache.ts'
import type { RefilterableWatch } from './filtered-watches.ts'
import type { ParsedScope } from '../cache/scope.ts'
import { eventInSelection, selects } from './selection.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { bookmarkFrame, errorFrame, eventFrame, eventFrameParts } from '../api/watch-event-frames.ts'

/** Why a watcher ended: its client left, timeoutSeconds, a slow client (past its backlog, or stalled), 410, or the hub ended it. */
export type WatcherEnd = 'client' | 'timeout' | 'backlog' | 'stalled' | 'expired' | 'ended'

export interface WatcherOptions {
  filter?: ResponseFilter
  allowBookmarks: boolean
  /** the client's selection, when narrower than the cache's scope: only its objects are sent (selection.ts) */
  selection?: ParsedScope
  /** from now, from the current state (ADDED events first), or the events after a version */
  from: 'now' | 'state' | bigint
  sendInitialEvents: boolean
  timeoutSeconds?: number
  bookmarkIntervalMs?: number
  /** bytes a client may fall behind before it is closed (default 4 MiB) */
  budgetBytes?: number
  /** a client that takes nothing of what waits for it this long is closed (default a minute) */
  stallTimeoutMs?: number
  onRefilterSent?(count: number): void
  onClosed?(why: WatcherEnd): void
}

const defaultBudgetBytes = 4 * 1024 * 1024
const defaultStallMs = 60_000
/** events held for a client whose initial state is still going out, past which it is closed */
const maxWaiting = 10_000

/** The frame for an event of a watch cache, made once per event and format and shared by every unfiltered watcher. */
const frames = new WeakMap<CacheEvent, Buffer>()

function sharedFrame(format: WireFormat, event: CacheEvent): Buffer {
  let frame = frames.get(event)
  if (!frame) {
    frame = eventFrame(format, event.type, event.object.apiVersion, event.object.kind, event.object.body)
    frames.set(event, frame)
  }
  return frame
}

export class CacheWatcher implements CacheListener, RefilterableWatch {
  private unsubscribe = () => {}
  private readonly timers: NodeJS.Timeout[] = []
  private tracker: FilteredWatch | undefined
  private closed = false
  /** the newest version this client has been told of */
  private delivered = 0n
  /** events at or below this version are not the client's (it watches from a version newer than the cache's) */
  private skipThrough = -1n
  /** while the initial state goes out: what happens meanwhile, in order, for after it */
  private waiting: (() => void)[] | undefined
  /** the client is behind, and has the stall timeout to take what waits for it */
  private stalling = false

  constructor(
    private readonly cache: WatchCache,
    private readonly sink: FrameSink,
    private readonly options: WatcherOptions,
  ) {}

  get selection(): ParsedScope | undefined {
    return this.options.selection
  }

  private get format(): WireFormat {
    return this.cache.format
  }

  /** Sends what comes first (the head is the caller's), then follows the cache until the client or the cache ends it. */
  start(): void {
    const { sink, options, cache } = this
    sink.onClose(() => this.close('client'))
    if (options.filter) {
      this.tracker = new FilteredWatch(this.format, options.filter, produce => this.later(() => this.write(produce())), { onSent: options.onRefilterSent })
    }
    this.unsubscribe = cache.subscribe(this, () => {
      const snapshot = cache.snapshot()
      const { resourceVersion } = snapshot
      const selection = options.selection
      const items = selection ? snapshot.items.filter(object => selects(selection, object)) : snapshot.items
      this.delivered = resourceVersion
      if (options.from === 'state' || options.sendInitialEvents) {
        this.waiting = []
        void this.sendState(items, resourceVersion)
        return
      }
      this.tracker?.seed(items)
      if (typeof options.from === 'bigint' && options.from > resourceVersion) {
        // a real version the cache has not reached (proven by cache-reads.ts): its events up to it are the client's already
        this.skipThrough = options.from
        this.delivered = options.from
      } else if (typeof options.from === 'bigint') {
        const replay = cache.eventsAfter(options.from)
        if (replay === 'expired') {
          this.expire(`too old resource version: ${options.from} (${resourceVersion})`)
          return
        }
        cache.stats.replayed += replay.length
        this.delivered = options.from
        for (const event of replay) this.onEvent(event)
        this.delivered = resourceVersion
      }
      // the client is at the cache's version now: a re-filter may stamp objects with it
      this.write(this.tracker?.advance(resourceVersion) ?? [])
    })
    if (options.allowBookmarks) this.timers.push(setInterval(() => this.bookmark(), options.bookmarkIntervalMs ?? 60_000))
    const timeout = options.timeoutSeconds
    if (timeout && timeout > 0) {
      // the apiserver sends a last BOOKMARK just before it ends a watch on its timeout
      if (options.allowBookmarks && timeout > 2) this.timers.push(setTimeout(() => this.bookmark(), (timeout - 2) * 1000))
      this.timers.push(setTimeout(() => this.close('timeout'), timeout * 1000))
    }
    for (const timer of this.timers) timer.unref()
  }

  /**
   * The current state as ADDED events, made and written as the client takes them; then WatchList's
   * BOOKMARK, then what happened meanwhile. A client that stops taking them is cut off.
   */
  private async sendState(items: readonly CachedObject[], resourceVersion: bigint): Promise<void> {
    const { cache, options } = this
    const tracker = this.tracker
    const format = this.format
    function* frames(): Generator<Frame> {
      for (const object of items) {
        if (tracker) yield* tracker.takeObject('ADDED', object, resourceVersion)
        else yield eventFrameParts(format, 'ADDED', object.apiVersion, object.kind, object.body)
      }
    }
    const whole = await writeAsTaken(this.sink, frames(), options.stallTimeoutMs ?? defaultStallMs)
    if (this.closed) return
    if (!whole) return this.close('stalled')
    if (options.sendInitialEvents) this.write([bookmarkFrame(format, cache.kind, cache.apiVersion, resourceVersion.toString(), true)])
    this.write(tracker?.advance(resourceVersion) ?? [])
    const waiting = this.waiting ?? []
    this.waiting = undefined
    for (const next of waiting) next()
  }

  /** Runs now, or after the initial state when it is still going out. */
  private later(next: () => void): void {
    if (!this.waiting) return next()
    this.waiting.push(next)
    // the cache's events are shared: this holds references, but not for ever
    if (this.waiting.length > maxWaiting) this.close('backlog')
  }

  onEvent(event: CacheEvent): void {
    if (this.closed || event.resourceVersion <= this.skipThrough) return
    if (this.waiting) return this.later(() => this.onEvent(event))
    const selection = this.options.selection
    if (!selection) return this.send(event.type, event.object, event.resourceVersion, event)
    const selected = eventInSelection(selection, event)
    if (selected) this.send(selected.type, selected.object, event.resourceVersion)
  }

  onProgress(resourceVersion: bigint): void {
    if (this.closed || !this.tracker) return
    if (this.waiting) return this.later(() => this.onProgress(resourceVersion))
    // a filtered object waiting for the stream to pass its version may go now
    this.write(this.tracker.advance(resourceVersion))
  }

  /** The 410 Expired ERROR event the apiserver ends such a watch with; the client lists again. */
  expire(message: string): void {
    if (this.closed) return
    this.cache.stats.expired++
    this.write([errorFrame(this.format, failure(410, message, 'Expired'))])
    setImmediate(() => this.close('expired'))
  }

  expireSentBeyond(version: bigint, why: string): boolean {
    if (this.closed || this.sentUpTo() <= version) return false
    this.expire(why)
    return true
  }

  /** the newest version the client was told, a re-filter's (minted) included */
  private sentUpTo(): bigint {
    const refiltered = this.tracker?.sentUpTo ?? 0n
    return refiltered > this.delivered ? refiltered : this.delivered
  }

  /** The topology is about to change: what this client was shown is worked out first (FilteredWatch.settle). */
  settle(): void {
    this.tracker?.settle()
  }

  /** The topology changed: this client's objects are filtered again at their turn. */
  refilter(moveTo?: bigint, affects?: (body: Buffer) => boolean): void {
    this.tracker?.refilter(moveTo, affects)
  }

  private send(type: string, object: CachedObject, streamVersion: bigint, memo?: CacheEvent): void {
    this.delivered = streamVersion
    if (this.tracker) this.write(this.tracker.takeObject(type, object, streamVersion))
    else this.write([memo ? sharedFrame(this.format, memo) : eventFrame(this.format, type, object.apiVersion, object.kind, object.body)])
  }

  private bookmark(): void {
    if (this.closed || this.waiting) return
    // never below what the client was told (a re-filter's minted version included)
    const told = this.sentUpTo()
    const version = this.cache.resourceVersion > told ? this.cache.resourceVersion : told
    this.delivered = version
    this.write([bookmarkFrame(this.format, this.cache.kind, this.cache.apiVersion, version.toString(), false), ...(this.tracker?.advance(version) ?? [])])
  }

  private write(out: Frame[]): void {
    if (this.closed || out.length === 0) return
    let behind = false
    for (const frame of out) if (!this.sink.write(frame)) behind = true
    if (this.sink.backlog > (this.options.budgetBytes ?? defaultBudgetBytes)) return this.close('backlog')
    if (behind) this.watchStall()
  }

  /** The client is behind: it is closed unless it takes what waits for it within the stall timeout. */
  private watchStall(): void {
    if (this.stalling) return
    this.stalling = true
    void this.sink.drained(this.options.stallTimeoutMs ?? defaultStallMs).then(taken => {
      this.stalling = false
      if (!taken) this.close('stalled')
    })
  }

  close(why: WatcherEnd): void {
    if (this.closed) return
    this.closed = true
    this.waiting = undefined
    this.unsubscribe()
    this.tracker?.close()
    for (const timer of this.timers) clearTimeout(timer)
    if (why === 'backlog' || why === 'stalled') this.sink.abort()
    else this.sink.end()
    this.options.onClosed?.(why)
  }

  /** Resolves when the client's stream has ended, for whatever reason. */
  done(): Promise<void> {
    return new Promise(resolve => this.sink.onClose(resolve))
  }
}
