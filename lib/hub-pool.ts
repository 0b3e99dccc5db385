// Leader hubs, wired (--pool-sharing=on): the pool port (lib/front/pool-port.ts) with a certificate
// made at start, and this hub's member of its node pool (lib/pool/pool-member.ts), started once
// the pool is known (--nodepool, or the node's label as the topology source reads it) and the
// address to publish too (--pool-advertise-address, or the node's InternalIP).
import type { Logger } from 'pino'
import { poolWideResources } from './config.ts'
import type { HubConfig } from './config.ts'
import { createPinnedCertificate } from '../certs/pinned.ts'
import { startPoolPort } from './front/pool-port.ts'
import type { PoolPort } from './front/pool-port.ts'
import { WatchCacheAnswerer } from './front/watch-cache-answerer.ts'
import type { WatchCacheAnswererOptions } from './front/watch-cache-answerer.ts'
import type { RouterOptions } from './front/router.ts'
import { readCaBundle } from './front/secure-port.ts'
import { PoolMember } from './pool/pool-member.ts'
import type { PoolObserver } from './pool/pool-member.ts'
import { leaseApi } from './pool/lease-api.ts'
import type { Upstream } from './upstream/upstream.ts'
import type { SourceSwitch } from './upstream/source-switch.ts'
import type { UpstreamCredentials } from './upstream/kubeconfig.ts'
import type { TopologySource } from './topology/source.ts'
import type { WatchCaches } from './watch/watch-caches.ts'
import { LiveStreams } from './watch/streams.ts'

export interface PoolStatus {
  enabled: boolean
  why?: string
  poolPort: string | null
  resources: { resource: string; format: string; from: string }[]
  bytes: { leader: number; cloud: number }
  [more: string]: unknown
}

export interface HubPool {
  describe(): PoolStatus
  /** what /v1/readyz notes (never a reason to be unready: the cloud serves meanwhile) */
  note(): string | undefined
  close(): Promise<void>
}

export interface HubPoolParts {
  config: HubConfig
  log: Logger
  upstream: Upstream
  credentials: () => UpstreamCredentials
  poolSource: SourceSwitch
  topology: TopologySource
  watchCaches: WatchCaches
  /** what the pool port's watch cache answerer is built from (the hub's own, unfiltered) */
  answerer: Omit<WatchCacheAnswererOptions, 'caches' | 'streams'>
  isOnline: () => boolean
  observer: PoolObserver & NonNullable<RouterOptions['observer']>
}

async function clientCa(config: HubConfig, credentials: UpstreamCredentials): Promise<Buffer> {
  if (config.poolClientCaFile) return readCaBundle('--pool-client-ca-file', config.poolClientCaFile)
  if (credentials.ca) return credentials.ca
  throw new Error('--pool-sharing=on needs the CA of node client certificates: give --pool-client-ca-file (the kubeconfig names no CA)')
}

/** The node's InternalIP, as its Node says (the kubelet reports it), or undefined. */
async function internalIp(upstream: Upstream, nodeName: string): Promise<string | undefined> {
  const answer = await upstream.callJson('GET', `/api/v1/nodes/${encodeURIComponent(nodeName)}`)
  if (answer.statusCode !== 200) return undefined
  const addresses: { type?: string; address?: string }[] = answer.body?.status?.addresses ?? []
  return addresses.find(a => a.type === 'InternalIP')?.address
}

