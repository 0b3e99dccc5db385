// The hub's ports, wired: the plain proxy port, the admin port and (unless off) the HTTPS port,
// each listening before its closer is registered.
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import type { HubConfig } from '../config.ts'
import { createProxyServer, listenAs } from '../front/server.ts'
import { startSecurePort } from '../front/secure-port.ts'
import type { SecurePort } from '../front/secure-port.ts'
import { createAdminServer } from '../observe/admin.ts'
import type { AdminOptions } from '../observe/admin.ts'
import type { CredentialTiming, Cloud } from './cloud.ts'
import type { Answering } from './answering.ts'
import type { Lifecycle } from './lifecycle.ts'

export interface Servers {
  proxyUrl: string
  adminUrl: string
  /** https://… once the HTTPS port listens; undefined when it is off */
  secureUrl: Promise<string> | undefined
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return `http://${host}:${address.port}`
}

export interface ServerInputs {
  config: HubConfig
  log: Logger
  cloud: Cloud
  answering: Answering
  /** the link-local address pods reach the hub on, when it holds it */
  podAddress: string | undefined
  /** what the admin port reads; `pending` (the HTTPS port's certificate) is this module's */
  admin: Omit<AdminOptions, 'pending' | 'log'>
  timing?: CredentialTiming
}

export async function openServers(inputs: ServerInputs, lifecycle: Lifecycle): Promise<Servers> {
  const { config, log, cloud, answering } = inputs
  const { router, limiter } = answering
  const limits = { headerTimeoutMs: config.headerTimeoutMs, idleTimeoutMs: config.idleTimeoutMs }
  let secure: SecurePort | undefined
  const proxy = createProxyServer({ ...limits, handle: router.handlerFor(), upgrades: { upstream: cloud.upstream, limiter }, logger: log })
  const admin = createAdminServer({ ...inputs.admin, log, pending: () => secure?.pending() ?? '' })
  await listenAs(proxy, { host: config.bindAddress, port: config.port, flag: '--port', hostFlag: '--bind-address' })
  lifecycle.defer('proxy port', () => proxy.close())
  await listenAs(admin, { host: config.adminAddress, port: config.adminPort, flag: '--admin-port', hostFlag: '--admin-address' })
  lifecycle.defer('admin port', () => admin.close())
  if (config.securePort !== null) {
    secure = await startSecurePort(config, log, { router, upstream: cloud.upstream, limits, podAddress: inputs.podAddress, limiter }, cloud.api, inputs.timing)
    lifecycle.defer('HTTPS port', () => secure?.close())
  }
  return {
    proxyUrl: urlOf(proxy.server.address() as AddressInfo),
    adminUrl: urlOf(admin.server.address() as AddressInfo),
    secureUrl: secure?.url,
  }
}
