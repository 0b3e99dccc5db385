// The proxy's HTTP front: fastify owns connections, logging and error shaping; every route hands
// the raw request to the router (router.ts), whose answerers write the response themselves (they
// must flush watch headers and stream frames, which a reply.send() cannot).
import Fastify, { LogController } from 'fastify'
import type { FastifyError } from 'fastify'
import type { Logger } from 'pino'
import { sendStatus } from './respond.ts'
import { attachUpgradeProxy, refuseUpgrades } from './upgrade.ts'
import type { InflightLimiter } from './inflight.ts'
import type { Handler } from './router.ts'
import type { Authenticate } from './authn.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { failure } from '../api/status.ts'

export interface ProxyServerOptions {
  /** every HTTP request of this port (Router.handlerFor) */
  handle: Handler
  /** exec, attach, port-forward: upgraded connections go straight to the apiserver; without, every upgrade is refused (403) */
  upgrades?: { upstream: Upstream; authenticate?: Authenticate; limiter?: InflightLimiter }
  logger: Logger
  /** serve TLS (1.2+): the serving certificate, and the CA client certificates are checked against */
  https?: { cert: Buffer; key: Buffer; clientCa?: Buffer }
  /** request headers must arrive within this; a keep-alive connection idles at most idleTimeoutMs */
  headerTimeoutMs: number
  idleTimeoutMs: number
}

/** TLS options of the HTTPS port; also what setSecureContext takes when the certificate is renewed. */
export function tlsContextOptions(https: NonNullable<ProxyServerOptions['https']>) {
  return { cert: https.cert, key: https.key, ca: https.clientCa, minVersion: 'TLSv1.2' as const }
}

const allMethods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

export function createProxyServer(options: ProxyServerOptions) {
  const { handle } = options
  const serverOptions = {
    headersTimeout: options.headerTimeoutMs,
    // how often Node looks for connections past headersTimeout (its default, 30 s, would let a
    // slow client hold a socket that long whatever the timeout says)
    connectionsCheckingInterval: Math.min(1000, options.headerTimeoutMs),
  }
  const app = Fastify({
    loggerInstance: options.logger,
    ...(options.https
      ? {
          // a client certificate is asked for, never required: tokens work without one
          https: {
            ...serverOptions,
            ...tlsContextOptions(options.https),
            requestCert: options.https.clientCa !== undefined,
            rejectUnauthorized: false,
            // headersTimeout only starts once TLS is up: without this, a client that opens the
            // connection and never finishes the handshake holds it for Node's default 120 s
            handshakeTimeout: options.headerTimeoutMs,
          },
        }
      : { http: serverOptions }),
    // one debug line per request comes from the router, with what fastify cannot know (component, verb)
    logController: new LogController({ disableRequestLogging: true }),
    // watches are long-lived; the apiserver bounds them itself with timeoutSeconds
    requestTimeout: 0,
    connectionTimeout: 0,
    keepAliveTimeout: options.idleTimeoutMs,
    forceCloseConnections: true,
    routerOptions: { maxParamLength: 8192 },
    return503OnClosing: true,
    exposeHeadRoutes: false,
    // Bytes that are not HTTP at all: a Status, like every other error, then the connection closes.
    clientErrorHandler: (error: NodeJS.ErrnoException, socket) => {
      // A TLS handshake that failed or timed out (Node hands tlsClientError on as clientError) has
      // no channel to answer on: an HTTP answer written into it never flushes, so destroySoon()
      // would wait forever and the socket would stay open for as long as the client likes.
      if (/^ERR_(SSL|TLS)_/.test(error.code ?? '')) {
        socket.destroy()
        return
      }
      const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      const status = timedOut
        ? failure(408, `request headers not received within ${options.headerTimeoutMs} ms`, 'Timeout')
        : failure(400, `malformed HTTP request: ${error.message}`)
      const body = JSON.stringify(status)
      if (socket.writable) {
        socket.end(
          `HTTP/1.1 ${timedOut ? '408 Request Timeout' : '400 Bad Request'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        )
      }
      socket.destroySoon?.()
    },
    // A path fastify cannot decode is still the apiserver's to judge: pass it through.
    frameworkErrors: (error, request, reply) => {
      if (error.code !== 'FST_ERR_BAD_URL') {
        reply.hijack()
        sendStatus(reply.raw, failure(400, error.message))
        return
      }
      reply.hijack()
      void handle(request.raw, reply.raw)
    },
  })
  // The router reads the raw body itself, whatever its type.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_request, _payload, done) => done(null))

  app.route({
    method: allMethods,
    url: '/*',
    handler: (request, reply) => {
      reply.hijack()
      return handle(request.raw, reply.raw)
    },
  })
  app.setNotFoundHandler((request, reply) => {
    reply.hijack()
    return handle(request.raw, reply.raw)
  })
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const code = error.statusCode && error.statusCode >= 400 ? error.statusCode : 500
    request.log.warn({ err: error.message, path: request.url }, 'request failed')
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy()
      return
    }
    reply.hijack()
    sendStatus(reply.raw, failure(code, error.message))
  })
  if (options.upgrades) attachUpgradeProxy(app.server, options.upgrades.upstream, options.logger, options.upgrades.authenticate, options.upgrades.limiter)
  else refuseUpgrades(app.server, failure(403, 'this port relays no upgraded connections (exec, attach, port-forward, websocket watches)', 'Forbidden'))
  return app
}

/** A port the hub cannot listen on, told by the flag that chose it: the hub does not start. */
export class PortUnusableError extends Error {
  constructor(
    readonly flag: string,
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'PortUnusableError'
  }
}

export interface ListenTarget {
  host: string
  port: number
  /** the flag that chose the port: --port, --admin-port, --secure-port, --pool-port */
  flag: string
  /** the flag that chose the address: --bind-address, --admin-address, ... */
  hostFlag: string
}

/**
 * listen(), with the kernel's refusal said in the operator's terms: which flag, and what to do.
 * An address in use is most often another outpost (a second systemd unit beside the static pod, a
 * demo left running), so it says so.
 */
export async function listenAs(server: { listen(options: { host: string; port: number }): Promise<unknown> }, target: ListenTarget): Promise<void> {
  try {
    await server.listen({ host: target.host, port: target.port })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? ''
    const { flag, hostFlag, host, port } = target
    const where = `${host.includes(':') ? `[${host}]` : host}:${port}`
    if (code === 'EADDRINUSE')
      throw new PortUnusableError(
        flag,
        code,
        `${flag} ${port}: ${where} is already in use (EADDRINUSE), perhaps by another outpost on this node (ss -ltnp 'sport = :${port}' names the process); stop it, or give ${flag} another port`,
      )
    if (code === 'EACCES')
      throw new PortUnusableError(
        flag,
        code,
        `${flag} ${port}: not allowed to listen on ${where} (EACCES: ports below 1024 need root or CAP_NET_BIND_SERVICE); give ${flag} another port`,
      )
    if (code === 'EADDRNOTAVAIL')
      throw new PortUnusableError(flag, code, `${hostFlag} ${host}: not an address of this host (EADDRNOTAVAIL), so ${flag} ${port} cannot listen there`)
    throw error
  }
}
