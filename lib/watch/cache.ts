// A watch cache for one (resource, scope, wire format), after kube-apiserver's cacher: fed by one
// upstream Reflector, it holds the scope's objects and a window of recent events, and serves every
// local client's lists and watches from them, with the apiserver's resourceVersions. Objects are
// immutable once stored (filters make new bytes, never change these). Each change is written to
// the disk cache before any watcher is told of it, so what a client has been shown survives a
// SIGKILL. After an outage the upstream watch resumes from the cache's version and the apiserver
// replays what was missed; when it must relist instead (a 410: the outage outlasted the apiserver's
// window) the difference to what the cache held goes to every watcher as events, in
// resourceVersion order. Either way no local client has to relist. The newest version of an object
// wins (an older event changes nothing); a relist older than the cache's version is a new history
// (etcd restored from a backup): the cache takes it as it is and ends every watcher with 410 Expired,
// as the apiserver's own watchers end, so each client lists again. A cache takes only its resource's kind.
import type { Logger } from 'pino'
import type { CachedObject, ResourceKey } from '../cache/types.ts'
import type { CacheStore } from '../cache/store.ts'
import type { ParsedScope } from '../cache/scope.ts'
import { vouchedFields } from '../cache/scope.ts'
import { labelsOf } from '../cache/entries.ts'
import { storageKey } from '../api/continue-token.ts'
import { apiVersionOf, builtinKind, kindProblem } from '../api/kinds.ts'
import { isNotOlder, newestOf } from '../cache/versions.ts'
import type { EventType, ReflectorSink } from './reflector.ts'
import { EventWindow } from './event-window.ts'
import { stampedBody } from './stamp.ts'
import { numericVersion } from '../cache/versions.ts'
import type { WireFormat } from '../api/wire-format.ts'

/** events whose disk write may be under way before the reflector is held back */
const maxInFlight = 4096

export interface CacheEvent {
  type: EventType
  object: CachedObject
  /** the version the cache is at after this event */
  resourceVersion: bigint
  /** the object as the cache held it before (a watcher with a narrower selector tells an object leaving it as DELETED) */
  previous?: CachedObject
}

/** What a watcher is told: an event, or that the cache has reached a version (for BOOKMARKs). */
export interface CacheListener {
  onEvent(event: CacheEvent): void
  onProgress(resourceVersion: bigint): void
  /** the apiserver's history went back: the client must list again (410 Expired, then the end) */
  expire(why: string): void
  /** the part of the cache the listener follows, when narrower than the cache's scope */
  readonly selection?: ParsedScope
}

export interface WatchCacheOptions {
  /** the disk cache and the key its objects are kept under (shared by every component) */
  store?: CacheStore
  storeKey: ResourceKey
  scope: ParsedScope
  format: WireFormat
  log: Logger
  /** events kept for watches that resume from a version (default 4096) */
  windowSize?: number
  /** and no more bytes of them than this (eventBytes; default no bound) */
  windowMaxBytes?: number
  /** the values of the resource's selectable fields (spec.nodeName, spec.type, …), kept with each object so selectors are answered without its body */
  selectableFields?(object: CachedObject): Record<string, string> | undefined
}

function idOf(object: CachedObject): string {
  return storageKey(object.namespace, object.name)
}

/**
 * What an event in the window keeps alive: its object, the object before it, and the frame watchers
 * share (watcher.ts sharedFrame: one per event, its object's body in an envelope, held while the event is).
 */
export function eventBytes(event: CacheEvent): number {
  return 2 * event.object.body.length + (event.previous?.body.length ?? 0)
}

/** The object as told at `version`: its own when that is its version, else a copy stamped with it. */
function atVersion(object: CachedObject, version: bigint): CachedObject {
  const rv = version.toString()
  if (object.resourceVersion === rv) return object
  return { ...object, resourceVersion: rv, body: stampedBody(object.format, object.body, rv) }
}

let caches = 0

