// The multiplexer: one watch cache per shared resource and wire format (Services, EndpointSlices v1
// and v1beta1, Endpoints, Nodes, and kubelet's own pods by default: --shared-resources), each over
// the widest scope the node reads (cluster-wide; pods: spec.nodeName=<node>) with one upstream
// list+watch, serving every local client online and offline. Every narrower request (a namespace,
// label and field selectors) is answered from it (selection.ts), as kube-apiserver's cacher answers
// from its one cache per resource: what clients send never adds an upstream watch, a cache or a
// metric series. A cache nobody has used for a grace period is dropped. A scope whose list is over
// --max-list-bytes is not shared: its cache is given up at the first such list (logged, counted) and
// the resource's reads are relayed (capped there too) for 10 minutes, then a cache is tried again. Disk: each cache writes to one
// collection per format shared by every component (`shared-json`, `shared-protobuf`).
import { ListBodies } from './list-bodies.ts'
import type { Logger } from 'pino'
import type { RequestInfo } from '../api/requestinfo.ts'
import { encodeQuery, resourcePath } from '../api/paths.ts'
import type { Upstream } from '../upstream/upstream.ts'
import type { LiveStreams } from './streams.ts'
import type { CacheStore } from '../cache/store.ts'
import type { ResourceKey } from '../cache/types.ts'
import type { ParsedScope } from '../cache/scope.ts'
import { describeScope } from '../cache/scope.ts'
import { WatchCache } from './cache.ts'
import { Reflector, jsonAccept, protobufAccept } from './reflector.ts'
import { covers, everything, parseScope, scopeOf } from '../cache/scope.ts'
import { selectableFieldValues } from '../cache/selectable-fields.ts'
import type { WireFormat } from '../api/wire-format.ts'
import type { SourceSwitch } from '../upstream/source-switch.ts'
import { ReadFloors, RevisionProbe, proofWaitMs } from './freshness.ts'
import { hubUserAgent } from '../config.ts'

export interface WatchCachesOptions {
  upstream: Upstream
  store?: CacheStore
  streams?: LiveStreams
  isOnline: () => boolean
  log: Logger
  nodeName: string
  silenceMs?: number
  /** a cache nobody has listed or watched for this long is dropped (default 5 min) */
  graceMs?: number
  windowSize?: number
  /** the bytes each cache's event window holds at most (--watch-window-memory) */
  windowMaxBytes?: number
  observer?: WatchCacheObserver
  /** `group/version/resource` (core: `v1/services`) of the resources shared (--shared-resources) */
  resources: readonly string[]
  /** where the pool-wide resources are listed and watched (a node pool's leader, or the cloud); default the upstream */
  poolSource?: SourceSwitch
  /** the resources read through poolSource (`group/version/resource`) */
  poolResources?: readonly string[]
  /** a list bigger than this is not held: the resource is not shared, its reads are relayed (--max-list-bytes); default no cap */
  maxListBytes?: number
}

/** What the metrics want to know. */
export interface WatchCacheObserver {
  upstreamWatchOpened(resource: string, format: WireFormat, from?: ReadFrom): () => void
  relisted(resource: string, format: WireFormat): void
  /** bytes a cache read; for a pool-wide resource, from whom: the cloud, or the pool's leader */
  received(resource: string, format: WireFormat, bytes: number, from?: ReadFrom): void
  /** a list over --max-list-bytes: the cache was given up */
  listOverCap?(reader: 'relay' | 'watch-cache'): void
  /** a consistent read: answered from the cache once proven fresh, or relayed */
  consistentRead?(resource: string, outcome: 'cache' | 'relayed'): void
}

export type ReadFrom = 'cloud' | 'leader'

/** `group/version/resource` as a request names it (core group: `v1/services`). */
export function resourceId(group: string, version: string, resource: string): string {
  return group ? `${group}/${version}/${resource}` : `${version}/${resource}`
}

/** Selections a cache lists in /debug/cache by name; past this, only counted. */
const describedSelections = 16
/** Components a cache names as its users; past this, only counted. */
const namedComponents = 32
/**
 * How long a resource whose list was over the cap is not shared: long enough that a huge scope
 * costs the apiserver one list per this period (the cap's worth of bytes each), short enough that
 * a scope that shrank is shared again without a restart.
 */
export const overCapRetryMs = 10 * 60_000

export function sharedComponent(format: WireFormat): string {
  return `shared-${format}`
}

