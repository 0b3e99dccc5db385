// Live re-filtering of one open watch: it remembers, per object, what the apiserver last said
// (unfiltered) and what this client was last sent (filtered, or nothing when a filter drops it).
// When what the filters read changes (a Service's annotation, a node's pool, this node's labels)
// every object is filtered again, and only where the result differs an event goes out: MODIFIED
// when its filtered form changed, ADDED when the filters show it again, DELETED when they drop one
// the client was shown. An apiserver event is turned the same way (a MODIFIED that makes an object
// visible is an ADDED to this client), and a client never hears of an object it was never shown.
//
// Order: the re-filter runs at its turn in the stream (lib/watch/pipeline.ts), after every frame
// that came before it, so it filters the newest body and cannot overtake a newer event.
// Version: a re-filtered object carries the stream's newest resourceVersion (its last event or
// BOOKMARK), never one the stream has not reached, so a client that resumes from it misses
// nothing. Informers such as client-node's drop a MODIFIED whose version they already hold; while
// the client already holds the stream's newest version for the object, its event waits for the
// stream to move on (the hub asks the apiserver for BOOKMARKs, about one a minute). After
// `deferMs` it goes out anyway at the version the client holds (client-go, which kube-proxy,
// coredns and nginx-ingress-controller use, takes that), and once more when the stream moves on.
import type { CachedObject } from '../cache/types.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { decodeUnknown, decodeWatchEvent, objectMeta } from '../codec/protobuf.ts'
import { stampedBody } from './stamp.ts'
import { eventFrame, eventFrameParts } from '../api/watch-event-frames.ts'
import type { Frame } from './frame-sink.ts'
import { watchEventRanges } from '../codec/json-scan.ts'
import { numericVersion } from '../cache/versions.ts'
import type { WireFormat } from '../api/wire-format.ts'

/** An object as the apiserver last said it: a watch cache's own (shared by every watch), or a relayed event. */
interface Source {
  apiVersion: string
  kind: string
  /** JSON text of the object, or its raw protobuf message */
  body: Buffer
  resourceVersion: string | bigint
}

/**
 * What one watch knows of an object beyond its source. An object the client holds as its source
 * filters now, at the source's version, with nothing to send, needs none of this: the watch keeps
 * the source itself (a map entry, no copy: a watch of 10,000 slices from a watch cache holds about
 * 0.5 MB), and a Tracked only while it differs.
 */
class Tracked {
  /**
   * the same, filtered, as last sent; null: the filters drop it, the client does not have it;
   * undefined: what the filters make of the source while nothing they read has changed (seeded
   * and not filtered yet, or sent as filtered then; settle() fills it in before anything changes),
   * so a watch holds no filtered copy of the objects it has sent
   */
  sent: Buffer | null | undefined
  /** the resourceVersion the client holds for it, when not the source's own (re-filtered: the stream's) */
  sentVersion: bigint | undefined = undefined
  /** send: its filtered form changed and the client does not have it; resend: sent at a version the client already held */
  needs: 'send' | 'resend' | undefined = undefined

  constructor(
    readonly source: Source,
    sent?: Buffer | null,
  ) {
    this.sent = sent
  }
}

interface ObjectEvent extends Source {
  type: string
  key: string
  resourceVersion: bigint
}

/** BOOKMARK, ERROR: only a version to learn from */
interface OtherEvent {
  type: string
  resourceVersion: bigint
  key?: undefined
}

const objectEvents = new Set(['ADDED', 'MODIFIED', 'DELETED'])
const eventObjectMembers = ['kind', 'apiVersion', 'metadata']

export interface FilteredWatchOptions {
  /** the watch's resourceVersion: the stream is known to have reached it */
  startResourceVersion?: string
  /** told how many re-filtered events went out */
  onSent?(count: number): void
  /** longest wait for the stream to pass an object's own version (default 1 s) */
  deferMs?: number
}

export class FilteredWatch {
  private readonly objects = new Map<string, Tracked | Source>()
  /** the newest resourceVersion this stream has delivered */
  private highWater: bigint
  private queued = false
  /** the version the next re-filter moves the stream to, when one was minted */
  private moveTo: bigint | undefined
  /** which objects the next re-filter looks at: all, or those some change since the last one may touch */
  private scope: ((body: Buffer) => boolean)[] | 'all' | undefined
  /** keys of objects that need an event */
  private readonly pending = new Set<string>()
  private deferTimer: NodeJS.Timeout | undefined
  /** some object's filtered form is not kept (settle() has work to do) */
  private unsettled = false

