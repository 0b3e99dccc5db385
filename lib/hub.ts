// Starts the hub from a HubConfig: credentials → upstream → health → cache → proxy server (+ admin).
// The one place that wires modules together; each module stays ignorant of the others.
import { pino } from 'pino'
import type { Logger } from 'pino'
import { repeatLimitHook } from './log-limit.ts'
import type { AddressInfo } from 'node:net'
import { hubAddressForPods, plainBindProblem, podAddressProblem } from './config.ts'
import { keepPodAddress } from './net/pod-address.ts'
import type { PodAddress } from './net/pod-address.ts'
import type { HubConfig } from './config.ts'
import { NodeCredentials } from './certificates/credentials.ts'
import { startSecurePort } from './front/secure-port.ts'
import type { SecurePort } from './front/secure-port.ts'
import type { ApiCaller } from '../certs/signing-request.ts'
import type { UpstreamCredentials } from './upstream/kubeconfig.ts'
import { Upstream } from './upstream/upstream.ts'
import { createProxyServer, listenAs } from './front/server.ts'
import { createAdminServer } from './observe/admin.ts'
import { HealthChecker, serverLabel } from './upstream/health.ts'
import { LiveStreams } from './watch/streams.ts'
import { CacheDirUnusableError, DiskCache } from './cache/disk.ts'
import { CacheStore } from './cache/store.ts'
import { CachePolicy, Recorder } from './cache/recorder.ts'
import { createMetrics } from './observe/metrics.ts'
import { TopologySource } from './topology/source.ts'
import { FilterRegistry } from '../filters/registry.ts'
import { FilteredWatches } from './watch/filtered-watches.ts'
import { RememberedLists } from './watch/remembered-lists.ts'
import { WatchCaches } from './watch/watch-caches.ts'
import { Router } from './front/router.ts'
import { BodyBudget, defaultBodyBudgetBytes, InflightLimiter } from './front/inflight.ts'
import { UpstreamAnswerer } from './front/upstream-answerer.ts'
import { WatchCacheAnswerer } from './front/watch-cache-answerer.ts'
import { OfflineAnswerer } from './front/offline-answerer.ts'
import type { Metrics } from './observe/metrics.ts'
import { SourceSwitch } from './upstream/source-switch.ts'
import { startHubPool } from './hub-pool.ts'
import type { HubPool } from './hub-pool.ts'
import { poolWideResources, watchWindowMiBOf } from './config.ts'
import { PodOverlay } from './overlay/pod-overlay.ts'
import { StatusLearner } from './overlay/learn.ts'
import { mintedRead } from './overlay/minted.ts'
import { failure, isStatus } from './api/status.ts'
import type { RequestInfo } from './api/requestinfo.ts'
import { listVersionOf } from './cache/list-version.ts'
import type { MintedRead } from './overlay/minted.ts'
import { startAutonomyCondition } from './autonomy/node-condition.ts'

export interface Hub {
  /** http://<bind>:<port> of the proxy */
  proxyUrl: string
  adminUrl: string
  /** https://… of the HTTPS port once it listens; undefined when it is off */
  secureUrl: Promise<string> | undefined
  upstream: Upstream
  health: HealthChecker
  store: CacheStore
  recorder: Recorder
  topology: TopologySource
  /** this node's pods as kubelet wrote them while the cloud was away */
  overlay: PodOverlay
  watchCaches: WatchCaches
  /** where the pool-wide list+watches go: the cloud, or (a follower of a node pool) its leader */
  poolSource: SourceSwitch
  /** this hub's part in its node pool; undefined with --pool-sharing=off */
  pool: HubPool | undefined
  streams: LiveStreams
  metrics: Metrics
  log: Logger
  close(): Promise<void>
}

export interface StartOptions {
  logger?: Logger
  /** BOOKMARK period of watches served from the cache */
  offlineBookmarkIntervalMs?: number
  /** BOOKMARK period of watches served from a shared watch cache (default a minute, as the apiserver) */
  cacheBookmarkIntervalMs?: number
  /** how often credential and certificate files are re-read, and pending CSRs polled (tests: fast) */
  timing?: { reloadIntervalMs?: number; csrPollIntervalMs?: number }
  /** events each shared watch cache keeps for resumed watches and reads of the past (default 4,096; tests: small) */
  watchCacheWindow?: number
  /** the OutpostAutonomy writer's pace (tests: fast) */
  autonomy?: { settleMs?: number; minIntervalMs?: number; tickMs?: number }
}

