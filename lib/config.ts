// The hub's configuration: what cmd/ turns flags and environment into, and what everything in lib/
// is started with. Defaults live here, not in the flag parser, so tests and the demo share them.

import os from 'node:os'

export type ServingCertSource = 'self-signed' | 'csr'

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'

export const logLevels: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

/** auto: text for a person at a terminal, JSON lines for a log collector (as kube components' --logging-format) */
export type LogFormat = 'auto' | 'text' | 'json'

export const logFormats: readonly LogFormat[] = ['auto', 'text', 'json']

export interface HubConfig {
  /** apiserver URLs in failover order; empty = demo mode (embedded simulator) */
  servers: URL[]
  /** path of a kubeconfig holding the node's credentials (and, failing --server, the server) */
  kubeconfig?: string
  /** this node's name; default: os.hostname() lower-cased */
  nodeName: string
  /** this node's pool, when not read from the node's apps.openyurt.io/nodepool label */
  nodePool?: string
  /** address of the plain-HTTP proxy port; anything but loopback needs insecureAllowRemote */
  bindAddress: string
  port: number
  insecureAllowRemote: boolean
  adminAddress: string
  adminPort: number
  /** the HTTPS proxy port; null = off, 0 = any free port */
  securePort: number | null
  secureBindAddress: string
  /** serving certificate files; without them one is generated (self-signed CA) or requested (csr) into certDir */
  tlsCertFile?: string
  tlsKeyFile?: string
  servingCert: ServingCertSource
  /** generated certificates, and the client certificate got with a bootstrap kubeconfig */
  certDir: string
  /** IP SANs of the serving certificate besides 127.0.0.1; empty = this host's addresses */
  nodeIps: string[]
  /** HTTPS clients with a certificate that verifies against this CA bundle use the hub's credentials */
  clientCaFile?: string
  /** a kubeconfig with a bootstrap token, used to get the node's client certificate by CSR */
  bootstrapKubeconfig?: string
  /** requests served at once, past which a 429 (0: no cap); watches and exec/attach/port-forward are counted apart */
  maxRequestsInflight: number
  maxLongRunningRequests: number
  /** bytes a watch's client may leave unread before the hub ends that watch, as the apiserver ends a slow watcher */
  maxWatchBacklogBytes: number
  /** a watch or list response whose client takes nothing for this long is ended */
  stallTimeoutMs: number
  /** keep the OutpostAutonomy condition on this node's Node (lib/autonomy/) */
  nodeCondition: boolean
  /** once the cloud is back, longest the node's endpoints keep what kubelet wrote of its pods while it was away */
  podOverlayTtlMs: number
  /** a list (or get) bigger than this is relayed as it streams: not cached, not filtered */
  maxListBytes: number
  /** request bodies over this are refused with 413, as the apiserver does */
  maxRequestBytes: number
  /** a client must send its request headers within this, and may idle between requests this long */
  headerTimeoutMs: number
  idleTimeoutMs: number
  cacheDir: string
  logLevel: LogLevel
  /** 'auto': text when stdout is a terminal, JSON lines otherwise; cmd/log.ts reads it */
  logFormat: LogFormat
  /** components whose reads are cached (User-Agent up to '/'); '*' for all */
  cacheComponents: string[]
  /** components that see service topology applied to EndpointSlices and Endpoints */
  topologyComponents: string[]
  /** response filters turned on (servicetopology, masterservice, …: filters/registry.ts), minus disabledFilters */
  filters: string[]
  disabledFilters: string[]
  /** per filter, the components it is for, when not its default (topologyComponents for servicetopology) */
  filterComponents: Record<string, string[]>
  /** where pods reach the hub's HTTPS port, written into objects by masterservice, serviceenvupdater and forwardkubesvctraffic; default --secure-bind-address when pods can reach it */
  advertiseAddress?: string
  /** link-local address pods reach the HTTPS port on, kept on a dummy interface of the hub's own; null = off */
  podAddress: string | null
  /** the dummy interface that holds podAddress */
  podInterface: string
  /** MiB of object bodies kept in memory; the rest is read back from disk */
  cacheMemoryMiB: number
  /** MiB of recent events each watch cache keeps for watches that resume from a version; default watchWindowMiBOf(cacheMemoryMiB) */
  watchWindowMiB?: number
  /** cloud health probing: period, per-probe timeout, consecutive failures to go offline, successes to come back */
  healthIntervalMs: number
  healthTimeoutMs: number
  healthFailures: number
  healthSuccesses: number
  /** HTTP/2 to the apiserver where it offers it: one connection per identity carries every request and watch */
  http2: boolean
  /** streams on one HTTP/2 connection at most (the server's SETTINGS may lower it); past it a second connection opens */
  http2MaxStreamsPerConnection: number
  /** an HTTP/2 connection silent this long is PINGed; one whose PING goes unanswered this long is dead (client-go: 30 s, 15 s) */
  http2ReadIdleTimeoutMs: number
  http2PingTimeoutMs: number
  /** an upstream watch silent this long is ended (the apiserver sends BOOKMARKs about every minute) */
  watchSilenceTimeoutMs: number
  /** one upstream list+watch per shared resource and format, serving every local client (off: each client's own, relayed) */
  sharedWatches: boolean
  /** `group/version/resource` of the resources the shared watch caches keep (core: `v1/services`) */
  sharedResources: string[]
  /** leader hubs (lib/pool/): one hub per node pool watches the cloud's pool-wide resources, the others watch it */
  poolSharing: boolean
  /** the leader's pool port (HTTPS, node client certificates only); 0 = any free port */
  poolPort: number
  poolBindAddress: string
  /** where the other hubs of the pool reach this one when it leads; default the node's InternalIP */
  poolAdvertiseAddress?: string
  poolLeaseNamespace: string
  /** default `outpost-pool-<pool>` */
  poolLeaseName?: string
  /** the CA that node client certificates on the pool port must verify against; default the kubeconfig's CA */
  poolClientCaFile?: string
  /** client-go leaderelection's LeaseDuration, RenewDeadline and RetryPeriod */
  poolLeaseDurationMs: number
  poolRenewDeadlineMs: number
  poolRetryPeriodMs: number
}