  constructor(
    private readonly format: WireFormat,
    private readonly filter: ResponseFilter,
    /** queues frames of the hub's own into the client's stream, computed at their turn */
    private readonly inject: (produce: () => Frame[]) => void,
    private readonly options: FilteredWatchOptions = {},
  ) {
    this.highWater = numericVersion(options.startResourceVersion ?? '')
  }

  /** the newest resourceVersion this stream has delivered (a minted one included) */
  get sentUpTo(): bigint {
    return this.highWater
  }

  private track(key: string, source: Source, sent: Buffer | null | undefined): void {
    this.objects.set(key, sent === undefined || sent === source.body ? source : new Tracked(source, sent))
    if (sent === undefined) this.unsettled = true
    this.pending.delete(key)
  }

  /** An object's entry, as a Tracked (one kept as its source becomes one: the caller may change it). */
  private tracked(key: string): Tracked | undefined {
    const entry = this.objects.get(key)
    if (entry === undefined || entry instanceof Tracked) return entry
    const tracked = new Tracked(entry)
    this.objects.set(key, tracked)
    return tracked
  }

  /**
   * The objects the client already has (from its list). Their filtered form is worked out when it
   * is first needed, not here: a watch that follows a list of 10,000 slices would filter them all
   * again before its first event, and hold a filtered copy of each that no event may ever ask for.
   */
  seed(objects: readonly CachedObject[]): void {
    for (const object of objects) {
      if (object.format !== this.format) continue
      this.track(keyOf(object), object, undefined)
    }
  }

  /**
   * What the filters read is about to change: objects whose filtered form is not kept get it now,
   * while it is still the one the client was shown (the re-filter that follows compares against it).
   */
  settle(): void {
    // the topology source says so before every change: only objects seeded or sent since the last one are filtered
    if (!this.unsettled) return
    for (const [key, entry] of this.objects) {
      if (!(entry instanceof Tracked)) this.objects.set(key, new Tracked(entry, this.filtered(entry)))
      else if (entry.sent === undefined) this.sentOf(entry)
    }
    this.unsettled = false
  }

  /** Whether the client has the object; one whose filtered form is not kept is filtered to tell only if the filters may drop it (a seed). */
  private clientHas(tracked: Tracked): boolean {
    if (tracked.sent === undefined && !this.filter.mayDrop(tracked.source.kind)) return true
    return this.sentOf(tracked) !== null
  }

  private sentOf(tracked: Tracked): Buffer | null {
    if (tracked.sent === undefined) tracked.sent = this.filtered(tracked.source)
    return tracked.sent
  }

  private filtered(source: Source): Buffer | null {
    return this.filter.object(this.format, source.apiVersion, source.kind, source.body)
  }

  /**
   * One upstream frame at its turn: decoded once, filtered once, tracked; returns what the client
   * gets (the upstream's own bytes when the filter changed nothing), then any re-filtered objects
   * the stream has now moved past.
   */
  take(frame: Buffer): Frame[] {
    let event: ObjectEvent | OtherEvent
    try {
      event = this.format === 'protobuf' ? this.decodeProtobuf(frame) : this.decodeJson(frame)
    } catch {
      const out = this.filter.frame(this.format, frame) // unreadable: the filter decides
      return out === null ? [] : [out]
    }
    return this.takeDecoded(event, frame)
  }

  /**
   * One event of a watch cache at its turn: the object as the cache holds it, and the version the
   * stream is at after it. Returns the frames for the client, as take() does.
   */
  takeObject(type: string, object: CachedObject, streamVersion: bigint, frame?: Buffer): Frame[] {
    if (streamVersion > this.highWater) this.highWater = streamVersion
    return this.takeDecoded(
      {
        type,
        key: keyOf(object),
        apiVersion: object.apiVersion,
        kind: object.kind,
        body: object.body,
        resourceVersion: numericVersion(object.resourceVersion),
      },
      frame,
      object,
    )
  }

  /** The stream has reached a version (a BOOKMARK): objects waiting for it go out now. */
  advance(streamVersion: bigint): Frame[] {
    if (streamVersion > this.highWater) this.highWater = streamVersion
    return this.pending.size > 0 ? this.flush(false) : []
  }

