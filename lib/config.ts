// The hub's configuration: what cmd/ turns flags and environment into, and what everything in lib/
// is started with. Defaults live here, not in the flag parser, so tests and the demo share them.

import os from 'node:os'

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'

export const logLevels: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

export interface HubConfig {
  /** apiserver URLs in failover order; empty = demo mode (embedded simulator) */
  servers: URL[]
  /** path of a kubeconfig holding the node's credentials (and, failing --server, the server) */
  kubeconfig?: string
  /** this node's name; default: os.hostname() lower-cased */
  nodeName: string
  /** this node's pool, when not read from the node's apps.openyurt.io/nodepool label */
  nodePool?: string
  /** address of the plain-HTTP proxy port and the admin port */
  bindAddress: string
  port: number
  adminPort: number
  cacheDir: string
  logLevel: LogLevel
  /** components whose reads are cached (User-Agent up to '/'); '*' for all */
  cacheComponents: string[]
  /** components that see service topology applied to EndpointSlices and Endpoints */
  topologyComponents: string[]
  /** MiB of object bodies kept in memory; the rest is read back from disk */
  cacheMemoryMiB: number
  /** cloud health probing: period, per-probe timeout, consecutive failures to go offline, successes to come back */
  healthIntervalMs: number
  healthTimeoutMs: number
  healthFailures: number
  healthSuccesses: number
}

export const defaults: Omit<HubConfig, 'servers' | 'nodeName'> = Object.freeze({
  bindAddress: '127.0.0.1',
  port: 10261,
  adminPort: 10267,
  cacheDir: '/var/lib/outpost/cache',
  logLevel: 'info',
  cacheComponents: ['kubelet', 'kube-proxy', 'coredns', 'flanneld', 'outpost'],
  cacheMemoryMiB: 256,
  topologyComponents: ['kube-proxy', 'coredns', 'nginx-ingress-controller'],
  healthIntervalMs: 5_000,
  healthTimeoutMs: 2_000,
  healthFailures: 3,
  healthSuccesses: 2,
})

/** The default node name, as the kubelet picks it: the host name, lower-cased. */
export function defaultNodeName(): string {
  return os.hostname().toLowerCase()
}

/** The User-Agent of the hub's own requests (health probes, later the topology context). */
export const hubUserAgent = 'outpost/v0.1.0'
