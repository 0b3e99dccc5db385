// The pool port: where the other hubs of this node's pool list and watch the pool-wide resources
// from this hub's shared watch caches while it leads (lib/pool/). It trusts a peer with nothing but
// reads of what every node of the pool reads alike: only node client certificates of the cluster's
// client CA, only GET list and watch of the pool-wide resources, answered from memory, unfiltered,
// with the apiserver's resourceVersions and BOOKMARKs. Nothing is relayed to the apiserver from
// here (no route to it, no upgrades), so a peer can never use this hub's credentials.
import type { AddressInfo } from 'node:net'
import type { IncomingMessage } from 'node:http'
import type { Server as TlsServer, TLSSocket } from 'node:tls'
import type { Logger } from 'pino'
import { classify, qualifiedResource } from '../api/requestinfo.ts'
import { failure, serviceUnavailable } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import type { Authenticate } from './authn.ts'
import { createProxyServer, listenAs } from './server.ts'
import type { ProxyServerOptions } from './server.ts'
import { Router } from './router.ts'
import type { RouterOptions } from './router.ts'
import type { Answerer } from './answerer.ts'
import { resourceId } from '../watch/watch-caches.ts'

const nodeUser = /^system:node:[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/

/** The verified client certificate's user and groups, as the apiserver's x509 authenticator reads them. */
function certificateUser(req: IncomingMessage): { user: string; groups: string[] } | undefined {
  const socket = req.socket as TLSSocket
  if (!socket.authorized || typeof socket.getPeerCertificate !== 'function') return undefined
  const subject = socket.getPeerCertificate()?.subject
  if (!subject) return undefined
  const cn = subject.CN
  const o = subject.O
  return { user: (Array.isArray(cn) ? cn[0] : cn) ?? '', groups: o === undefined ? [] : Array.isArray(o) ? o : [o] }
}

export interface PoolAccessOptions {
  /** the pool-wide resources as `group/version/resource` */
  resources: ReadonlySet<string>
  /** whether this hub leads its pool now */
  isLeading(): boolean
  pool(): string
}

/**
 * Who may use the pool port, and for what: 401 without a node certificate of the client CA (a token
 * is never taken: it would have to be relayed to be checked), 403 for a certificate that is not a
 * node's or anything but a list or watch of a pool-wide resource, 503 while this hub does not lead.
 */
export function poolAccess(options: PoolAccessOptions): Authenticate {
  return req => {
    if (req.headers.authorization !== undefined)
      return failure(401, 'Unauthorized: the pool port takes node client certificates only, never tokens', 'Unauthorized')
    const peer = certificateUser(req)
    if (!peer) {
      const why = (req.socket as TLSSocket).authorizationError
      return failure(
        401,
        `Unauthorized: the pool port needs a node client certificate of the cluster's client CA${why ? ` (${String(why)})` : ''}`,
        'Unauthorized',
      )
    }
    if (!peer.groups.includes('system:nodes') || !nodeUser.test(peer.user))
      return forbidden(peer.user, 'the pool port serves nodes only (group system:nodes, user system:node:<name>)')
    const info = classify(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
    const readable =
      req.method === 'GET' &&
      (info.verb === 'list' || info.verb === 'watch') &&
      info.subresource === '' &&
      options.resources.has(resourceId(info.apiGroup, info.apiVersion, info.resource))
    if (!readable)
      return forbidden(
        peer.user,
        `the pool port serves list and watch of ${[...options.resources].join(', ')} only, not ${info.verb} ${qualifiedResource(info) || info.path}`,
      )
    if (!options.isLeading()) return serviceUnavailable(`this hub does not lead pool ${options.pool()} now: its Lease names the leader`)
    return undefined
  }
}

function forbidden(user: string, why: string): Status {
  return failure(403, `forbidden: User "${user}" cannot use this: ${why}`, 'Forbidden')
}

export interface PoolPort {
  /** the port it listens on (what the Lease publishes) */
  port: number
  close(): Promise<void>
}

export interface PoolPortOptions {
  host: string
  port: number
  /** the pinned serving certificate and key; the CA node client certificates must verify against */
  tls: { cert: string; key: string; clientCa: Buffer }
  access: PoolAccessOptions
  /** the shared watch caches' answerer: the only route */
  watchCaches: Answerer
  /** what a watch cache's plan is made from: which requests it serves, whether the cloud is up */
  sources: Pick<RouterOptions['sources'], 'cloud' | 'watchCaches'>
  log: Logger
  observer?: RouterOptions['observer']
  limits: Pick<ProxyServerOptions, 'headerTimeoutMs' | 'idleTimeoutMs'>
  /** a follower needs one connection per pool-wide watch (about 8); past this, a peer's new connections are closed */
  maxConnectionsPerPeer?: number
}

/**
 * One node certificate holds at most `max` connections: a compromised node cannot open the leader's
 * sockets, memory and watches without bound. Counted by the certificate's subject, at the handshake.
 */
function limitConnectionsPerPeer(server: TlsServer, max: number, log: Logger): void {
  const open = new Map<string, number>()
  server.on('secureConnection', (socket: TLSSocket) => {
    if (!socket.authorized) return
    const cn = socket.getPeerCertificate()?.subject?.CN
    const peer = (Array.isArray(cn) ? cn[0] : cn) ?? ''
    const count = (open.get(peer) ?? 0) + 1
    if (count > max) {
      log.warn({ peer, max }, 'pool port: a peer past its connections; closed')
      socket.destroy()
      return
    }
    open.set(peer, count)
    socket.once('close', () => {
      const left = (open.get(peer) ?? 1) - 1
      if (left === 0) open.delete(peer)
      else open.set(peer, left)
    })
  })
}

export async function startPoolPort(options: PoolPortOptions): Promise<PoolPort> {
  const log = options.log.child({ server: 'pool' })
  const router = new Router({
    answerers: { 'watch-cache': options.watchCaches },
    // never filtered (a follower keeps what the apiserver said) and never recorded per component
    sources: { ...options.sources, caching: undefined, filters: { forRequest: () => undefined } },
    log,
    observer: options.observer,
    body: { maxBytes: 0, idleMs: options.limits.headerTimeoutMs },
  })
  const routed = router.handlerFor({ authenticate: poolAccess(options.access), log })
  const server = createProxyServer({
    ...options.limits,
    // whoever has no node certificate gets the one 401 and the connection ends: nobody holds sockets here for free
    handle: (req, res) => {
      if (!(req.socket as TLSSocket).authorized) res.shouldKeepAlive = false
      return routed(req, res)
    },
    logger: log,
    https: { cert: Buffer.from(options.tls.cert), key: Buffer.from(options.tls.key), clientCa: options.tls.clientCa },
  })
  limitConnectionsPerPeer(server.server as unknown as TlsServer, options.maxConnectionsPerPeer ?? 64, log)
  await listenAs(server, { host: options.host, port: options.port, flag: '--pool-port', hostFlag: '--pool-bind-address' })
  const port = (server.server.address() as AddressInfo).port
  log.info({ host: options.host, port }, 'pool port serving (it answers while this hub leads its pool)')
  return { port, close: () => server.close() }
}