  /** `source`: what to keep of the object (a watch cache's own object; default the event) */
  private takeDecoded(event: ObjectEvent | OtherEvent, frame?: Buffer, source: Source | undefined = event.key === undefined ? undefined : event): Frame[] {
    if (event.resourceVersion > this.highWater) this.highWater = event.resourceVersion
    if (event.key === undefined) return [frame!, ...(this.pending.size > 0 ? this.flush(false) : [])]
    const held = this.tracked(event.key)
    // an ADDED is news to the client whatever the tracker was seeded with (a seed may be newer than
    // the version the watch started from); otherwise the client has what it was last shown, and
    // an object the tracker never saw it has if the apiserver says so (a MODIFIED or a DELETED)
    const clientHas = event.type === 'ADDED' ? false : held ? this.clientHas(held) : true
    const out: Frame[] = []
    if (event.type === 'DELETED') {
      this.objects.delete(event.key)
      this.pending.delete(event.key)
      if (clientHas) {
        // the apiserver's DELETED carries the object at its deletion version: filtered, or (when the
        // filters drop it now) the form the client was shown, stamped with that version
        const filtered = this.filtered(event)
        if (filtered !== null && frame && filtered === event.body) out.push(frame)
        else
          out.push(
            eventFrame(
              this.format,
              'DELETED',
              event.apiVersion,
              event.kind,
              filtered ?? this.stamped((held && this.sentOf(held)) ?? event.body, event.resourceVersion),
            ),
          )
      }
    } else {
      const filtered = this.filtered(event)
      // a filtered form the filters give again on demand is not kept (settle() works it out before
      // they change), unless they may drop the kind: then clientHas() reads it, not a filtering
      const kept = filtered === null || filtered === event.body || this.filter.mayDrop(event.kind) ? filtered : undefined
      this.track(event.key, source!, kept)
      if (filtered === null) {
        // dropped now: a client that was shown it is told it is gone, at this event's version
        const shown = clientHas && held ? this.sentOf(held) : null
        if (shown) out.push(eventFrame(this.format, 'DELETED', event.apiVersion, event.kind, this.stamped(shown, event.resourceVersion)))
      } else {
        const type = clientHas ? 'MODIFIED' : 'ADDED'
        if (frame) out.push(filtered === event.body && type === event.type ? frame : eventFrame(this.format, type, event.apiVersion, event.kind, filtered))
        // from a watch cache: the object's own bytes, not copied into a frame (a watch's initial state is 10,000 of these)
        else out.push(eventFrameParts(this.format, type, event.apiVersion, event.kind, filtered))
      }
    }
    return this.pending.size > 0 ? [...out, ...this.flush(false)] : out
  }

  /**
   * What the filters read changed: queue one re-filter (several changes before its turn share it).
   * `moveTo`: a version minted for the change (offline, where nothing newer is real): the stream
   * moves on to it first, so every client takes the events as news (lib/overlay/pod-overlay.ts).
   * `affects`: the change can only touch objects whose body it says yes to (a conservative test);
   * without it, every object is filtered again.
   */
  refilter(moveTo?: bigint, affects?: (body: Buffer) => boolean): void {
    if (moveTo !== undefined && (this.moveTo === undefined || moveTo > this.moveTo)) this.moveTo = moveTo
    if (!affects) this.scope = 'all'
    else if (this.scope !== 'all') this.scope = [...(this.scope ?? []), affects]
    if (this.queued) return
    this.queued = true
    this.inject(() => {
      this.queued = false
      if (this.moveTo !== undefined && this.moveTo > this.highWater) this.highWater = this.moveTo
      this.moveTo = undefined
      const scope = this.scope
      this.scope = undefined
      for (const [key, tracked] of this.objects) {
        // kept as its source: what the filters make of it now is what the client was sent
        if (!(tracked instanceof Tracked)) continue
        // a change that can only touch some objects (one pod's endpoints): the others are not filtered again
        if (scope !== 'all' && scope !== undefined && !scope.some(affected => affected(tracked.source.body))) continue
        if (tracked.needs === 'send') continue
        if (same(this.filtered(tracked.source), this.sentOf(tracked))) continue
        tracked.needs = 'send'
        this.pending.add(key)
      }
      return this.flush(false)
    })
  }

