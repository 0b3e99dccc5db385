// The HTTPS proxy port: the same proxy as the plain port, behind TLS and authentication
// (lib/front/authn.ts), with a serving certificate from lib/certificates/serving.ts swapped in when renewed.
import { readFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import type { HubConfig } from '../config.ts'
import { createProxyServer, tlsContextOptions } from './server.ts'
import type { ProxyServerOptions } from './server.ts'
import type { Router } from './router.ts'
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
  front: { router: Router; upstream: Upstream; limits: Pick<ProxyServerOptions, 'headerTimeoutMs' | 'idleTimeoutMs'> },
  api: ApiCaller,
  timing: { reloadIntervalMs?: number; csrPollIntervalMs?: number } = {},
): Promise<SecurePort> {
  const clientCa = config.clientCaFile ? await readCaBundle('--client-ca-file', config.clientCaFile) : undefined
  const certificates = new ServingCertificates({ config, log, api, ...timing })
  let server: ReturnType<typeof createProxyServer> | undefined
  let closed = false

  const listen = async (): Promise<string> => {
    const material = await certificates.first()
    if (closed) throw new Error('hub stopped before the HTTPS port started')
    const https = { cert: material.cert, key: material.key, clientCa }
    const logger = log.child({ server: 'https' })
    const authenticate = secureAuthentication(clientCa !== undefined)
    server = createProxyServer({
      ...front.limits,
      handle: front.router.handlerFor({ authenticate, log: logger }),
      upgrades: { upstream: front.upstream, authenticate },
      logger,
      https,
    })
    await server.listen({ host: config.secureBindAddress, port: config.securePort ?? 0 })
    const address = server.server.address() as AddressInfo
    const url = `https://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
    certificates.start(next =>
      (server!.server as unknown as import('node:tls').Server).setSecureContext(tlsContextOptions({ ...https, cert: next.cert, key: next.key })),
    )
    log.info(
      {
        url,
        certificate: certificates.source,
        subject: material.info.subject,
        notAfter: material.info.notAfter.toISOString(),
        clientCa: config.clientCaFile ?? null,
      },
      'HTTPS port serving',
    )
    return url
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
      await server?.close()
    },
  }
}