function serversFor(config: HubConfig, credentials: UpstreamCredentials): URL[] {
  const servers = config.servers.length > 0 ? config.servers : credentials.server ? [new URL(credentials.server)] : []
  if (servers.length === 0) throw new Error('no apiserver to talk to: give --server, or a --kubeconfig or --bootstrap-kubeconfig with a server')
  return servers
}

/** The node's credentials (bootstrapping a client certificate first if so configured) and the servers. */
async function resolveUpstream(config: HubConfig, log: Logger, options: StartOptions) {
  const { source, credentials } = await NodeCredentials.load({ config, log, ...options.timing }, bootstrap => {
    const upstream = new Upstream({ servers: serversFor(config, bootstrap), credentials: bootstrap })
    return { api: (method, path, body) => upstream.callJson(method, path, body), close: () => upstream.close() }
  })
  return { servers: serversFor(config, credentials), credentials, source }
}

/** What /v1/readyz says of the cache: offline autonomy off, or the disk not keeping up. */
function cacheProblems(store: CacheStore, cacheOff: string | undefined): string[] {
  if (cacheOff) return [cacheOff]
  const { durable, why } = store.durability()
  return durable ? [] : [`cache not durable (what the cache holds now would not survive a restart): ${why}`]
}

/** The highest real version the cache holds of the endpoint resources: what the pod overlay mints over. */
function endpointVersion(store: CacheStore): bigint {
  let max = 0n
  for (const c of store.all()) {
    if (!isEndpointResource(c.key.group, c.key.resource)) continue
    const rv = BigInt(c.maxResourceVersion())
    if (rv > max) max = rv
  }
  return max
}

const isEndpointResource = (group: string, resource: string) =>
  (group === 'discovery.k8s.io' && resource === 'endpointslices') || (group === '' && resource === 'endpoints')

/** What a read of an endpoint resource at a version the pod overlay minted gets (minted.ts). */
function mintedReadOf(overlay: PodOverlay, info: RequestInfo): MintedRead {
  // asked twice a request (the router, the watch cache): no range (the case but for an hour after an outage) costs nothing more
  const range = overlay.mintedRange()
  if (!range || info.subresource !== '' || !isEndpointResource(info.apiGroup, info.resource) || !/^\d{1,20}$/.test(info.resourceVersion)) return 'as-is'
  const at = info.verb === 'list' ? listVersionOf(info) : undefined
  const exact = at !== undefined && !isStatus(at) && at.kind === 'exact'
  return mintedRead(info.verb, exact, BigInt(info.resourceVersion), range)
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return `http://${host}:${address.port}`
}

/**
 * The disk cache, locked for this hub alone before anything reads or writes it. A dir that cannot be
 * used (read-only, not writable, not creatable) does not stop the hub, which relays everything with
 * offline autonomy off and says why; a dir another hub holds does (CacheDirLockedError names it).
 */
async function openDiskCache(cacheDir: string, log: Logger): Promise<{ disk?: DiskCache; off?: string }> {
  try {
    return { disk: await DiskCache.open(cacheDir, log) }
  } catch (error) {
    if (!(error instanceof CacheDirUnusableError)) throw error
    const off = `offline autonomy is off: the cache dir cannot be used (${error.message})`
    log.error({ cacheDir, code: error.code }, `${off}; every request is relayed, and none is answered from a cache while the cloud is away`)
    return { off }
  }
}

export async function startHub(config: HubConfig, options: StartOptions = {}): Promise<Hub> {
  const log = options.logger ?? pino({ level: config.logLevel, name: 'outpost', hooks: { logMethod: repeatLimitHook() } })
  const bindProblem = plainBindProblem(config)
  if (bindProblem) throw new Error(bindProblem)
  const { disk, off: cacheOff } = await openDiskCache(config.cacheDir, log)
  const store = new CacheStore(disk, log, { maxBodyBytes: config.cacheMemoryMiB * 1024 * 1024 })
  try {
    return await startWithCache(config, options, log, store, disk, cacheOff)
  } catch (error) {
    await store.close().catch(() => {})
    throw error
  }
}