  /**
   * Events for the objects that need one: at the stream's newest version where the client holds an
   * older one; with `force`, changed objects also at the version the client holds.
   */
  private flush(force: boolean): Frame[] {
    const out: Frame[] = []
    const send = (tracked: Tracked, filtered: Buffer | null) => {
      // what the client is told: it changed, it appeared (no longer dropped), or it is gone (dropped now)
      const before = this.sentOf(tracked)
      const shown = filtered ?? before
      const type = filtered === null ? 'DELETED' : before === null ? 'ADDED' : 'MODIFIED'
      tracked.sent = filtered
      if (shown) out.push(eventFrame(this.format, type, tracked.source.apiVersion, tracked.source.kind, this.stamped(shown, versionOf(tracked))))
    }
    for (const key of [...this.pending]) {
      const tracked = this.tracked(key)!
      const filtered = this.filtered(tracked.source)
      if (tracked.needs === 'send' && same(filtered, this.sentOf(tracked))) {
        tracked.needs = undefined // changed back before it went out
        this.pending.delete(key)
      } else if (this.highWater > versionOf(tracked)) {
        tracked.needs = undefined
        tracked.sentVersion = this.highWater
        this.pending.delete(key)
        send(tracked, filtered)
      } else if (force && tracked.needs === 'send') {
        tracked.needs = 'resend' // again once the stream moves on, for clients that dropped it
        send(tracked, filtered)
      }
    }
    if (out.length > 0) this.options.onSent?.(out.length)
    this.armDeferTimer()
    return out
  }

  private armDeferTimer(): void {
    const waiting = [...this.pending].some(key => this.tracked(key)?.needs === 'send')
    if (!waiting) {
      if (this.deferTimer) clearTimeout(this.deferTimer)
      this.deferTimer = undefined
      return
    }
    if (this.deferTimer) return
    this.deferTimer = setTimeout(() => {
      this.deferTimer = undefined
      this.inject(() => this.flush(true))
    }, this.options.deferMs ?? 1_000)
    this.deferTimer.unref()
  }

  /** The watch ended. */
  close(): void {
    if (this.deferTimer) clearTimeout(this.deferTimer)
  }

  private stamped(object: Buffer, version: bigint): Buffer {
    return stampedBody(this.format, object, version.toString())
  }

  private decodeJson(frame: Buffer): ObjectEvent | OtherEvent {
    const { type: typeRange, object: objectRange, inner } = watchEventRanges(frame, eventObjectMembers)
    if (!typeRange || !objectRange) throw new Error('not a watch event')
    const type = JSON.parse(frame.toString('utf8', typeRange.start, typeRange.end)) as string
    const text = (name: string) => {
      const r = inner.get(name)
      return r ? (JSON.parse(frame.toString('utf8', r.start, r.end)) as unknown) : undefined
    }
    const meta = (text('metadata') ?? {}) as { name?: string; namespace?: string; resourceVersion?: string }
    const resourceVersion = numericVersion(meta.resourceVersion ?? '')
    if (!objectEvents.has(type)) return { type, resourceVersion }
    return {
      type,
      key: `${meta.namespace ?? ''}/${meta.name}`,
      apiVersion: String(text('apiVersion') ?? ''),
      kind: String(text('kind') ?? ''),
      body: frame.subarray(objectRange.start, objectRange.end),
      resourceVersion,
    }
  }

  private decodeProtobuf(frame: Buffer): ObjectEvent | OtherEvent {
    const event = decodeWatchEvent(frame)
    const unknown = decodeUnknown(event.object)
    const raw = Buffer.from(unknown.raw)
    const meta = objectMeta(raw)
    const resourceVersion = numericVersion(meta.resourceVersion)
    if (!objectEvents.has(event.type)) return { type: event.type, resourceVersion }
    return { type: event.type, key: `${meta.namespace}/${meta.name}`, apiVersion: unknown.apiVersion, kind: unknown.kind, body: raw, resourceVersion }
  }
}

/** The version the client holds for an object: the one it was last sent at. */
function versionOf(tracked: Tracked): bigint {
  if (tracked.sentVersion !== undefined) return tracked.sentVersion
  const version = tracked.source.resourceVersion
  return typeof version === 'bigint' ? version : numericVersion(version)
}

/** One key string per cached object, shared by every watch that tracks it. */
const keys = new WeakMap<Source, string>()

function keyOf(object: CachedObject): string {
  let key = keys.get(object)
  if (key === undefined) {
    key = `${object.namespace}/${object.name}`
    keys.set(object, key)
  }
  return key
}

function same(a: Buffer | null, b: Buffer | null): boolean {
  return a === b || (a !== null && b !== null && a.equals(b))
}
