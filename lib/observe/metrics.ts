// Prometheus metrics (prom-client), one registry per hub so tests can run several hubs at once.
// The proxy reports through the RequestObserver interface; it knows nothing about Prometheus.
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { qualifiedResource } from '../api/requestinfo.ts'
import type { RequestInfo } from '../api/requestinfo.ts'
import type { WatchCacheObserver } from '../watch/watch-caches.ts'
import type { PoolObserver } from '../pool/pool-member.ts'
import type { Collection } from '../cache/collection.ts'
import { loggedLines } from '../log-limit.ts'
import { registerProcessMetrics } from './build-info.ts'
import { registerScraped, scrapeSources } from './scraped.ts'
import type { CacheHealth, FilterTally, WatchCacheState } from './scraped.ts'
import type { ConnectionCounts } from '../upstream/upstream.ts'
export type { CacheHealth, FilterTally, WatchCacheState } from './scraped.ts'

/** who answered: an apiserver, the cache, or the hub itself (a refusal, a Lease acknowledged offline, a 413) */
export type Source = 'cloud' | 'cache' | 'hub'

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
  /** connections to the apiservers: opened since start (by protocol, TLS resumed), HTTP/2 ones open now */
  observeUpstream(read: () => { counts: ConnectionCounts; http2Open: number }): void
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
/** distinct values of the component and resource labels a hub keeps (the known components included), before `other` */
export const componentValues = 64
export const resourceValues = 256

// the bounds, in each series' help: a Prometheus user sizes storage and alerts from them
const componentHelp = `component: the User-Agent's product token, lower-cased, [a-z0-9._-], at most 63 characters; the first ${componentValues} distinct (${knownComponents.filter(Boolean).join(', ')} and '' for none among them), then other`
const resourceHelp = `resource: <resource>.<group>[/<subresource>], the first ${resourceValues} distinct, then other; '' for non-resource paths`
const verbHelp = "verb: the apiserver's (get, list, watch, create, update, patch, delete, deletecollection, proxy, connect), else the HTTP method"

export function createMetrics(): Metrics {
  const registry = new Registry()
  const components = new BoundedLabel(componentValues, knownComponents)
  const resources = new BoundedLabel(resourceValues)
  const componentLabel = (info: RequestInfo) => components.of(info.component)
  const requests = new Counter({
    name: 'outpost_requests_total',
    help: `Requests by component, verb, resource, HTTP code and source (cloud, cache, hub); 499 = the client went away first. ${componentHelp}; ${verbHelp}; ${resourceHelp}`,
    labelNames: ['component', 'verb', 'resource', 'code', 'source'],
    registers: [registry],
  })
  const durations = new Histogram({
    name: 'outpost_request_duration_seconds',
    help: `Time to answer a request, watches excluded (they last as long as the client wants); labels as outpost_requests_total`,
    labelNames: ['component', 'verb', 'resource', 'source'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  })
  const openWatches = new Gauge({
    name: 'outpost_open_watches',
    help: `Watches open now, by component and source (cloud: relayed from an apiserver; cache: served by the hub, from a shared watch cache or offline). ${componentHelp}`,
    labelNames: ['component', 'source'],
    registers: [registry],
  })
  const servedFromCache = new Counter({
    name: 'outpost_served_from_cache_total',
    help: "Requests answered from the hub's caches (shared watch caches online, the disk cache offline); labels as outpost_requests_total",
    labelNames: ['component', 'verb', 'resource'],
    registers: [registry],
  })
  const scraped = scrapeSources()
  registerScraped(registry, scraped)
  registerProcessMetrics(registry)
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
  let upstreamLinks: () => { counts: ConnectionCounts; http2Open: number } = () => ({ counts: { h2: 0, http1: 0, resumed: 0 }, http2Open: 0 })
  new Counter({
    name: 'outpost_upstream_connections_total',
    help: 'Connections opened to the apiservers since start, by protocol (h2: each carries every request and watch of an identity; http1: a server without h2, or upgrades)',
    labelNames: ['protocol'],
    registers: [registry],
    collect(this: Counter<'protocol'>) {
      const { counts } = upstreamLinks()
      this.reset()
      this.inc({ protocol: 'h2' }, counts.h2)
      this.inc({ protocol: 'http1' }, counts.http1)
    },
  })
  new Counter({
    name: 'outpost_upstream_tls_resumed_total',
    help: 'Connections to the apiservers whose TLS session was resumed (an abbreviated handshake, as after an outage)',
    registers: [registry],
    collect(this: Counter) {
      this.reset()
      this.inc(upstreamLinks().counts.resumed)
    },
  })
  new Gauge({
    name: 'outpost_upstream_http2_connections',
    help: "HTTP/2 connections to the apiservers open now (one per server and identity, more only past the server's stream limit)",
    registers: [registry],
    collect(this: Gauge) {
      this.set(upstreamLinks().http2Open)
    },
  })
  const upstreamWatches = new Gauge({
    name: 'outpost_upstream_watches',
    help: 'Upstream watches the shared watch caches hold open, by resource (one of --shared-resources) and wire format (json, protobuf)',
    labelNames: ['resource', 'format'],
    registers: [registry],
  })
  const relists = new Counter({
    name: 'outpost_upstream_relists_total',
    help: 'Lists a shared watch cache made again (after a 410 or an outage), by resource and wire format',
    labelNames: ['resource', 'format'],
    registers: [registry],
  })
  const consistentReads = new Counter({
    name: 'outpost_consistent_reads_total',
    help: "Consistent reads (no resourceVersion) of a shared watch cache's resource, online: answered from the cache once a probe proved it had reached the apiserver's revision, or relayed; by resource (the shared resources) and outcome (cache, relayed)",
    labelNames: ['resource', 'outcome'],
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
      scraped.watchCaches = read
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
    consistentRead(resource, outcome) {
      consistentReads.inc({ resource, outcome })
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
      help: "1 while this apiserver answers (probes and real requests); server: one of --server (or the kubeconfig's)",
      labelNames: ['server'],
      registers: [registry],
    }),
    refilterEvents: new Counter({
      name: 'outpost_refilter_events_total',
      help: 'Events (MODIFIED, ADDED, DELETED) sent to open watches because what the filters read changed',
      registers: [registry],
    }),
    observeFilters(read) {
      scraped.filterTallies = read
    },
    observeUpstream(read) {
      upstreamLinks = read
    },
    observeCache(read, health) {
      scraped.collections = read
      if (health) scraped.cacheHealth = health
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
