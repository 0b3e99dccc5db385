// The HTTPS proxy port: the same proxy as the plain port, behind TLS and authentication
// (lib/front/authn.ts), with a serving certificate from lib/certificates/serving.ts swapped in when renewed.
import { readFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import type { HubConfig } from '../config.ts'
import { createProxyServer, listenAs, tlsContextOptions } from './server.ts'
import type { ProxyServerOptions } from './server.ts'
import type { Router } from './router.ts'
import type { InflightLimiter } from './inflight.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { secureAuthentication } from './authn.ts'
import { ServingCertificates } from '../certificates/serving.ts'
import type { ApiCaller } from '../../certs/signing-request.ts'

export interface SecurePort {
  /** https://<address>:<port> once listening; with a certificate to wait for (csr), later */
  url: Promise<string>
  /** what it waits for, for /v1/readyz; '' when nothing */
  pending(): string
  close(): Promise<void>
}

/** A CA bundle a port checks client certificates with; what is wrong with it names the flag that gave it. */
export async function readCaBundle(flag: string, file: string): Promise<Buffer> {
  let bundle: Buffer
  try {
    bundle = await readFile(file)
  } catch (error) {
    throw new Error(`${flag} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
  if (!bundle.toString('latin1').includes('-----BEGIN CERTIFICATE-----')) throw new Error(`${flag} ${file} holds no PEM certificate`)
  return bundle
}

export async function startSecurePort(
  config: HubConfig,
  log: Logger,
  front: {
    router: Router
    upstream: Upstream
    limits: Pick<ProxyServerOptions, 'headerTimeoutMs' | 'idleTimeoutMs'>
    /** the link-local address pods reach the hub on, when it holds it: listened on besides --secure-bind-address */
    podAddress?: string
    /** requests served at once, shared with the plain port */
    limiter?: InflightLimiter
  },
  api: ApiCaller,
  timing: { reloadIntervalMs?: number; csrPollIntervalMs?: number } = {},
): Promise<SecurePort> {
  const clientCa = config.clientCaFile ? await readCaBundle('--client-ca-file', config.clientCaFile) : undefined
  const certificates = new ServingCertificates({ config, log, api, ...timing })
  const servers: ReturnType<typeof createProxyServer>[] = []
  let closed = false
  const hosts = [config.secureBindAddress]
  // an unspecified bind address listens on the pod address already
  if (front.podAddress && !['0.0.0.0', '::', front.podAddress].includes(config.secureBindAddress)) hosts.push(front.podAddress)

  const listen = async (): Promise<string> => {
    const material = await certificates.first()
    if (closed) throw new Error('hub stopped before the HTTPS port started')
    const https = { cert: material.cert, key: material.key, clientCa }
    const logger = log.child({ server: 'https' })
    const authenticate = secureAuthentication(clientCa !== undefined)
    const urls: string[] = []
    let port = config.securePort ?? 0
    for (const host of hosts) {
      const server = createProxyServer({
        ...front.limits,
        handle: front.router.handlerFor({ authenticate, log: logger }),
        upgrades: { upstream: front.upstream, authenticate, limiter: front.limiter },
        logger,
        https,
      })
      // the pod address gets the port the first listener got, so pods are told one port
      try {
        await listenAs(server, { host, port, flag: '--secure-port', hostFlag: host === config.secureBindAddress ? '--secure-bind-address' : '--pod-address' })
      } catch (error) {
        await server.close()
        if (host === config.secureBindAddress) throw error
        // the node's own clients keep the port; the pod address's trouble shows in the log
        log.error({ host, port, err: (error as Error).message }, 'HTTPS port cannot listen on the pod address')
        continue
      }
      servers.push(server)
      const address = server.server.address() as AddressInfo
      port = address.port
      urls.push(`https://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`)
    }
    certificates.start(next => {
      for (const server of servers)
        (server.server as unknown as import('node:tls').Server).setSecureContext(tlsContextOptions({ ...https, cert: next.cert, key: next.key }))
    })
    log.info(
      {
        url: urls[0],
        ...(urls.length > 1 ? { podUrl: urls[1] } : {}),
        certificate: certificates.source,
        subject: material.info.subject,
        notAfter: material.info.notAfter.toISOString(),
        clientCa: config.clientCaFile ?? null,
      },
      'HTTPS port serving',
    )
    return urls[0]
  }

  // A certificate the cluster must issue may take an operator's approval: the hub serves meanwhile.
  const url = listen()
  if (certificates.source !== 'csr') await url
  else url.catch(error => log.error({ err: (error as Error).message }, 'HTTPS port not started'))
  return {
    url,
    pending: () => certificates.pending,
    async close() {
      closed = true
      certificates.stop()
      await Promise.allSettled(servers.map(server => server.close()))
    },
  }
}