export class WatchCache implements ReflectorSink {
  /** the scope's objects, by storage key */
  readonly objects = new Map<string, CachedObject>()
  /** this cache among the hub's, for what is kept per cache (list-bodies.ts) */
  readonly id = ++caches
  /** moves on with every change to `objects`: what was made from them is stale once it has */
  generation = 0
  /** the last snapshot's objects in order, while `generation` has not moved */
  private sorted: { generation: number; items: CachedObject[] } | undefined
  /** the version the cache is at: its last list, event or BOOKMARK */
  resourceVersion = 0n
  /** the oldest version a watch can resume from (events after it are in the window) */
  private oldest = 0n
  /** the last list's version: a relist's events say what changed since the cache's version, not when, so states before it are not known exactly */
  private listedAt = 0n
  private readonly window: EventWindow<CacheEvent>
  readonly listeners = new Set<CacheListener>()
  private syncedResolve!: () => void
  /** resolves once the first list (or the disk's copy, offline) is in */
  readonly synced = new Promise<void>(resolve => (this.syncedResolve = resolve))
  isSynced = false
  /** the resource's kind (learned from the first answer when the hub has no table for it) */
  kind: string
  readonly apiVersion: string
  readonly stats = { relists: 0, replayed: 0, expired: 0, olderIgnored: 0, newHistories: 0 }
  lastUsed = Date.now()
  /** lists apply one at a time, after every event before them */
  private queue: Promise<void> = Promise.resolve()
  /** events (and progress) whose disk write is under way, told to watchers in order once written */
  private readonly inFlight: { written: Promise<unknown>; apply: () => void }[] = []
  private draining = false
  private readonly idle: (() => void)[] = []
  /** the newest version received (its event may still be in flight) */
  private applied = 0n
  /** the first list's disk write (events and relists are applied only once written) */
  private writing: Promise<void> = Promise.resolve()

  /** field values the scope's selector vouches for (kubelet's spec.nodeName), stored with each object */
  private readonly fields: Record<string, string> | undefined

  constructor(readonly options: WatchCacheOptions) {
    this.window = new EventWindow({ capacity: options.windowSize ?? 4096, maxBytes: options.windowMaxBytes, sizeOf: eventBytes })
    this.fields = vouchedFields(options.scope)
    this.kind = builtinKind(options.storeKey.group, options.storeKey.resource) ?? ''
    this.apiVersion = apiVersionOf(options.storeKey.group, options.storeKey.version)
    options.store?.prepare(options.storeKey)
  }

  private vouched(object: CachedObject): CachedObject {
    const selectable = this.options.selectableFields?.(object)
    if (!this.fields && !selectable) return object
    return { ...object, fields: { ...object.fields, ...this.fields, ...selectable } }
  }

  /** what the objects are: the format asked for, unless the apiserver answered in another (JSON for `protobuf, *\/*`) */
  private answered: WireFormat | undefined

  get format(): WireFormat {
    return this.answered ?? this.options.format
  }

  /** Starts from what the disk holds for this scope (a restart while the cloud is away). */
  seed(items: CachedObject[], resourceVersion: string): void {
    if (items[0]) this.answered = items[0].format
    // labels too: what the disk gives back has them in its index, not on the object, and every selection reads them
    for (const object of items) this.objects.set(idOf(object), this.vouched(object.labels ? object : { ...object, labels: labelsOf(object) }))
    this.generation++
    if (items[0]) this.admit(items[0].kind, items[0].apiVersion)
    this.resourceVersion = numericVersion(resourceVersion)
    this.applied = this.resourceVersion
    this.oldest = this.resourceVersion
    this.seededAt = resourceVersion
    this.markSynced()
  }

  /** the version of the disk's copy the cache was seeded with, until a list is taken (the reflector's first list asks for no older) */
  seededAt: string | undefined

  private markSynced(): void {
    if (this.isSynced) return
    this.isSynced = true
    this.syncedResolve()
  }

  /** Throws when an answer is not of this cache's resource: nothing of it is taken. */
  private admit(kind: string, apiVersion: string): void {
    const problem = kindProblem(this, kind, apiVersion)
    if (problem) throw new Error(`watch cache for ${this.options.storeKey.resource}: not taken: ${problem}`)
    this.kind ||= kind
  }

