// The proxy's HTTP front: fastify owns connections, logging and error shaping; every route hands
// the raw request to the forwarding path, which writes the response itself (it must flush watch
// headers and stream frames, which a reply.send() cannot).
import Fastify, { LogController } from 'fastify'
import type { FastifyError } from 'fastify'
import type { Logger } from 'pino'
import { forward } from './proxy.ts'
import { sendStatus } from './respond.ts'
import type { ProxyOptions } from './proxy.ts'
import { attachUpgradeProxy } from './upgrade.ts'
import { failure } from './status.ts'

export interface ProxyServerOptions extends Omit<ProxyOptions, 'log'> {
  logger: Logger
}

const allMethods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

export function createProxyServer(options: ProxyServerOptions) {
  const proxyOptions: ProxyOptions = { ...options, log: options.logger }
  const app = Fastify({
    loggerInstance: options.logger,
    // one debug line per request comes from forward(), with what fastify cannot know (component, verb)
    logController: new LogController({ disableRequestLogging: true }),
    // watches are long-lived; the apiserver bounds them itself with timeoutSeconds
    requestTimeout: 0,
    connectionTimeout: 0,
    keepAliveTimeout: 65_000,
    forceCloseConnections: true,
    routerOptions: { maxParamLength: 8192 },
    return503OnClosing: true,
    exposeHeadRoutes: false,
    // Bytes that are not HTTP at all: a Status, like every other error, then the connection closes.
    clientErrorHandler: (error, socket) => {
      const body = JSON.stringify(failure(400, `malformed HTTP request: ${error.message}`))
      if (socket.writable) {
        socket.end(
          `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
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
      void forward(request.raw, reply.raw, proxyOptions)
    },
  })
  // The forwarding path reads the raw body itself, whatever its type.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_request, _payload, done) => done(null))

  app.route({
    method: allMethods,
    url: '/*',
    handler: (request, reply) => {
      reply.hijack()
      return forward(request.raw, reply.raw, proxyOptions)
    },
  })
  app.setNotFoundHandler((request, reply) => {
    reply.hijack()
    return forward(request.raw, reply.raw, proxyOptions)
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
  attachUpgradeProxy(app.server, options.upstream, options.logger)
  return app
}
