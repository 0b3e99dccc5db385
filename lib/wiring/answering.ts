// The sources of answers, each built once with what it uses, and the router that tries them in
// its plan's order: the shared watch caches, the cloud (relayed, and kept), the cache offline.
import type { Logger } from 'pino'
import type { HubConfig } from '../config.ts'
import { poolWideResources, watchWindowMiBOf } from '../config.ts'
import { WatchCaches } from '../watch/watch-caches.ts'
import { RememberedLists } from '../watch/remembered-lists.ts'
import type { LiveStreams } from '../watch/streams.ts'
import { Router } from '../front/router.ts'
import { BodyBudget, defaultBodyBudgetBytes, InflightLimiter } from '../front/inflight.ts'
import { UpstreamAnswerer } from '../front/upstream-answerer.ts'
import { WatchCacheAnswerer } from '../front/watch-cache-answerer.ts'
import { OfflineAnswerer } from '../front/offline-answerer.ts'
import { CachePolicy } from '../cache/recorder.ts'
import { StatusLearner } from '../overlay/learn.ts'
import { failure } from '../api/status.ts'
import type { Metrics } from '../observe/metrics.ts'
import type { Cloud } from './cloud.ts'
import type { Cache } from './cache.ts'
import type { Filtering } from './filtering.ts'
import type { Lifecycle } from './lifecycle.ts'

export interface Answering {
  watchCaches: WatchCaches
  router: Router
  /** one count for the plain and the HTTPS port: they serve the same node */
  limiter: InflightLimiter
  cloudChanged(online: boolean): void
}

export interface AnsweringInputs {
  config: HubConfig
  log: Logger
  cloud: Cloud
  cache: Cache
  filtering: Filtering
  streams: LiveStreams
  metrics: Metrics
  /** BOOKMARK periods of watches served from the cache and from a shared watch cache */
  bookmarkIntervalMs: { offline?: number; cache?: number }
  /** events each shared watch cache keeps for resumed watches and reads of the past */
  watchCacheWindow?: number
}

export function buildAnswering(inputs: AnsweringInputs, lifecycle: Lifecycle): Answering {
  const { config, log, cloud, cache, filtering, streams, metrics } = inputs
  const { upstream, health } = cloud
  const { kept } = cache
  const { filteredWatches, overlay } = filtering
  const watchCaches = new WatchCaches({
    upstream,
    store: kept,
    streams,
    isOnline: health.isOnline,
    log,
    nodeName: config.nodeName,
    silenceMs: config.watchSilenceTimeoutMs,
    observer: metrics,
    resources: config.sharedResources,
    poolSource: filtering.poolSource,
    poolResources: poolWideResources(config.sharedResources),
    maxListBytes: config.maxListBytes,
    windowSize: inputs.watchCacheWindow,
    windowMaxBytes: (config.watchWindowMiB ?? watchWindowMiBOf(config.cacheMemoryMiB)) * 1024 * 1024,
  })
  lifecycle.defer('shared watch caches', () => watchCaches.close())
  metrics.observeWatchCaches(() => watchCaches.describe())

  // every refusal while the cloud is away says why; with the cache off, that too
  const outage = () => (cache.off ? `${health.outage()}; ${cache.off}` : health.outage())
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
            bookmarkIntervalMs: inputs.bookmarkIntervalMs.cache,
            clientLimits,
            mintedRead: filtering.mintedRead,
          })
        : undefined,
      upstream: new UpstreamAnswerer({
        upstream,
        log,
        recorder: kept ? cache.recorder : undefined,
        filteredWatches,
        rememberedLists: new RememberedLists(),
        streams,
        observer: metrics,
        watchSilenceMs: config.watchSilenceTimeoutMs,
        cloud: health,
        maxListBytes: config.maxListBytes,
        clientLimits,
      }),
      offline: new OfflineAnswerer({
        store: kept,
        nodeName: config.nodeName,
        outage,
        streams,
        observer: metrics,
        bookmarkIntervalMs: inputs.bookmarkIntervalMs.offline ?? 10_000,
        clientLimits,
        live: { register: watch => filteredWatches.add(watch) },
        podWrites: kept ? new StatusLearner({ store: kept, overlay, nodeName: config.nodeName }) : undefined,
      }),
    },
    sources: {
      cloud: { isOnline: health.isOnline },
      caching: kept ? new CachePolicy(config.cacheComponents) : undefined,
      watchCaches: config.sharedWatches ? watchCaches : undefined,
      filters: filtering.filters,
    },
    log,
    observer: metrics,
    versionProblem: info =>
      filtering.mintedRead(info) === 'expired'
        ? failure(410, `too old resource version: ${info.resourceVersion} (a version this hub minted offline: list again)`, 'Expired')
        : undefined,
    body: { maxBytes: config.maxRequestBytes, idleMs: config.headerTimeoutMs, budget: new BodyBudget(defaultBodyBudgetBytes) },
  })
  return {
    watchCaches,
    router,
    limiter,
    cloudChanged(online) {
      // back online: the shared caches watch again on the new connection now, not after their backoff
      if (online) watchCaches.resume()
    },
  }
}