export const defaults: Omit<HubConfig, 'servers' | 'nodeName'> = Object.freeze({
  bindAddress: '127.0.0.1',
  port: 10261,
  insecureAllowRemote: false,
  adminAddress: '127.0.0.1',
  adminPort: 10267,
  securePort: 10268,
  secureBindAddress: '127.0.0.1',
  podAddress: '169.254.2.1',
  podInterface: 'outpost0',
  servingCert: 'self-signed',
  certDir: '/var/lib/outpost/pki',
  nodeIps: [],
  maxRequestBytes: 3 * 1024 * 1024,
  maxRequestsInflight: 200,
  maxLongRunningRequests: 1000,
  maxWatchBacklogBytes: 4 * 1024 * 1024,
  stallTimeoutMs: 60_000,
  podOverlayTtlMs: 5 * 60_000,
  nodeCondition: true,
  maxListBytes: 128 * 1024 * 1024,
  headerTimeoutMs: 10_000,
  idleTimeoutMs: 90_000,
  cacheDir: '/var/lib/outpost/cache',
  logLevel: 'info',
  logFormat: 'auto',
  cacheComponents: ['kubelet', 'kube-proxy', 'coredns', 'flanneld', 'outpost'],
  cacheMemoryMiB: 256,
  topologyComponents: ['kube-proxy', 'coredns', 'nginx-ingress-controller'],
  filters: [
    'localendpoints',
    'servicetopology',
    'masterservice',
    'serviceenvupdater',
    'forwardkubesvctraffic',
    'discardcloudservice',
    'nodeportisolation',
    'inclusterconfig',
  ],
  disabledFilters: [],
  filterComponents: {},
  healthIntervalMs: 5_000,
  healthTimeoutMs: 2_000,
  healthFailures: 3,
  healthSuccesses: 1,
  http2: true,
  http2MaxStreamsPerConnection: 1_000,
  http2ReadIdleTimeoutMs: 30_000,
  http2PingTimeoutMs: 15_000,
  watchSilenceTimeoutMs: 150_000,
  sharedWatches: true,
  sharedResources: ['v1/services', 'v1/endpoints', 'v1/nodes', 'v1/pods', 'discovery.k8s.io/v1/endpointslices', 'discovery.k8s.io/v1beta1/endpointslices'],
  poolSharing: false,
  poolPort: 10269,
  poolBindAddress: '0.0.0.0',
  poolLeaseNamespace: 'kube-system',
  poolLeaseDurationMs: 15_000,
  poolRenewDeadlineMs: 10_000,
  poolRetryPeriodMs: 2_000,
})