interface Entry {
  cache: WatchCache
  reflector: Reflector
  /** read through the pool source */
  poolWide: boolean
  resource: string
  /** components that listed or watched through it (at most namedComponents) */
  components: Set<string>
  /** who answered its last list or watch */
  from?: ReadFrom
}

export class WatchCaches {
  private readonly caches = new Map<string, Entry>()
  /** each cache's consistent-read proof (freshness.ts) */
  private readonly probes = new WeakMap<WatchCache, RevisionProbe>()
  private readonly floors = new WeakMap<WatchCache, ReadFloors>()
  private readonly sweeper: NodeJS.Timeout
  /** whole lists kept as the bytes written, hub-wide */
  readonly listBodies = new ListBodies()

  /** the resources whose reflectors read through the pool source */
  private readonly poolWide: Set<string>

  constructor(private readonly options: WatchCachesOptions) {
    this.shared = new Set(options.resources)
    this.poolWide = new Set(options.poolSource ? options.poolResources : [])
    // a follower moved to another source: every pool-wide watch resumes there from where it was
    options.poolSource?.on('switch', () => {
      for (const entry of this.caches.values()) if (entry.poolWide) entry.reflector.interrupt()
    })
    this.podScope = parseScope({ namespace: '', labelSelector: '', fieldSelector: `spec.nodeName=${options.nodeName}` })
    const grace = options.graceMs ?? 5 * 60_000
    this.sweeper = setInterval(() => this.sweep(grace), Math.min(grace, 60_000))
    this.sweeper.unref()
  }

  /** The cache's scope for a resource: the widest the node reads. */
  private widest(resource: string): ParsedScope {
    return resource === 'pods' ? this.podScope : everything
  }

  /** kubelet's own pods: all the Node authorizer lets a node list */
  private readonly podScope: ParsedScope

  /**
   * Whether a shared watch cache answers a request: a list or watch within the widest scope the node
   * reads (kubelet's pods: only this node's), or a get at resourceVersion=0 (the apiserver answers
   * that from its watch cache too). Selectors are evaluated by the cache; one that does not parse is
   * its 400.
   */
  serves(info: RequestInfo): boolean {
    const id = resourceId(info.apiGroup, info.apiVersion, info.resource)
    if (info.subresource !== '' || !this.shared.has(id) || this.overCap(id)) return false
    if (info.verb === 'get') return info.resourceVersion === '0'
    if (info.verb !== 'list' && info.verb !== 'watch') return false
    if (info.resource !== 'pods') return true
    let requested
    try {
      requested = scopeOf(info)
    } catch {
      return true // a selector that does not parse: the cache answers the apiserver's 400
    }
    return covers(this.widest('pods'), requested)
  }

  private readonly shared: Set<string>

  /** resources (`group/version/resource`) given up because a list was over the cap, until when */
  private readonly givenUp = new Map<string, number>()

  private overCap(id: string): boolean {
    const until = this.givenUp.get(id)
    if (until === undefined) return false
    if (Date.now() < until) return true
    this.givenUp.delete(id)
    return false
  }

  /**
   * A list of the cache's scope was over the cap: the cache is dropped (its watchers, if any, told
   * 410 and list again) and its resource is relayed for overCapRetryMs, in every format (a scope
   * too big in one is, give or take, too big in the other).
   */
  private giveUp(id: string, entry: Entry, bytes: number): void {
    const { options } = this
    const cache = entry.cache
    const key = cache.options.storeKey
    this.givenUp.set(resourceId(key.group, key.version, key.resource), Date.now() + overCapRetryMs)
    if (this.caches.get(id) === entry) this.caches.delete(id)
    options.observer?.listOverCap?.('watch-cache')
    options.log.warn(
      { resource: entry.resource, format: cache.options.format, bytes, maxListBytes: options.maxListBytes, retryInMs: overCapRetryMs },
      'watch cache given up: its list is over --max-list-bytes; the resource is relayed, not shared',
    )
    cache.giveUp(`the list of ${entry.resource} is over --max-list-bytes (${options.maxListBytes} bytes): it is not shared for now`)
  }

  private static id(info: RequestInfo, format: WireFormat): string {
    return `${resourceId(info.apiGroup, info.apiVersion, info.resource)}\0${format}`
  }