export async function startHubPool(parts: HubPoolParts): Promise<HubPool> {
  const { config, log } = parts
  const ca = await clientCa(config, parts.credentials())
  const resources = poolWideResources(config.sharedResources)
  const certificate = await createPinnedCertificate({ commonName: `outpost-pool:${config.nodeName}`, ips: [config.poolAdvertiseAddress ?? '127.0.0.1'] })
  let member: PoolMember | undefined
  // the watches the pool port serves: ended when this hub stops leading, so its followers move on
  const poolStreams = new LiveStreams()
  let why = 'waiting to learn the node pool (--nodepool, or the apps.openyurt.io/nodepool label of the node)'
  const port: PoolPort = await startPoolPort({
    host: config.poolBindAddress,
    port: config.poolPort,
    tls: { cert: certificate.cert, key: certificate.key, clientCa: ca },
    access: { resources: new Set(resources), isLeading: () => member?.isLeader ?? false, pool: () => member?.describe().pool ?? '' },
    watchCaches: new WatchCacheAnswerer({ ...parts.answerer, streams: poolStreams, caches: parts.watchCaches, consistentReads: 'from-memory' }),
    sources: { cloud: { isOnline: parts.isOnline }, watchCaches: parts.watchCaches },
    log,
    observer: parts.observer,
    limits: { headerTimeoutMs: config.headerTimeoutMs, idleTimeoutMs: config.idleTimeoutMs },
  })
  let address: string | undefined
  let stopped = false
  let retry: NodeJS.Timeout | undefined

  const join = async (): Promise<void> => {
    const pool = config.nodePool ?? parts.topology.nodePool
    if (stopped || !pool) return
    if (member && member.pool !== pool) {
      // the node moved to another pool (its label changed): leave the old one's election
      log.info({ from: member.pool, to: pool }, 'pool: the node changed pools')
      const leaving = member
      member = undefined
      await leaving.stop()
    }
    if (member) return
    if (!address) {
      const ip = config.poolAdvertiseAddress ?? (await internalIp(parts.upstream, config.nodeName).catch(() => undefined))
      if (!ip) {
        why = `waiting to learn this node's InternalIP (its Node's status.addresses), or give --pool-advertise-address`
        retry = setTimeout(onTopology, config.poolRetryPeriodMs)
        retry.unref()
        return
      }
      address = `https://${ip.includes(':') ? `[${ip}]` : ip}:${port.port}`
    }
    if (stopped || member || pool !== (config.nodePool ?? parts.topology.nodePool)) return
    const name = config.poolLeaseName ?? `outpost-pool-${pool.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 253)
    const call = (method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown) => parts.upstream.callJson(method, path, body)
    member = new PoolMember({
      identity: config.nodeName,
      pool,
      lease: {
        namespace: config.poolLeaseNamespace,
        name,
        api: leaseApi(call, config.poolLeaseNamespace, name),
        durationMs: config.poolLeaseDurationMs,
        renewDeadlineMs: config.poolRenewDeadlineMs,
        retryPeriodMs: config.poolRetryPeriodMs,
      },
      publish: () => ({ address: address!, certificate: certificate.cert }),
      poolSource: parts.poolSource,
      cloud: parts.upstream,
      credentials: () => parts.credentials(),
      log,
      observer: parts.observer,
      onStopLeading: () => poolStreams.endHeldWatches(),
    })
    member.start()
    log.info({ pool, lease: `${config.poolLeaseNamespace}/${name}`, address }, 'pool: competing for the Lease of the node pool')
  }
  // one join at a time, in order: topology changes come in bursts
  let joining = Promise.resolve()
  const onTopology = () => {
    joining = joining.then(join).catch(error => log.warn({ err: (error as Error).message }, 'pool: could not join the node pool'))
  }
  parts.topology.on('change', onTopology)
  onTopology()
  await joining

  return {
    describe: () => {
      const caches = parts.watchCaches.describe().filter(c => c.poolWide)
      return {
        enabled: true,
        ...(member ? member.describe() : { why }),
        poolPort: address ?? null,
        resources: caches.map(c => ({ resource: c.resource, format: c.format, from: c.from ?? 'cloud' })),
        bytes: { ...parts.watchCaches.poolBytes },
      }
    },
    note: () => {
      const state = member?.describe()
      if (!state) return `pool: not in the pool yet (${why}); pool-wide resources from the cloud`
      if (state.role === 'candidate') return `pool: no leader to follow (${state.why}); pool-wide resources from the cloud`
      return undefined
    },
    close: async () => {
      stopped = true
      clearTimeout(retry)
      await joining
      parts.topology.off('change', onTopology)
      await member?.stop()
      poolStreams.endHeldWatches()
      await port.close()
    },
  }
}
