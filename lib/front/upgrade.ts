// exec, attach and port-forward upgrade the connection (SPDY/3.1 or WebSocket). The hub does not
// speak those protocols: it replays the request head to the apiserver and splices the sockets.
import { STATUS_CODES } from 'node:http'
import type { IncomingMessage, Server } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { Upstream, describeError } from '../upstream/upstream.ts'
import { serviceUnavailable } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import { isStatus } from '../api/status.ts'
import type { InflightLimiter } from './inflight.ts'
import { impersonationProblem, ownCredentials } from './authn.ts'
import type { Authenticate } from './authn.ts'
import { isFrontProxyIdentity } from './headers.ts'
import { classify } from '../api/requestinfo.ts'
import { upstreamPath } from '../api/paths.ts'

const dropOnReplay = new Set(['host', 'proxy-authorization', 'proxy-connection'])

/** `path`: written from what the hub read of the client's (lib/api/paths.ts), never copied from it. */
function requestHead(req: IncomingMessage, server: URL, path: string, bearer: string | undefined): string {
  const lines = [`${req.method} ${server.pathname.replace(/\/$/, '')}${path} HTTP/1.1`, `Host: ${server.host}`]
  const raw = req.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase()
    if (!dropOnReplay.has(name) && !isFrontProxyIdentity(name)) lines.push(`${raw[i]}: ${raw[i + 1]}`)
  }
  if (bearer) lines.push(`Authorization: Bearer ${bearer}`)
  return lines.join('\r\n') + '\r\n\r\n'
}

function refuse(socket: Duplex, status: Status): void {
  const body = JSON.stringify(status)
  socket.end(
    `HTTP/1.1 ${status.code} ${STATUS_CODES[status.code] ?? status.reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  )
}

/** A port that relays no upgrades (the pool port): each is refused with `status` before anything is read. */
export function refuseUpgrades(server: Server, status: Status): void {
  server.on('upgrade', (_req: IncomingMessage, client: Duplex) => {
    client.on('error', () => client.destroy())
    refuse(client, status)
  })
}

export function attachUpgradeProxy(server: Server, upstream: Upstream, log: Logger, authenticate?: Authenticate, limiter?: InflightLimiter): void {
  server.on('upgrade', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    client.on('error', () => client.destroy())
    const denied = authenticate?.(req) ?? impersonationProblem(req.headers)
    if (denied) return refuse(client, denied)
    const info = classify(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
    if (info.problem) return refuse(client, info.problem)
    const slot = limiter?.admit('long-running', info.component)
    if (slot && isStatus(slot)) return refuse(client, slot)
    if (slot) client.once('close', () => slot.release())
    const own = ownCredentials(req.headers)
    const bearer = own ? undefined : upstream.bearerToken
    upstream.connectRaw(own).then(
      ({ server: target, socket }) => {
        if (client.destroyed) {
          socket.destroy()
          return
        }
        socket.on('error', () => client.destroy())
        client.on('close', () => socket.destroy())
        socket.on('close', () => client.destroy())
        socket.write(requestHead(req, target, upstreamPath(info), bearer))
        if (head.length > 0) socket.write(head)
        socket.pipe(client)
        client.pipe(socket)
        log.debug({ path: req.url, upgrade: req.headers.upgrade }, 'upgrade spliced')
      },
      error => {
        log.warn({ path: req.url, err: describeError(error) }, 'upgrade failed')
        refuse(client, serviceUnavailable(describeError(error)))
      },
    )
  })
}
