// What the response filters read, wired: the topology source (this node's pool and zone, the
// Services' topology keys), the pod address pods reach the hub on, the pod overlay (this node's
// pods as kubelet wrote them offline), and the filter registry over them; and what follows when
// any of it changes: every filtered watch is shown the difference.
import type { Logger } from 'pino'
import { hubAddressForPods, podAddressProblem } from '../config.ts'
import type { HubConfig } from '../config.ts'
import { keepPodAddress } from '../net/pod-address.ts'
import type { PodAddress } from '../net/pod-address.ts'
import { TopologySource } from '../topology/source.ts'
import { FilterRegistry } from '../../filters/registry.ts'
import { FilteredWatches } from '../watch/filtered-watches.ts'
import { PodOverlay } from '../overlay/pod-overlay.ts'
import { mintedRead } from '../overlay/minted.ts'
import type { MintedRead } from '../overlay/minted.ts'
import { listVersionOf } from '../cache/list-version.ts'
import { isStatus } from '../api/status.ts'
import type { RequestInfo } from '../api/requestinfo.ts'
import type { CacheStore } from '../cache/store.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { SourceSwitch } from '../upstream/source-switch.ts'
import type { LiveStreams } from '../watch/streams.ts'
import type { Cache } from './cache.ts'
import type { Lifecycle } from './lifecycle.ts'

export interface Filtering {
  /** where the pool-wide list+watches go: the cloud, or (a follower of a node pool) its leader */
  poolSource: SourceSwitch
  topology: TopologySource
  podAddress: PodAddress
  overlay: PodOverlay
  filters: FilterRegistry
  filteredWatches: FilteredWatches
  /** what a read of an endpoint resource at a version the pod overlay minted gets (minted.ts) */
  mintedRead(info: RequestInfo): MintedRead
  /** Starts reading the topology (resolves once it has listed, or waited long enough). */
  start(): Promise<void>
  cloudChanged(online: boolean): void
}

const isEndpointResource = (group: string, resource: string) =>
  (group === 'discovery.k8s.io' && resource === 'endpointslices') || (group === '' && resource === 'endpoints')

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

function mintedReadOf(overlay: PodOverlay, info: RequestInfo): MintedRead {
  // asked twice a request (the router, the watch cache): no range (the case but for an hour after an outage) costs nothing more
  const range = overlay.mintedRange()
  if (!range || info.subresource !== '' || !isEndpointResource(info.apiGroup, info.resource) || !/^\d{1,20}$/.test(info.resourceVersion)) return 'as-is'
  const at = info.verb === 'list' ? listVersionOf(info) : undefined
  const exact = at !== undefined && !isStatus(at) && at.kind === 'exact'
  return mintedRead(info.verb, exact, BigInt(info.resourceVersion), range)
}

export interface FilteringInputs {
  config: HubConfig
  log: Logger
  upstream: Upstream
  isOnline: () => boolean
  streams: LiveStreams
  cache: Cache
}

export async function buildFiltering({ config, log, upstream, isOnline, streams, cache }: FilteringInputs, lifecycle: Lifecycle): Promise<Filtering> {
  const { disk } = cache
  const poolSource = new SourceSwitch(upstream)
  const topology = new TopologySource({
    upstream: poolSource,
    streams,
    state: disk,
    nodeName: config.nodeName,
    nodePool: config.nodePool,
    isOnline,
    log,
    silenceMs: config.watchSilenceTimeoutMs,
  })
  // before the filters and the HTTPS port: both are made from whether pods can reach the hub on it
  const podAddress = await keepPodAddress({ address: config.podAddress, interfaceName: config.podInterface, log }, podAddressProblem(config))
  // after the servers: a pod's request in flight finishes on the address it came to
  lifecycle.defer('pod address', () => podAddress.close())
  const overlay = new PodOverlay({ nodeName: config.nodeName, state: disk, log, ttlMs: config.podOverlayTtlMs })
  overlay.setRealVersion(() => endpointVersion(cache.store))
  await overlay.load()
  lifecycle.defer('pod overlay', () => overlay.close())
  const filters = new FilterRegistry(
    topology,
    {
      enabled: config.filters.filter(name => !config.disabledFilters.includes(name)),
      components: { servicetopology: config.topologyComponents, ...config.filterComponents },
      hub: hubAddressForPods(config, podAddress.advertised),
      hubMissing: podAddress.problem(),
      ...(disk ? { local: overlay } : { localMissing: cache.off ?? 'no cache dir' }),
      isOnline,
    },
    log,
  )
  const filteredWatches = new FilteredWatches()
  // What a filtered watch was shown is worked out before anything the filters read changes (then
  // what the filters made of objects, shared by every client, is forgotten: it is about to change).
  const beforeChange = () => {
    filteredWatches.settle()
    filters.forgetFiltered()
  }
  topology.on('beforechange', beforeChange)
  topology.on('change', () => {
    const watches = filteredWatches.change(() => filters.invalidate())
    log.info({ pool: topology.nodePool, watches }, 'topology changed')
  })
  // the node's own pods as kubelet wrote them offline: the same path as a topology change
  overlay.on('beforechange', beforeChange)
  overlay.on('change', () => {
    // offline, a version minted for the change: every watch's stream moves on to it
    const watches = filteredWatches.change(() => filters.invalidate(), overlay.mintedVersion(), overlay.affected())
    log.debug({ pods: overlay.size, watches }, 'pod overlay changed')
  })

  return {
    poolSource,
    topology,
    podAddress,
    overlay,
    filters,
    filteredWatches,
    mintedRead: info => mintedReadOf(overlay, info),
    async start() {
      overlay.setOnline(isOnline())
      lifecycle.defer('topology', () => topology.stop())
      await topology.start()
    },
    cloudChanged(online) {
      // the watches told of minted versions would next be told real, older ones: they start again (410) and list from memory
      const minted = overlay.mintedRange()
      if (online && minted?.offline) filteredWatches.expireSentBeyond(minted.over, 'the cloud is back and this watch was told versions the hub minted offline')
      overlay.setOnline(online)
      // back online: the topology watches again on the new connection now, not after its backoff
      if (online) topology.resume()
    },
  }
}
