// Prometheus metrics (prom-client), one registry per hub so tests can run several hubs at once.
// The proxy reports through the RequestObserver interface; it knows nothing about Prometheus.
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { qualifiedResource } from '../api/requestinfo.ts'
import type { RequestInfo } from '../api/requestinfo.ts'
import type { WatchCacheObserver } from '../watch/watch-caches.ts'
import type { PoolObserver } from '../pool/pool-member.ts'
import { resourceDirName } from '../cache/types.ts'
import type { Collection } from '../cache/collection.ts'
import { loggedLines } from '../log-limit.ts'

/** who answered: an apiserver, the cache, or the hub itself (a refusal, a Lease acknowledged offline, a 413) */
export type Source = 'cloud' | 'cache' | 'hub'

/** What one response filter did so far (filters/registry.ts keeps the counts). */
export interface FilterTally {
  name: string
  ran: number
  changed: number
  dropped: number
  failed: number
}

/** How well the cache keeps its promise: failed writes (retried), objects not on disk yet, bodies lost, answers refused. */
export interface CacheHealth {
  writeFailures: number
  unsaved: number
  lost: number
  /** the disk cache is in use at all (the cache dir could be locked and written at start) */
  enabled: boolean
  /** everything memory holds is on disk */
  durable: boolean
  /** scopes whose cached lists are refused offline until listed whole again */
  incomplete: number
  /** answers not kept: of another kind than their resource's, or too large for the disk */
  rejectedKind: number
  tooLarge: number
  /** lists older than what their scope had seen: the apiserver's history went back */
  newHistories: number
}

/** What the proxy tells about each request: when it ends, and while a watch is open. */
export interface RequestObserver {
  requestDone(info: RequestInfo, code: number, source: Source, seconds: number): void
  /** returns the function to call when the watch ends */
  watchOpened(info: RequestInfo, source: Source): () => void
  /** re-filtered events sent into open watches after a topology change */
  refiltered?(count: number): void
  /** a list over --max-list-bytes: relayed as it streamed, or a shared watch cache given up */
  listOverCap?(reader: 'relay' | 'watch-cache'): void
  /** a response the hub cut off because its client did not keep up */
  slowClientEnded?(response: 'watch' | 'list', why: SlowClientEnd): void
}

/** past --max-watch-backlog, or nothing taken for --stall-timeout */
export type SlowClientEnd = 'backlog' | 'stalled'

/** What the shared watch caches say of themselves (lib/watch/watch-caches.ts describe()). */
export interface WatchCacheState {
  resource: string
  scope: string
  format: string
  watchers: number
  replayed: number
  expired: number
}

export interface Metrics extends RequestObserver, WatchCacheObserver, PoolObserver {
  registry: Registry
  cacheLoadErrors: Counter
  cacheLoadedObjects: Gauge
  cloudOnline: Gauge
  upstreamUp: Gauge<'server'>
  /** where the filters' tallies are read from, when scraped */
  observeFilters(read: () => readonly FilterTally[]): void
  refilterEvents: Counter
  /** watchers, replayed events and 410s of the shared watch caches, read at each scrape */
  observeWatchCaches(read: () => WatchCacheState[]): void
  /** cache objects and bytes by component and resource, read from the store at each scrape */
  observeCache(collections: () => Collection[], health?: () => CacheHealth): void
}

/**
 * A label whose values come from clients (User-Agent, the resource in a path): the first `max`
 * distinct values are kept, anything after is `other`, so no client can grow the metrics without
 * limit. Values are cut at 64 characters and must look like names.
 */
export class BoundedLabel {
  private readonly seen = new Set<string>()

  constructor(
    private readonly max: number,
    known: string[] = [],
  ) {
    for (const value of known) this.seen.add(value)
  }

  of(value: string): string {
    const cut = value.slice(0, 64)
    if (!/^[A-Za-z0-9._/-]*$/.test(cut)) return 'other'
    if (this.seen.has(cut)) return cut
    if (this.seen.size >= this.max) return 'other'
    this.seen.add(cut)
    return cut
  }
}

const knownComponents = ['kubelet', 'kube-proxy', 'coredns', 'flanneld', 'nginx-ingress-controller', 'kubectl', 'outpost', '']