  /** The cache of a request's resource and format, created (and its reflector started) on first use. */
  cacheFor(info: RequestInfo, format: WireFormat): WatchCache {
    const id = WatchCaches.id(info, format)
    let entry = this.caches.get(id)
    // planned while the resource was still shared: a cache that never syncs, given up (no new list)
    if (!entry && this.overCap(resourceId(info.apiGroup, info.apiVersion, info.resource))) {
      const cache = new WatchCache({ storeKey: this.storeKey(info, format), scope: this.widest(info.resource), format, log: this.options.log })
      cache.giveUp('its list is over --max-list-bytes')
      return cache
    }
    if (!entry) {
      entry = this.create(id, info, this.widest(info.resource), format)
      this.caches.set(id, entry)
    }
    if (entry.components.size < namedComponents) entry.components.add(info.component)
    entry.cache.lastUsed = Date.now()
    return entry.cache
  }

  private storeKey(info: RequestInfo, format: WireFormat): ResourceKey {
    return { component: sharedComponent(format), group: info.apiGroup, version: info.apiVersion, resource: info.resource }
  }

  private create(id: string, info: RequestInfo, scope: ParsedScope, format: WireFormat): Entry {
    const { options } = this
    const storeKey = this.storeKey(info, format)
    const cache = new WatchCache({
      store: options.store,
      storeKey,
      scope,
      format,
      log: options.log,
      windowSize: options.windowSize,
      windowMaxBytes: options.windowMaxBytes,
      selectableFields: object => selectableFieldValues(info.apiGroup, info.resource, object),
    })
    const resource = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource
    // every segment and selector escaped: the apiserver must list exactly the scope this cache keeps
    const query = new URLSearchParams()
    if (scope.labelSelector) query.set('labelSelector', scope.labelSelector)
    if (scope.fieldSelector) query.set('fieldSelector', scope.fieldSelector)
    const encodedQuery = encodeQuery(query)
    const path = `${resourcePath({ group: info.apiGroup, version: info.apiVersion, namespace: scope.namespace, resource: info.resource })}${encodedQuery ? `?${encodedQuery}` : ''}`
    const observer = options.observer
    const poolWide = this.poolWide.has(resourceId(info.apiGroup, info.apiVersion, info.resource))
    const source: Pick<Upstream, 'request'> = poolWide ? options.poolSource! : options.upstream
    const entry: Entry = { cache, reflector: undefined as unknown as Reflector, resource, components: new Set(), poolWide }
    const from = (server: URL): ReadFrom | undefined => {
      if (!poolWide) return undefined
      entry.from = options.upstream.servers.some(s => s.origin === server.origin) ? 'cloud' : 'leader'
      return entry.from
    }
    const reflector = new Reflector(
      path,
      resource,
      {
        replace: (items, rv, answered, type) => {
          if (cache.isSynced) observer?.relisted(resource, format)
          return cache.replace(items, rv, answered, type)
        },
        event: (type, object) => cache.event(type, object),
        progress: rv => cache.progress(rv),
        seeded: () => cache.seededAt,
      },
      {
        upstream: source,
        streams: options.streams,
        isOnline: options.isOnline,
        log: options.log,
        silenceMs: options.silenceMs,
        accept: format === 'protobuf' ? protobufAccept : jsonAccept,
        maxListBytes: options.maxListBytes,
        overCap: bytes => this.giveUp(id, entry, bytes),
        observe: {
          listed: (bytes, server) => this.read(resource, format, bytes, from(server)),
          // a watch's frames come from the server that opened it (watchOpened said which): no lookup per frame
          received: bytes => this.read(resource, format, bytes, poolWide ? entry.from : undefined),
          watchOpened: server => observer?.upstreamWatchOpened(resource, format, from(server)) ?? (() => {}),
        },
      },
    )
    // the proof asks the cloud even where the pool's leader feeds the cache: the cloud's revision is what the cache must reach
    const probe = new RevisionProbe(path, probePath =>
      options.upstream.request({ method: 'GET', path: probePath, headers: { accept: 'application/json', 'user-agent': hubUserAgent } }),
    )
    this.probes.set(cache, probe)
    void this.seedFromDisk(cache, storeKey, scope)
    void reflector.run()
    options.log.debug({ resource, scope: describeScope(scope), format }, 'watch cache started')
    entry.reflector = reflector
    return entry
  }

  /** The proof a consistent read of `cache` needs: the apiserver's current revision, and how long to wait for the cache to reach it. */
  async latestRevision(cache: WatchCache): Promise<{ revision: bigint; waitMs: number } | undefined> {
    const probe = this.probes.get(cache)
    if (!probe) return undefined
    const revision = await probe.latest()
    return { revision, waitMs: proofWaitMs(probe.roundTripMs) }
  }