  replace(listed: CachedObject[], resourceVersion: string, format?: WireFormat, type?: { kind: string; apiVersion: string }): Promise<void> {
    // the list's own kind: an empty list of another resource must not empty this one
    if (type) this.admit(type.kind, type.apiVersion)
    for (const object of listed) this.admit(object.kind, object.apiVersion)
    const items = newestOf(listed.map(o => this.vouched(o)))
    return this.serially(async () => {
      if (format) this.answered = format
      const listVersion = numericVersion(resourceVersion)
      const first = !this.isSynced
      this.seededAt = undefined
      if (!first) this.stats.relists++
      const newHistory = !first && listVersion > 0n && listVersion < this.resourceVersion
      const events = first || newHistory ? [] : this.difference(items, listVersion)
      // indexed and queued for the journal at once; the write itself is under way after this
      const written =
        this.options.store?.replaceScope(this.options.storeKey, this.options.scope, { items, kind: this.kind, apiVersion: this.apiVersion, resourceVersion }) ??
        Promise.resolve()
      // nobody has been shown anything of a first list yet: it is taken now, and answers built from
      // it while the write is under way are sent once it is done (written()); a relist waits
      if (!first) await written
      this.objects.clear()
      for (const object of items) this.objects.set(idOf(object), object)
      this.generation++
      this.listedAt = listVersion
      if (newHistory) return this.restart(listVersion)
      if (listVersion > this.applied) this.applied = listVersion
      if (first) {
        this.writing = written
        this.resourceVersion = listVersion
        this.oldest = listVersion
        this.markSynced()
        await written
        return
      }
      // the cache keeps each object as listed (a stamped copy is what watchers are told, not what the apiserver holds)
      for (const event of events) this.dispatch(event, this.objects.get(idOf(event.object)))
      if (listVersion > this.resourceVersion) this.resourceVersion = listVersion
    })
  }

  /**
   * The apiserver's history went back: the cache is at the list's version with no window behind
   * it, and every watcher, whose version belongs to the old history, is told 410 Expired.
   */
  private restart(listVersion: bigint): void {
    this.stats.newHistories++
    const before = this.resourceVersion
    this.window.clear()
    this.resourceVersion = listVersion
    this.applied = listVersion
    this.oldest = listVersion
    this.options.log.warn(
      { resource: this.options.storeKey.resource, was: before.toString(), now: listVersion.toString() },
      "watch cache: the apiserver's history went back; every watcher is told 410 Expired and lists again",
    )
    for (const listener of [...this.listeners]) listener.expire(`the apiserver's history went back from ${before} to ${listVersion}`)
  }

  /** why the cache was given up (its scope's list outgrew --max-list-bytes); set, it answers nobody */
  givenUp: string | undefined

  /** The cache will move no more: its watchers are told 410 Expired and list again, through the next route. */
  giveUp(why: string): void {
    this.givenUp = why
    for (const listener of [...this.listeners]) listener.expire(why)
  }

  /** Resolves once what the cache holds is on disk: nothing is sent to a client before (it must survive a SIGKILL). */
  written(): Promise<void> {
    return this.writing
  }

  /**
   * What a relist tells that the cache did not know, as events in version order: objects new or
   * changed (at their own version), then objects gone (at the list's version: the apiserver's
   * deletion version is not known).
   */
  private difference(items: CachedObject[], listVersion: bigint): CacheEvent[] {
    const events: CacheEvent[] = []
    const listed = new Set<string>()
    for (const object of items) {
      const id = idOf(object)
      listed.add(id)
      const held = this.objects.get(id)
      if (held && held.resourceVersion === object.resourceVersion) continue
      events.push({ type: held ? 'MODIFIED' : 'ADDED', object, resourceVersion: numericVersion(object.resourceVersion), previous: held })
    }
    events.sort((a, b) => (a.resourceVersion < b.resourceVersion ? -1 : a.resourceVersion > b.resourceVersion ? 1 : 0))
    for (const [id, held] of this.objects) if (!listed.has(id)) events.push({ type: 'DELETED', object: held, resourceVersion: listVersion, previous: held })
    // versions never go back for a watcher: an object older than the cache's version is told at it,
    // in its bytes too (client-go resumes from the last object's version), as the apiserver's DELETED
    // carries the deletion's revision
    let floor = this.resourceVersion
    for (const event of events) {
      if (event.resourceVersion < floor) event.resourceVersion = floor
      floor = event.resourceVersion
      event.object = atVersion(event.object, event.resourceVersion)
    }
    return events
  }