export function createMetrics(): Metrics {
  const registry = new Registry()
  const components = new BoundedLabel(64, knownComponents)
  const resources = new BoundedLabel(256)
  const componentLabel = (info: RequestInfo) => components.of(info.component)
  const requests = new Counter({
    name: 'outpost_requests_total',
    help: 'Requests by component (User-Agent), verb, resource, HTTP code and source (cloud, cache, hub); 499 = the client went away first',
    labelNames: ['component', 'verb', 'resource', 'code', 'source'],
    registers: [registry],
  })
  const durations = new Histogram({
    name: 'outpost_request_duration_seconds',
    help: 'Time to answer a request, watches excluded (they last as long as the client wants)',
    labelNames: ['component', 'verb', 'resource', 'source'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  })
  const openWatches = new Gauge({
    name: 'outpost_open_watches',
    help: 'Watches open now, by component and source (cloud: relayed from an apiserver; cache: served by the hub, from a shared watch cache or offline)',
    labelNames: ['component', 'source'],
    registers: [registry],
  })
  const servedFromCache = new Counter({
    name: 'outpost_served_from_cache_total',
    help: "Requests answered from the hub's caches (shared watch caches online, the disk cache offline)",
    labelNames: ['component', 'verb', 'resource'],
    registers: [registry],
  })
  let collections: () => Collection[] = () => []
  let cacheHealth: () => CacheHealth = () => ({
    writeFailures: 0,
    unsaved: 0,
    lost: 0,
    enabled: true,
    durable: true,
    incomplete: 0,
    rejectedKind: 0,
    tooLarge: 0,
    newHistories: 0,
  })
  const counterFrom = (value: (h: CacheHealth) => number) =>
    function (this: Counter) {
      this.reset()
      this.inc(value(cacheHealth()))
    }
  const fromHealth = (value: (h: CacheHealth) => number) =>
    function (this: Gauge) {
      this.set(value(cacheHealth()))
    }
  new Counter({
    name: 'outpost_log_lines_total',
    help: 'Warnings and errors the hub logged, by level, whether written or left out as a repeat (lib/log-limit.ts)',
    labelNames: ['level'],
    registers: [registry],
    collect(this: Counter<'level'>) {
      this.reset()
      this.inc({ level: 'warn' }, loggedLines.warn)
      this.inc({ level: 'error' }, loggedLines.error)
    },
  })
  new Counter({
    name: 'outpost_log_lines_suppressed_total',
    help: 'Warnings and errors left out of the log as repeats (a summary line counts them per message)',
    registers: [registry],
    collect(this: Counter) {
      this.reset()
      this.inc(loggedLines.suppressed)
    },
  })
  new Counter({
    name: 'outpost_cache_write_failures_total',
    help: 'Cache writes (and removals) the disk refused; each is kept in memory and retried until it lands',
    registers: [registry],
    collect: counterFrom(h => h.writeFailures),
  })
  new Gauge({
    name: 'outpost_cache_enabled',
    help: '1 when the disk cache is in use (offline autonomy on); 0 when the cache dir could not be used at start (/v1/readyz says why)',
    registers: [registry],
    collect: fromHealth(h => (h.enabled ? 1 : 0)),
  })
  new Gauge({
    name: 'outpost_cache_durable',
    help: '1 when everything the cache holds in memory is on disk; 0 while writes fail (kept in memory, retried; /v1/readyz says why)',
    registers: [registry],
    collect: fromHealth(h => (h.enabled && h.durable ? 1 : 0)),
  })
  new Gauge({
    name: 'outpost_cache_incomplete_scopes',
    help: 'Cached scopes not known to be whole (damaged files, an event not recorded, an object too large): offline, their lists answer 503 until listed again',
    registers: [registry],
    collect: fromHealth(h => h.incomplete),
  })
  new Counter({
    name: 'outpost_cache_rejected_objects_total',
    help: 'Answers the cache did not keep: kind (not of the resource the request named) or too-large (over what the disk takes); relayed as usual',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset()
      const h = cacheHealth()
      this.inc({ reason: 'kind' }, h.rejectedKind)
      this.inc({ reason: 'too-large' }, h.tooLarge)
    },
  })
  new Counter({
    name: 'outpost_cache_new_histories_total',
    help: "Lists older than what their scope had already seen (the apiserver's history went back, e.g. etcd restored): the scope was replaced",
    registers: [registry],
    collect: counterFrom(h => h.newHistories),
  })
  new Gauge({
    name: 'outpost_cache_unsaved_objects',
    help: 'Objects whose latest state is not on disk yet because a write failed (retried with backoff)',
    registers: [registry],
    collect: fromHealth(h => h.unsaved),
  })
  new Gauge({
    name: 'outpost_cache_lost_objects',
    help: 'Cached objects whose file vanished or broke: offline answers that would include them are 503 until the cloud relists them',
    registers: [registry],
    collect: fromHealth(h => h.lost),
  })
  const perCollection = (value: (c: Collection) => number) =>
    function (this: Gauge<'component' | 'resource'>) {
      this.reset()
      for (const c of collections()) this.set({ component: c.key.component, resource: resourceDirName(c.key) }, value(c))
    }
  new Gauge({
    name: 'outpost_cache_objects',
    help: 'Objects in the cache, by component and resource (<resource>.<version>.<group>)',
    labelNames: ['component', 'resource'],
    registers: [registry],
    collect: perCollection(c => c.entries.size),
  })
  new Gauge({
    name: 'outpost_cache_bytes',
    help: 'Bytes of cached object bodies, by component and resource',
    labelNames: ['component', 'resource'],
    registers: [registry],
    collect: perCollection(c => c.bytes()),
  })

  // the filters count what they do in plain numbers (filters/registry.ts), read here when scraped:
  // a label lookup per filtered object costs more than the filter itself on small objects
  let filterTallies: () => readonly FilterTally[] = () => []
  const perFilter = (value: (t: FilterTally) => number) =>
    function (this: Counter<'filter'>) {
      this.reset()
      for (const t of filterTallies()) if (value(t) > 0) this.inc({ filter: t.name }, value(t))
    }
  new Counter({
    name: 'outpost_filter_invocations_total',
    help: 'Objects a response filter ran on, by filter',
    labelNames: ['filter'],
    registers: [registry],
    collect: perFilter(t => t.ran),
  })
  new Counter({
    name: 'outpost_filter_changed_objects_total',
    help: 'Objects a response filter rewrote, by filter',
    labelNames: ['filter'],
    registers: [registry],
    collect: perFilter(t => t.changed),
  })
  new Counter({
    name: 'outpost_filter_dropped_objects_total',
    help: 'Objects a response filter kept from the client, by filter',
    labelNames: ['filter'],
    registers: [registry],
    collect: perFilter(t => t.dropped),
  })
  new Counter({
    name: 'outpost_filter_failures_total',
    help: 'Objects a response filter could not read and let pass unfiltered, by filter (the first is logged)',
    labelNames: ['filter'],
    registers: [registry],
    collect: perFilter(t => t.failed),
  })

  let watchCaches: () => WatchCacheState[] = () => []
  const perScope = (value: (c: WatchCacheState) => number) =>
    function (this: Gauge<'resource' | 'scope' | 'format'>) {
      this.reset()
      for (const c of watchCaches()) this.inc({ resource: c.resource, scope: c.scope, format: c.format }, value(c))
    }
  new Gauge({
    name: 'outpost_watch_cache_watchers',
    help: 'Local watches served by each shared watch cache',
    labelNames: ['resource', 'scope', 'format'],
    registers: [registry],
    collect: perScope(c => c.watchers),
  })
  new Gauge({
    name: 'outpost_watch_cache_replayed_events',
    help: 'Events replayed from a watch cache window to watches that resumed from a version',
    labelNames: ['resource', 'scope', 'format'],
    registers: [registry],
    collect: perScope(c => c.replayed),
  })
  new Gauge({
    name: 'outpost_watch_cache_expired',
    help: 'Watches told 410 Expired (their version was older than the window)',
    labelNames: ['resource', 'scope', 'format'],
    registers: [registry],
    collect: perScope(c => c.expired),
  })
  const upstreamWatches = new Gauge({
    name: 'outpost_upstream_watches',
    help: 'Upstream watches the shared watch caches hold open, by resource and wire format',
    labelNames: ['resource', 'format'],
    registers: [registry],
  })
  const relists = new Counter({
    name: 'outpost_upstream_relists_total',
    help: 'Lists a shared watch cache made again (after a 410 or an outage), by resource and wire format',
    labelNames: ['resource', 'format'],
    registers: [registry],
  })
  const poolReceived = new Counter({
    name: 'outpost_pool_received_bytes_total',
    help: "Bytes the pool-wide watch caches read, from the cloud or from the node pool's leader hub",
    labelNames: ['from'],
    registers: [registry],
  })
  const poolLeader = new Gauge({ name: 'outpost_pool_leader', help: '1 while this hub leads its node pool (holds its Lease)', registers: [registry] })
  const poolFollowing = new Gauge({
    name: 'outpost_pool_following',
    help: "1 while the pool-wide resources are read from the node pool's leader hub, 0 while from the cloud",
    registers: [registry],
  })
  const poolLeaderChanges = new Counter({
    name: 'outpost_pool_leader_changes_total',
    help: "Changes of the node pool Lease's holder this hub has seen",
    registers: [registry],
  })
  const poolFallbacks = new Counter({
    name: 'outpost_pool_fallbacks_total',
    help: 'Requests the leader hub failed, which went to the cloud instead',
    registers: [registry],
  })
  const overCap = new Counter({
    name: 'outpost_lists_over_cap_total',
    help: 'Answers over --max-list-bytes, by reader: relay (relayed as they streamed, neither cached nor filtered) or watch-cache (a shared watch cache given up: its resource is relayed for a while)',
    labelNames: ['reader'],
    registers: [registry],
  })
  for (const reader of ['relay', 'watch-cache']) overCap.inc({ reader }, 0) // at 0 from the start: an alert can test it
  const slowClients = new Counter({
    name: 'outpost_slow_clients_ended_total',
    help: 'Watches and lists the hub cut off because the client did not keep up: past --max-watch-backlog (backlog) or nothing taken for --stall-timeout (stalled)',
    labelNames: ['response', 'why'],
    registers: [registry],
  })
  for (const response of ['watch', 'list']) for (const why of ['backlog', 'stalled']) slowClients.inc({ response, why }, 0)
  const received = new Counter({
    name: 'outpost_upstream_received_bytes_total',
    help: 'Bytes the shared watch caches received from the apiserver (lists and watch events)',
    labelNames: ['resource', 'format'],
    registers: [registry],
  })

  return {
    registry,
    observeWatchCaches(read) {
      watchCaches = read
    },
    upstreamWatchOpened(resource, format, from) {
      // a follower's watch of its pool's leader costs the apiserver nothing
      if (from === 'leader') return () => {}
      upstreamWatches.inc({ resource, format })
      return () => upstreamWatches.dec({ resource, format })
    },
    relisted(resource, format) {
      relists.inc({ resource, format })
    },
    received(resource, format, bytes, from) {
      if (from !== 'leader') received.inc({ resource, format }, bytes)
      if (from) poolReceived.inc({ from }, bytes)
    },
    leading(on) {
      poolLeader.set(on ? 1 : 0)
    },
    following(on) {
      poolFollowing.set(on ? 1 : 0)
    },
    leaderChanged() {
      poolLeaderChanges.inc()
    },
    fellBack() {
      poolFallbacks.inc()
    },
    cacheLoadErrors: new Counter({
      name: 'outpost_cache_load_errors_total',
      help: 'Cache files that could not be read at start (reported and skipped)',
      registers: [registry],
    }),
    cacheLoadedObjects: new Gauge({ name: 'outpost_cache_loaded_objects', help: 'Objects loaded from disk at start', registers: [registry] }),
    cloudOnline: new Gauge({ name: 'outpost_cloud_online', help: '1 while at least one apiserver is reachable', registers: [registry] }),
    upstreamUp: new Gauge({
      name: 'outpost_upstream_up',
      help: '1 while this apiserver answers (probes and real requests)',
      labelNames: ['server'],
      registers: [registry],
    }),
    refilterEvents: new Counter({
      name: 'outpost_refilter_events_total',
      help: 'Events (MODIFIED, ADDED, DELETED) sent to open watches because what the filters read changed',
      registers: [registry],
    }),
    observeFilters(read) {
      filterTallies = read
    },
    observeCache(read, health) {
      collections = read
      if (health) cacheHealth = health
    },
    requestDone(info, code, source, seconds) {
      const component = componentLabel(info)
      // non-resource paths stay '' (any client can make up paths: labels would be unbounded)
      const resource = resources.of(qualifiedResource(info))
      requests.inc({ component, verb: info.verb, resource, code: String(code), source })
      if (info.verb !== 'watch') durations.observe({ component, verb: info.verb, resource, source }, seconds)
      if (source === 'cache') servedFromCache.inc({ component, verb: info.verb, resource })
    },
    refiltered(count) {
      this.refilterEvents.inc(count)
    },
    listOverCap(reader) {
      overCap.inc({ reader })
    },
    slowClientEnded(response, why) {
      slowClients.inc({ response, why })
    },
    watchOpened(info, source) {
      const labels = { component: componentLabel(info), source }
      openWatches.inc(labels)
      return () => openWatches.dec(labels)
    },
  }
}
