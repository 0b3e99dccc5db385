// The cloud, wired: the node's credentials (a client certificate bootstrapped first if so
// configured), the Upstream that talks to the apiservers, and the HealthChecker that probes
// through it and hears how every request went.
import type { Logger } from 'pino'
import type { HubConfig } from '../config.ts'
import type { ApiCaller } from '../../certs/signing-request.ts'
import { NodeCredentials } from '../certificates/credentials.ts'
import type { UpstreamCredentials } from '../upstream/kubeconfig.ts'
import { Upstream } from '../upstream/upstream.ts'
import { HealthChecker } from '../upstream/health.ts'
import type { Lifecycle } from './lifecycle.ts'

export interface Cloud {
  servers: URL[]
  upstream: Upstream
  health: HealthChecker
  /** the credentials in use now: they are re-read, and renewed, while the hub runs */
  credentials(): UpstreamCredentials
  api: ApiCaller
  /** Keeps the credentials fresh from now on (files re-read, certificate renewed), until the hub stops. */
  keepCredentials(): void
}

export interface CredentialTiming {
  reloadIntervalMs?: number
  csrPollIntervalMs?: number
}

function serversFor(config: HubConfig, credentials: UpstreamCredentials): URL[] {
  const servers = config.servers.length > 0 ? config.servers : credentials.server ? [new URL(credentials.server)] : []
  if (servers.length === 0) throw new Error('no apiserver to talk to: give --server, or a --kubeconfig or --bootstrap-kubeconfig with a server')
  return servers
}

export async function connectCloud(config: HubConfig, log: Logger, lifecycle: Lifecycle, timing?: CredentialTiming): Promise<Cloud> {
  const { source, credentials } = await NodeCredentials.load({ config, log, ...timing }, bootstrap => {
    const upstream = new Upstream({ servers: serversFor(config, bootstrap), credentials: bootstrap })
    return { api: (method, path, body) => upstream.callJson(method, path, body), close: () => upstream.close() }
  })
  let current = credentials
  const servers = serversFor(config, credentials)
  // each needs the other: the checker probes through the upstream (not before start()), the upstream reports to it
  const health = new HealthChecker({
    servers,
    probe: (server, signal) => upstream.probe(server, signal),
    intervalMs: config.healthIntervalMs,
    timeoutMs: config.healthTimeoutMs,
    failuresToDown: config.healthFailures,
    successesToUp: config.healthSuccesses,
    log,
  })
  const upstream = new Upstream({
    servers,
    credentials,
    onResult: (server, ok, reason) => (ok ? health.reportSuccess(server) : health.reportFailure(server, reason ?? 'failed')),
    http2: config.http2,
    maxStreamsPerConnection: config.http2MaxStreamsPerConnection,
    readIdleMs: config.http2ReadIdleTimeoutMs,
    pingTimeoutMs: config.http2PingTimeoutMs,
    onLinkDead: (server, reason) => health.reportDown(server, reason),
  })
  lifecycle.defer('upstream', () => upstream.close())
  const api: ApiCaller = (method, path, body) => upstream.callJson(method, path, body)
  return {
    servers,
    upstream,
    health,
    credentials: () => current,
    api,
    keepCredentials() {
      source.start(next => {
        current = next
        upstream.setCredentials(next)
      }, api)
      lifecycle.defer('credentials', () => source.stop())
    },
  }
}