/**
 * The shared resources a pool's leader feeds its followers: every one the whole pool reads alike.
 * kubelet's pods are this node's alone (the Node authorizer lets a node list only its own).
 */
export function poolWideResources(sharedResources: readonly string[]): string[] {
  return sharedResources.filter(resource => resource !== 'v1/pods')
}

/** 127.0.0.0/8 and ::1 (also as ::ffff:127.x): addresses nobody off this host can reach. */
export function isLoopback(address: string): boolean {
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address
  return /^127\.\d+\.\d+\.\d+$/.test(v4) || address === '::1'
}

/**
 * The plain port has no authentication: whoever reaches it acts as this node. Binding it beyond
 * loopback must be asked for by name.
 */
export function plainBindProblem(config: Pick<HubConfig, 'bindAddress' | 'insecureAllowRemote'>): string | undefined {
  if (isLoopback(config.bindAddress) || config.insecureAllowRemote) return undefined
  return `--bind-address ${config.bindAddress} is not loopback: the plain-HTTP port has no authentication and anyone reaching it acts as this node; use the HTTPS port (--secure-port), or give --insecure-allow-remote`
}

/** The default node name, as the kubelet picks it: the host name, lower-cased. */
export function defaultNodeName(): string {
  return os.hostname().toLowerCase()
}

/** The User-Agent of the hub's own requests (health probes, later the topology context). */
export const hubUserAgent = 'outpost/v0.1.0'

/**
 * Where pods reach the hub's HTTPS port, or undefined: loopback and the unspecified address are no
 * place a pod can reach. `podAddress` is the link-local address when the hub holds it.
 */
export function hubAddressForPods(
  config: Pick<HubConfig, 'advertiseAddress' | 'secureBindAddress' | 'securePort'>,
  podAddress?: string,
): { host: string; port: number } | undefined {
  if (config.securePort === null || config.securePort === 0) return undefined
  const host = config.advertiseAddress ?? podAddress ?? config.secureBindAddress
  if (isLoopback(host) || host === '0.0.0.0' || host === '::') return undefined
  return { host, port: config.securePort }
}

/**
 * Why the link-local pod address is not kept, or undefined when it is to be: pods verify the hub
 * with the cluster CA (their ServiceAccount's ca.crt), so only a certificate the cluster signs
 * (--serving-cert=csr) or one the operator gives (--tls-cert-file) is worth pointing them at.
 */
export function podAddressProblem(config: Pick<HubConfig, 'podAddress' | 'securePort' | 'servingCert' | 'tlsCertFile'>): string | undefined {
  if (config.podAddress === null) return 'turned off (--pod-address=off)'
  if (config.securePort === null) return 'the HTTPS port is off (--secure-port)'
  if (!config.tlsCertFile && config.servingCert !== 'csr')
    return "the serving certificate is the hub's own CA (--serving-cert=self-signed), which pods do not trust: --serving-cert=csr or --tls-cert-file"
  return undefined
}

/** A watch cache's event window when --watch-window-memory is not given: an eighth of --cache-memory, at least 1 MiB. */
export function watchWindowMiBOf(cacheMemoryMiB: number): number {
  return Math.max(1, Math.floor(cacheMemoryMiB / 8))
}
