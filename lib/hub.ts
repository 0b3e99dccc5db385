// Starts the hub from a HubConfig: credentials → upstream → proxy server (+ admin server).
// The one place that wires modules together; each module stays ignorant of the others.
import Fastify, { LogController } from 'fastify'
import { pino } from 'pino'
import type { Logger } from 'pino'
import type { AddressInfo } from 'node:net'
import type { HubConfig } from './config.ts'
import { loadKubeconfig } from './kubeconfig.ts'
import type { UpstreamCredentials } from './kubeconfig.ts'
import { Upstream } from './upstream.ts'
import { createProxyServer } from './server.ts'

export interface Hub {
  /** http://<bind>:<port> of the proxy */
  proxyUrl: string
  adminUrl: string
  upstream: Upstream
  log: Logger
  close(): Promise<void>
}

export interface StartOptions {
  logger?: Logger
  /** the apiserver refuses bodies over 3 MiB; so does the hub, before forwarding */
  maxRequestBodyBytes?: number
}

export async function resolveUpstream(config: HubConfig): Promise<{ servers: URL[]; credentials: UpstreamCredentials }> {
  const credentials = config.kubeconfig ? await loadKubeconfig(config.kubeconfig) : {}
  const servers = config.servers.length > 0 ? config.servers : credentials.server ? [new URL(credentials.server)] : []
  if (servers.length === 0) throw new Error('no apiserver to talk to: give --server or a --kubeconfig with a server')
  return { servers, credentials }
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return `http://${host}:${address.port}`
}

export async function startHub(config: HubConfig, options: StartOptions = {}): Promise<Hub> {
  const log = options.logger ?? pino({ level: config.logLevel, name: 'outpost' })
  const { servers, credentials } = await resolveUpstream(config)
  const upstream = new Upstream({ servers, credentials })

  const proxy = createProxyServer({
    upstream,
    logger: log,
    maxRequestBodyBytes: options.maxRequestBodyBytes ?? 3 * 1024 * 1024,
  })
  const admin = Fastify({ loggerInstance: log.child({ server: 'admin' }), logController: new LogController({ disableRequestLogging: true }) })
  admin.get('/v1/healthz', async () => 'ok')

  try {
    await proxy.listen({ host: config.bindAddress, port: config.port })
    await admin.listen({ host: '127.0.0.1', port: config.adminPort })
  } catch (error) {
    await Promise.allSettled([proxy.close(), admin.close(), upstream.close()])
    throw error
  }
  const hub: Hub = {
    proxyUrl: urlOf(proxy.server.address() as AddressInfo),
    adminUrl: urlOf(admin.server.address() as AddressInfo),
    upstream,
    log,
    async close() {
      await Promise.allSettled([proxy.close(), admin.close()])
      await upstream.close()
    },
  }
  log.info({ proxy: hub.proxyUrl, admin: hub.adminUrl, servers: servers.map(s => s.origin), node: config.nodeName }, 'outpost serving')
  return hub
}