  /** Each client's floor for its "any state" reads of `cache` (freshness.ts). */
  readFloors(cache: WatchCache): ReadFloors {
    let floors = this.floors.get(cache)
    if (!floors) this.floors.set(cache, (floors = new ReadFloors()))
    return floors
  }

  /** Counts a consistent read's outcome, by resource (the shared resources only: bounded). */
  consistentRead(cache: WatchCache, outcome: 'cache' | 'relayed'): void {
    const { resource, group } = cache.options.storeKey
    this.options.observer?.consistentRead?.(group ? `${resource}.${group}` : resource, outcome)
  }

  /** Offline, a new cache starts from what the disk holds for its scope, if a whole list of it is there. */
  private async seedFromDisk(cache: WatchCache, key: ResourceKey, scope: ParsedScope): Promise<void> {
    if (this.options.isOnline() || !this.options.store) return
    const selection = await this.options.store.list(key, scope)
    if (!selection?.complete || selection.lost.length > 0 || cache.isSynced) return
    cache.seed(selection.items, selection.resourceVersion)
  }

  /** Bytes the pool-wide caches read, by who answered. */
  readonly poolBytes = { leader: 0, cloud: 0 }

  private read(resource: string, format: WireFormat, bytes: number, from: ReadFrom | undefined): void {
    if (from) this.poolBytes[from] += bytes
    this.options.observer?.received(resource, format, bytes, from)
  }

  /** Whether `component` has listed or watched `key`'s resource through a cache that keeps its objects under `key.component`. */
  servedFrom(component: string, key: ResourceKey): boolean {
    for (const { cache, components } of this.caches.values()) {
      const k = cache.options.storeKey
      if (components.has(component) && k.component === key.component && k.group === key.group && k.version === key.version && k.resource === key.resource)
        return true
    }
    return false
  }

  private sweep(graceMs: number): void {
    const now = Date.now()
    for (const [id, entry] of this.caches) {
      if (entry.cache.listeners.size > 0 || now - entry.cache.lastUsed < graceMs) continue
      entry.reflector.halt()
      this.caches.delete(id)
      this.options.log.debug({ resource: entry.resource, scope: describeScope(entry.cache.options.scope) }, 'watch cache dropped: nobody used it')
    }
  }

  /** For /debug/cache and the metrics. */
  describe(): {
    resource: string
    scope: string
    format: WireFormat
    resourceVersion: string
    synced: boolean
    objects: number
    window: number
    watchers: number
    components: string[]
    selections: { selection: string; watchers: number }[]
    otherSelections: number
    /** the event window's bytes: events' objects, the objects they replaced, their frames */
    windowBytes: number
    relists: number
    replayed: number
    expired: number
    /** read through the pool source; who answered its last list or watch (the cloud, or the pool's leader) */
    poolWide: boolean
    from?: ReadFrom
  }[] {
    return [...this.caches.values()].map(({ cache, resource, components, poolWide, from }) => ({
      resource,
      scope: describeScope(cache.options.scope),
      format: cache.format,
      resourceVersion: cache.resourceVersion.toString(),
      synced: cache.isSynced,
      objects: cache.objects.size,
      window: cache.windowLength,
      windowBytes: cache.windowBytes,
      watchers: cache.listeners.size,
      components: [...components].sort(),
      ...selections(cache),
      ...cache.stats,
      poolWide,
      from,
    }))
  }

  /** The cloud is back: every cache's list/watch goes on now, not after its backoff. */
  resume(): void {
    for (const { reflector } of this.caches.values()) reflector.resume()
  }

  close(): void {
    clearInterval(this.sweeper)
    this.listBodies.clear()
    for (const { reflector } of this.caches.values()) reflector.halt()
    this.caches.clear()
  }
}

/** Which selections a cache's watchers use, most used first: a bounded list, the rest counted. */
function selections(cache: WatchCache): { selections: { selection: string; watchers: number }[]; otherSelections: number } {
  const counts = new Map<string, number>()
  for (const listener of cache.listeners) {
    const name = listener.selection ? describeScope(listener.selection) : describeScope(cache.options.scope)
    counts.set(name, (counts.get(name) ?? 0) + 1)
  }
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
  return {
    selections: sorted.slice(0, describedSelections).map(([selection, watchers]) => ({ selection, watchers })),
    otherSelections: Math.max(0, sorted.length - describedSelections),
  }
}
