// Starts the hub from a HubConfig: the disk cache (locked first) → the cloud (credentials, upstream,
// health) → what the filters read → the answerers and the router → the ports. Each part is built in
// lib/wiring/ with what it needs and registers its closer on one lifecycle stack, which a start that
// fails half way and close() both unwind; this file only says in which order, and what follows a cloud change.
import { pino } from 'pino'
import type { Logger } from 'pino'
import { repeatLimitHook } from './log-limit.ts'
import { plainBindProblem } from './config.ts'
import type { HubConfig } from './config.ts'
import type { Upstream } from './upstream/upstream.ts'
import { serverLabel } from './upstream/health.ts'
import type { CloudState, HealthChecker } from './upstream/health.ts'
import { LiveStreams } from './watch/streams.ts'
import type { CacheStore } from './cache/store.ts'
import type { Recorder } from './cache/recorder.ts'
import { createMetrics } from './observe/metrics.ts'
import type { Metrics } from './observe/metrics.ts'
import type { TopologySource } from './topology/source.ts'
import type { WatchCaches } from './watch/watch-caches.ts'
import type { SourceSwitch } from './upstream/source-switch.ts'
import { startHubPool } from './hub-pool.ts'
import type { HubPool } from './hub-pool.ts'
import type { PodOverlay } from './overlay/pod-overlay.ts'
import { startAutonomyCondition } from './autonomy/node-condition.ts'
import { Lifecycle } from './wiring/lifecycle.ts'
import { openCache } from './wiring/cache.ts'
import { connectCloud } from './wiring/cloud.ts'
import { buildFiltering } from './wiring/filtering.ts'
import { buildAnswering } from './wiring/answering.ts'
import { openServers } from './wiring/servers.ts'

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

export async function startHub(config: HubConfig, options: StartOptions = {}): Promise<Hub> {
  const log = options.logger ?? pino({ level: config.logLevel, name: 'outpost', hooks: { logMethod: repeatLimitHook() } })
  const bindProblem = plainBindProblem(config)
  if (bindProblem) throw new Error(bindProblem)
  const lifecycle = new Lifecycle(log)
  try {
    return await start(config, options, log, lifecycle)
  } catch (error) {
    await lifecycle.unwind()
    throw error
  }
}

async function start(config: HubConfig, options: StartOptions, log: Logger, lifecycle: Lifecycle): Promise<Hub> {
  const metrics = createMetrics()
  const cache = await openCache({ cacheDir: config.cacheDir, memoryMiB: config.cacheMemoryMiB, log, metrics }, lifecycle)
  const cloud = await connectCloud(config, log, lifecycle, options.timing)
  const { upstream, health } = cloud
  const streams = new LiveStreams()
  const filtering = await buildFiltering({ config, log, upstream, isOnline: health.isOnline, streams, cache }, lifecycle)
  const { topology, overlay, filters } = filtering
  metrics.observeFilters(() => filters.tallies())
  metrics.observeUpstream(() => ({ counts: upstream.connectionCounts, http2Open: upstream.openH2Connections }))
  const answering = buildAnswering(
    {
      config,
      log,
      cloud,
      cache,
      filtering,
      streams,
      metrics,
      bookmarkIntervalMs: { offline: options.offlineBookmarkIntervalMs, cache: options.cacheBookmarkIntervalMs },
      watchCacheWindow: options.watchCacheWindow,
    },
    lifecycle,
  )
  const { watchCaches } = answering
  let pool: HubPool | undefined
  let autonomy: ReturnType<typeof startAutonomyCondition> | undefined

  // what follows the cloud going away or coming back, in one place
  metrics.cloudOnline.set(1)
  // a watch answered from the cache during a blip must not outlive it
  health.on('answered', () => streams.endFallbackWatches())
  health.on('server', (server: URL, up: boolean) => metrics.upstreamUp.set({ server: serverLabel(server) }, up ? 1 : 0))
  const cloudChanged = (state: CloudState) => {
    const online = state === 'online'
    metrics.cloudOnline.set(online ? 1 : 0)
    // Nobody may wait on a dead link; and once the cloud is back, offline watches end so their
    // clients re-watch upstream and receive what changed meanwhile.
    const ended = online ? streams.endOfflineWatches() : streams.endUpstreamWatches()
    log.info({ state, endedWatches: ended }, online ? 'serving from the cloud' : 'serving from cache')
    filtering.cloudChanged(online)
    answering.cloudChanged(online)
    if (online) void autonomy?.tick()
  }
  health.on('change', cloudChanged)

  lifecycle.defer('health checks', () => health.stop())
  await health.start()
  await filtering.start()
  const servers = await openServers(
    {
      config,
      log,
      cloud,
      answering,
      podAddress: filtering.podAddress.advertised,
      timing: options.timing,
      admin: {
        metrics,
        store: cache.store,
        topology,
        health,
        filters,
        nodeName: config.nodeName,
        cacheProblems: () => cache.problems(),
        loading: () => cache.store.loading,
        watchCaches,
        servedFromShared: (component, key) => watchCaches.servedFrom(component, key),
        pool: () => pool,
        podAddress: filtering.podAddress,
        overlay,
      },
    },
    lifecycle,
  )
  // ended watches write their last chunk before the ports close (and force-close connections); the
  // reflectors stop first (again, as their own closers do on a failed start): one whose watch ended would log it and watch again
  lifecycle.defer('watches', async () => {
    await topology.stop()
    watchCaches.close()
    streams.endHeldWatches()
    streams.endOfflineWatches()
    streams.endUpstreamWatches()
    await streams.whenClosed(2_000)
  })
  if (config.poolSharing) {
    // closed before the ports: a leader hands its pool over at once (the Lease released) before it stops answering
    pool = await startHubPool({
      config,
      log,
      upstream,
      credentials: cloud.credentials,
      poolSource: filtering.poolSource,
      topology,
      watchCaches,
      answerer: { filteredWatches: filtering.filteredWatches, observer: metrics, bookmarkIntervalMs: options.cacheBookmarkIntervalMs },
      isOnline: health.isOnline,
      observer: metrics,
    })
    lifecycle.defer('node pool', () => pool?.close())
  }
  cloud.keepCredentials()
  // the Node's OutpostAutonomy condition: whether this node would survive a cut, written while online
  if (config.nodeCondition) {
    const condition = startAutonomyCondition({
      upstream,
      store: cache.store,
      cacheOff: cache.off,
      nodeName: config.nodeName,
      isOnline: health.isOnline,
      log,
      ...options.autonomy,
    })
    autonomy = condition
    lifecycle.defer('node condition', () => condition.stop())
  }
  // stopping, the cloud's comings and goings start nothing again
  lifecycle.defer('cloud changes', () => health.off('change', cloudChanged))

  const hub: Hub = {
    ...servers,
    upstream,
    health,
    store: cache.store,
    recorder: cache.recorder,
    streams,
    metrics,
    log,
    topology,
    overlay,
    watchCaches,
    poolSource: filtering.poolSource,
    pool,
    close: () => lifecycle.unwind(),
  }
  log.info(
    { proxy: hub.proxyUrl, admin: hub.adminUrl, servers: cloud.servers.map(s => s.origin), node: config.nodeName, state: health.state },
    'outpost serving',
  )
  return hub
}
