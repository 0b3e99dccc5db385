// HTTP/2 over TLS, as kube-apiserver (Go's net/http) speaks it: ALPN offers h2 and http/1.1, h2
// connections go to a node:http2 server (its compatibility API gives the same request handler),
// HTTP/1.1 ones (upgrades: exec, attach, port-forward) to the HTTP/1.1 server as before. Each h2
// connection runs through a stream the simulator can hold, so a blackhole silences it as the NAT
// would (node:http2 reads a TLS socket natively, past pause()).
import http2, { type Http2Server, type ServerHttp2Session } from 'node:http2'
import type { Server as HttpsServer } from 'node:https'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Duplex } from 'node:stream'
import type { TLSSocket } from 'node:tls'

/** the TLS socket under each h2 session, for client certificates */
const sessionSockets = new WeakMap<object, TLSSocket>()

/** The TLS socket a request came on, for h2 requests too (whose `req.socket` is a proxy without certificates). */
export function tlsSocketOf(req: IncomingMessage): TLSSocket {
  const session = (req as unknown as { stream?: { session?: object } }).stream?.session
  return (session && sessionSockets.get(session)) ?? (req.socket as TLSSocket)
}

/** Whether the response goes out on an HTTP/2 stream (no connection-specific headers there). */
export function isHttp2(res: ServerResponse): boolean {
  return 'stream' in res
}

/** A TLS socket passed through JavaScript, so it can be held silent: nothing read, nothing written. */
class HoldableStream extends Duplex {
  private held = false

  constructor(readonly socket: TLSSocket) {
    super()
    socket.on('data', chunk => {
      if (!this.push(chunk)) socket.pause()
    })
    socket.on('end', () => this.push(null))
    socket.on('close', () => this.destroy())
    socket.on('error', () => {})
  }

  override _read(): void {
    if (!this.held) this.socket.resume()
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.held) return // swallowed, and no callback: the session's writes back up as on a dead link
    this.socket.write(chunk, callback)
  }

  override _final(callback: () => void): void {
    this.socket.end()
    callback()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy()
    callback(error)
  }

  hold(): void {
    this.held = true
    this.socket.pause()
  }
}

export interface Http2Options {
  /** SETTINGS_MAX_CONCURRENT_STREAMS (Go's default: 250) */
  maxConcurrentStreams?: number
  /** false: h2 reads its TLS sockets natively (faster; a blackhole cannot silence them) */
  holdable?: boolean
}

/** The h2 side of a simulator: counts connections and streams, holds and drains them on command. */
export class Http2Side {
  private readonly server: Http2Server
  private readonly sessions = new Set<ServerHttp2Session>()
  private readonly streams = new Set<HoldableStream>()
  /** h2 connections accepted since start */
  connectionsAccepted = 0
  /** the most streams one connection carried at once */
  mostConcurrentStreams = 0

  constructor(tlsServer: HttpsServer, handler: (req: IncomingMessage, res: ServerResponse) => void, options: Http2Options) {
    this.server = http2.createServer({ settings: { maxConcurrentStreams: options.maxConcurrentStreams ?? 250 } }, handler as never)
    this.server.on('session', session => {
      this.sessions.add(session)
      session.on('close', () => this.sessions.delete(session))
      session.on('error', () => {})
      let open = 0
      session.on('stream', stream => {
        open++
        this.mostConcurrentStreams = Math.max(this.mostConcurrentStreams, open)
        stream.once('close', () => open--)
      })
    })
    // HTTP/1.1 keeps the https server's own listener; h2 is handed over after the handshake
    const http1 = tlsServer.listeners('secureConnection') as ((socket: TLSSocket) => void)[]
    tlsServer.removeAllListeners('secureConnection')
    tlsServer.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') {
        for (const listener of http1) listener.call(tlsServer, socket)
        return
      }
      this.connectionsAccepted++
      const stream = options.holdable === false ? socket : new HoldableStream(socket)
      if (stream instanceof HoldableStream) {
        this.streams.add(stream)
        stream.once('close', () => this.streams.delete(stream))
      }
      const remember = (session: ServerHttp2Session) => sessionSockets.set(session, socket)
      this.server.once('session', remember) // emitted synchronously, for this connection
      this.server.emit('connection', stream)
      this.server.removeListener('session', remember)
    })
  }

  /** h2 connections open now */
  get openConnections(): number {
    return this.sessions.size
  }

  /** Every h2 connection goes silent (the blackhole). */
  hold(): void {
    for (const stream of this.streams) stream.hold()
  }

  /** GOAWAY on every connection, as an apiserver shutting down (or its --goaway-chance) sends: open streams finish, new ones go elsewhere. */
  goaway(): void {
    for (const session of this.sessions) session.close()
  }
}