  /**
   * One upstream event. Its disk write starts now (the journal keeps the order of calls, and
   * writes of one moment go out together); it is applied and told to watchers, in order, once
   * written. The reflector is held back only when many are in flight: then (only) a promise to wait for.
   */
  event(type: EventType, received: CachedObject): Promise<void> | undefined {
    this.admit(received.kind, received.apiVersion)
    const object = this.vouched(received)
    const store = this.options.store
    const written =
      type === 'DELETED'
        ? store?.remove(this.options.storeKey, object.namespace, object.name, this.options.scope, object.resourceVersion)
        : store?.put(this.options.storeKey, object, this.options.scope)
    const version = numericVersion(object.resourceVersion)
    if (version > this.applied) this.applied = version
    this.inFlight.push({ written: written ?? Promise.resolve(), apply: () => this.applyEvent({ type, object, resourceVersion: version }) })
    this.drain()
    return this.inFlight.length > maxInFlight ? this.drained() : undefined
  }

  progress(resourceVersion: string): void {
    const version = numericVersion(resourceVersion)
    if (version > this.applied) this.applied = version
    // after the events before it: a watcher must never be told a version ahead of what it was sent
    this.inFlight.push({
      written: Promise.resolve(),
      apply: () => {
        if (version <= this.resourceVersion) return
        this.resourceVersion = version
        for (const listener of this.listeners) listener.onProgress(version)
      },
    })
    this.drain()
  }

  private drain(): void {
    if (this.draining) return
    this.draining = true
    void (async () => {
      while (this.inFlight.length > 0) {
        const next = this.inFlight[0]
        try {
          await next.written
        } catch (error) {
          this.options.log.error({ err: (error as Error).message }, 'watch cache: an event was not written to disk')
        }
        this.inFlight.shift()
        next.apply()
      }
      this.draining = false
      for (const resolve of this.idle.splice(0)) resolve()
    })()
  }

  /** Resolves once every event in flight has been applied and told. */
  private drained(): Promise<void> {
    return this.inFlight.length === 0 && !this.draining ? Promise.resolve() : new Promise(resolve => this.idle.push(resolve))
  }

  private serially(step: () => Promise<void>): Promise<void> {
    this.queue = this.queue
      .then(() => this.drained())
      .then(step)
      .catch(error => this.options.log.error({ err: (error as Error).message }, 'watch cache: a change was not applied'))
    return this.queue
  }

  /** An upstream event, unless the cache holds a newer copy of its object (a reordered or replayed event). */
  private applyEvent(event: CacheEvent): void {
    const held = this.objects.get(idOf(event.object))
    if (held && !isNotOlder(event.object.resourceVersion, held.resourceVersion)) {
      this.stats.olderIgnored++
      return
    }
    event.previous = held
    this.dispatch(event)
  }

  private dispatch(event: CacheEvent, stored: CachedObject = event.object): void {
    const id = idOf(event.object)
    if (event.type === 'DELETED') this.objects.delete(id)
    else this.objects.set(id, stored)
    this.generation++
    if (event.resourceVersion > this.resourceVersion) this.resourceVersion = event.resourceVersion
    const dropped = this.window.push(event)
    if (dropped) this.oldest = dropped.resourceVersion
    for (const listener of this.listeners) listener.onEvent(event)
  }

  /** The objects now, in the apiserver's order (storage keys), at the cache's version. */
  snapshot(): { items: readonly CachedObject[]; resourceVersion: bigint } {
    if (this.sorted?.generation !== this.generation) {
      const keyed = [...this.objects].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      this.sorted = { generation: this.generation, items: keyed.map(([, object]) => object) }
    }
    return { items: this.sorted.items, resourceVersion: this.resourceVersion }
  }

  /** the oldest version whose state the cache can rebuild exactly from its objects and window */
  get exactSince(): bigint {
    return this.oldest > this.listedAt ? this.oldest : this.listedAt
  }

  /** The events after `version`, or 'expired' when the window no longer reaches back that far. */
  eventsAfter(version: bigint): CacheEvent[] | 'expired' {
    if (version < this.oldest) return 'expired'
    return this.window.after(version)
  }

  /**
   * Adds a listener, in step with the cache: `start` runs with what the listener must be sent
   * first, and no event can come between.
   */
  subscribe(listener: CacheListener, start: () => void): () => void {
    this.lastUsed = Date.now()
    start()
    this.listeners.add(listener)
    return () => {
      this.listeners.delete(listener)
      this.lastUsed = Date.now()
    }
  }

  get windowLength(): number {
    return this.window.length
  }

  /** The newest version the cache's watch has brought, told to watchers or still being written. */
  get receivedVersion(): bigint {
    return this.applied
  }

  get windowBytes(): number {
    return this.window.bytes
  }
}