async function startWithCache(
  config: HubConfig,
  options: StartOptions,
  log: Logger,
  store: CacheStore,
  disk: DiskCache | undefined,
  cacheOff: string | undefined,
): Promise<Hub> {
  const { servers, credentials, source: nodeCredentials } = await resolveUpstream(config, log, options)
  let currentCredentials = credentials

  // The health checker needs the upstream (to probe) and the upstream reports to the health checker.
  let health: HealthChecker | undefined
  const upstream = new Upstream({
    servers,
    credentials,
    onResult: (server, ok, reason) => (ok ? health?.reportSuccess(server) : health?.reportFailure(server, reason ?? 'failed')),
    http2: config.http2,
    maxStreamsPerConnection: config.http2MaxStreamsPerConnection,
    readIdleMs: config.http2ReadIdleTimeoutMs,
    pingTimeoutMs: config.http2PingTimeoutMs,
    onLinkDead: (server, reason) => health?.reportDown(server, reason),
  })
  health = new HealthChecker({
    servers,
    probe: (server, signal) => upstream.probe(server, signal),
    intervalMs: config.healthIntervalMs,
    timeoutMs: config.healthTimeoutMs,
    failuresToDown: config.healthFailures,
    successesToUp: config.healthSuccesses,
    log,
  })
  const streams = new LiveStreams()
  const metrics = createMetrics()
  metrics.cloudOnline.set(1)
  // a watch answered from the cache during a blip must not outlive it
  health.on('answered', () => streams.endFallbackWatches())
  health.on('server', (server: URL, up: boolean) => metrics.upstreamUp.set({ server: serverLabel(server) }, up ? 1 : 0))
  health.on('change', state => {
    metrics.cloudOnline.set(state === 'online' ? 1 : 0)
    // Nobody may wait on a dead link; and once the cloud is back, offline watches end so their
    // clients re-watch upstream and receive what changed meanwhile.
    const ended = state === 'offline' ? streams.endUpstreamWatches() : streams.endOfflineWatches()
    log.info({ state, endedWatches: ended }, state === 'offline' ? 'serving from cache' : 'serving from the cloud')
  })

  // the hub serves while the cache loads: each collection answers once it is read (store.ts)
  const loaded = store.load().then(
    report => {
      metrics.cacheLoadErrors.inc(report?.failed.length ?? 0)
      metrics.cacheLoadedObjects.set(report?.loaded ?? 0)
    },
    error => log.error({ err: (error as Error).message }, 'cache: load failed'),
  )
  metrics.observeCache(
    () => store.all(),
    () => ({
      writeFailures: store.writeFailures,
      unsaved: store.unsavedCount,
      lost: store.stats.lostObjects,
      enabled: cacheOff === undefined,
      durable: store.durability().durable,
      incomplete: store.all().reduce((sum, c) => sum + c.incomplete.size, 0),
      rejectedKind: store.stats.rejectedKind,
      tooLarge: store.stats.tooLarge,
      newHistories: store.stats.newHistories,
    }),
  )
  const recorder = new Recorder(store, log)
  const kept = cacheOff === undefined ? store : undefined
  const checker = health

  // pool-wide reads (the topology source's and the shared caches') follow a pool's leader when there is one
  const poolSource = new SourceSwitch(upstream)
  const topology = new TopologySource({
    upstream: poolSource,
    streams,
    state: disk,
    nodeName: config.nodeName,
    nodePool: config.nodePool,
    isOnline: () => checker.state === 'online',
    log,
    silenceMs: config.watchSilenceTimeoutMs,
  })
  // before the filters and the HTTPS port: both are made from whether pods can reach the hub on it
  const podAddress = await keepPodAddress({ address: config.podAddress, interfaceName: config.podInterface, log }, podAddressProblem(config))
  const overlay = new PodOverlay({ nodeName: config.nodeName, state: disk, log, ttlMs: config.podOverlayTtlMs })
  overlay.setRealVersion(() => endpointVersion(store))
  await overlay.load()
  const filterConfig = {
    enabled: config.filters.filter(name => !config.disabledFilters.includes(name)),
    components: { servicetopology: config.topologyComponents, ...config.filterComponents },
    hub: hubAddressForPods(config, podAddress.advertised),
    hubMissing: podAddress.problem(),
    ...(disk ? { local: overlay } : { localMissing: cacheOff ?? 'no cache dir' }),
    isOnline: () => checker.state === 'online',
  }
  const filters = new FilterRegistry(topology, filterConfig, log)
  metrics.observeFilters(() => filters.tallies())
  metrics.observeUpstream(() => ({ counts: upstream.connectionCounts, http2Open: upstream.openH2Connections }))
  const filteredWatches = new FilteredWatches()
  const watchCaches = new WatchCaches({
    upstream,
    store: kept,
    streams,
    isOnline: () => checker.state === 'online',
    log,
    nodeName: config.nodeName,
    silenceMs: config.watchSilenceTimeoutMs,
    observer: metrics,
    resources: config.sharedResources,
    poolSource,
    poolResources: poolWideResources(config.sharedResources),
    maxListBytes: config.maxListBytes,
    windowSize: options.watchCacheWindow,
    windowMaxBytes: (config.watchWindowMiB ?? watchWindowMiBOf(config.cacheMemoryMiB)) * 1024 * 1024,
  })
  metrics.observeWatchCaches(() => watchCaches.describe())
  // what a filtered watch was shown is worked out before anything the filters read changes: the
  // topology source's own state (live), and the context the filters took from it (until invalidated)
  // (then what the filters made of objects, shared by every client, is forgotten: it is about to change)
  topology.on('beforechange', () => {
    filteredWatches.settle()
    filters.forgetFiltered()
  })
  topology.on('change', () => {
    const watches = filteredWatches.change(() => filters.invalidate())
    log.info({ pool: topology.nodePool, watches }, 'topology changed')
  })
  // the node's own pods as kubelet wrote them offline: the same path as a topology change
  overlay.on('beforechange', () => {
    filteredWatches.settle()
    filters.forgetFiltered()
  })
  overlay.on('change', () => {
    // offline, a version minted for the change: every watch's stream moves on to it
    const watches = filteredWatches.change(() => filters.invalidate(), overlay.mintedVersion(), overlay.affected())
    log.debug({ pods: overlay.size, watches }, 'pod overlay changed')
  })
  // back online: the shared caches and the topology watch again on the new connection now, not after their backoff
  health.on('change', state => {
    if (state !== 'online') return
    watchCaches.resume()
    topology.resume()
  })
  health.on('change', state => {
    // the watches told of minted versions would next be told real, older ones: they start again (410) and list from memory
    const minted = overlay.mintedRange()
    if (state === 'online' && minted?.offline)
      filteredWatches.expireSentBeyond(minted.over, 'the cloud is back and this watch was told versions the hub minted offline')
    overlay.setOnline(state === 'online')
  })

  // each source of answers built once, with what it uses; the router tries them in the plan's order
  const outage = () => (cacheOff ? `${checker.outage()}; ${cacheOff}` : checker.outage())
  // one count for the plain and the HTTPS port: they serve the same node
  const clientLimits = { watchBacklogBytes: config.maxWatchBacklogBytes, stallTimeoutMs: config.stallTimeoutMs }
  const limiter = new InflightLimiter({ maxInflight: config.maxRequestsInflight, maxLongRunning: config.maxLongRunningRequests })
  const router = new Router({
    limiter,
    answerers: {
      'watch-cache': config.sharedWatches
        ? new WatchCacheAnswerer({
            caches: watchCaches,
            filteredWatches,
            streams,
            observer: metrics,
            bookmarkIntervalMs: options.cacheBookmarkIntervalMs,
            clientLimits,
            mintedRead: info => mintedReadOf(overlay, info),
          })
        : undefined,
      upstream: new UpstreamAnswerer({
        upstream,
        log,
        recorder: kept ? recorder : undefined,
        filteredWatches,
        rememberedLists: new RememberedLists(),
        streams,
        observer: metrics,
        watchSilenceMs: config.watchSilenceTimeoutMs,
        cloud: health,
        maxListBytes: config.maxListBytes,
        clientLimits,
      }),
      // every refusal while the cloud is away says why; with the cache off, that too
      offline: new OfflineAnswerer({
        store: kept,
        nodeName: config.nodeName,
        outage,
        streams,
        observer: metrics,
        bookmarkIntervalMs: options.offlineBookmarkIntervalMs ?? 10_000,
        clientLimits,
        live: { register: watch => filteredWatches.add(watch) },
        podWrites: kept ? new StatusLearner({ store: kept, overlay, nodeName: config.nodeName }) : undefined,
      }),
    },
    sources: {
      cloud: { isOnline: () => checker.state === 'online' },
      caching: kept ? new CachePolicy(config.cacheComponents) : undefined,
      watchCaches: config.sharedWatches ? watchCaches : undefined,
      filters,
    },
    log,
    observer: metrics,
    versionProblem: info =>
      mintedReadOf(overlay, info) === 'expired'
        ? failure(410, `too old resource version: ${info.resourceVersion} (a version this hub minted offline: list again)`, 'Expired')
        : undefined,
    body: { maxBytes: config.maxRequestBytes, idleMs: config.headerTimeoutMs, budget: new BodyBudget(defaultBodyBudgetBytes) },
  })
  const limits = { headerTimeoutMs: config.headerTimeoutMs, idleTimeoutMs: config.idleTimeoutMs }
  const proxy = createProxyServer({ ...limits, handle: router.handlerFor(), upgrades: { upstream, limiter }, logger: log })
  const api: ApiCaller = (method, path, body) => upstream.callJson(method, path, body)
  let secure: SecurePort | undefined
  let pool: HubPool | undefined
  const admin = createAdminServer({
    log,
    metrics,
    store,
    topology,
    health,
    filters,
    nodeName: config.nodeName,
    pending: () => secure?.pending() ?? '',
    cacheProblems: () => cacheProblems(store, cacheOff),
    loading: () => store.loading,
    watchCaches,
    servedFromShared: (component, key) => watchCaches.servedFrom(component, key),
    pool: () => pool,
    podAddress,
    overlay,
  })

  try {
    await health.start()
    overlay.setOnline(checker.state === 'online')
    await topology.start()
    await listenAs(proxy, { host: config.bindAddress, port: config.port, flag: '--port', hostFlag: '--bind-address' })
    await listenAs(admin, { host: config.adminAddress, port: config.adminPort, flag: '--admin-port', hostFlag: '--admin-address' })
    if (config.securePort !== null)
      secure = await startSecurePort(config, log, { router, upstream, limits, podAddress: podAddress.advertised, limiter }, api, options.timing)
    if (config.poolSharing)
      pool = await startHubPool({
        config,
        log,
        upstream,
        credentials: () => currentCredentials,
        poolSource,
        topology,
        watchCaches,
        answerer: { filteredWatches, observer: metrics, bookmarkIntervalMs: options.cacheBookmarkIntervalMs },
        isOnline: () => checker.state === 'online',
        observer: metrics,
      })
  } catch (error) {
    health.stop()
    await topology.stop()
    watchCaches.close()
    await loaded
    await Promise.allSettled([proxy.close(), admin.close(), secure?.close(), pool?.close(), upstream.close(), podAddress.close()])
    throw error
  }
  nodeCredentials.start(next => {
    currentCredentials = next
    upstream.setCredentials(next)
  }, api)
  // the Node's OutpostAutonomy condition: whether this node would survive a cut, written while online
  const autonomy = config.nodeCondition
    ? startAutonomyCondition({ upstream, store, cacheOff, nodeName: config.nodeName, isOnline: () => checker.state === 'online', log, ...options.autonomy })
    : undefined
  health.on('change', state => {
    if (state === 'online') void autonomy?.tick()
  })
  const hub: Hub = {
    proxyUrl: urlOf(proxy.server.address() as AddressInfo),
    adminUrl: urlOf(admin.server.address() as AddressInfo),
    upstream,
    health,
    store,
    recorder,
    streams,
    metrics,
    log,
    topology,
    overlay,
    watchCaches,
    poolSource,
    pool,
    secureUrl: secure?.url,
    async close() {
      // a leader hands its pool over at once (the Lease released) before it stops answering
      await pool?.close()
      checker.stop()
      overlay.close()
      autonomy?.stop()
      await topology.stop()
      nodeCredentials.stop()
      watchCaches.close()
      streams.endHeldWatches()
      streams.endOfflineWatches()
      streams.endUpstreamWatches()
      // ended watches write their last chunk before the server force-closes connections
      await streams.whenClosed(2_000)
      await Promise.allSettled([proxy.close(), admin.close(), secure?.close()])
      // after the HTTPS port: a pod's request in flight finishes on the address it came to
      await podAddress.close()
      await loaded
      await store.flush()
      await store.close()
      await upstream.close()
    },
  }
  log.info({ proxy: hub.proxyUrl, admin: hub.adminUrl, servers: servers.map(s => s.origin), node: config.nodeName, state: health.state }, 'outpost serving')
  return hub
}
