// One HTTP/2 link to an apiserver for one identity, as client-go's transport holds it: every request
// and watch a stream on one connection, a second connection only past the server's
// SETTINGS_MAX_CONCURRENT_STREAMS, a PING when the link has been silent, and a GOAWAY drained (the
// streams it carries finish, new ones go to a new connection). Written on node:http2 rather than
// undici's allowH2, which (7.x) destroys the socket on any GOAWAY and never times out a PING.
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2'
import tls, { type ConnectionOptions, type TLSSocket } from 'node:tls'
import { Readable } from 'node:stream'
import type { EventEmitter } from 'node:events'

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants

export interface H2LinkOptions {
  url: URL
  /** the TLS options of this identity now (credentials rotate) */
  tlsOptions: () => ConnectionOptions
  connectTimeoutMs: number
  /** at most this many streams on one connection, even when the server allows more */
  maxStreamsPerConnection: number
  /** silence on a connection after which it is PINGed (client-go: 30 s) */
  readIdleMs: number
  /** a PING not answered within this closes the connection and every stream on it (client-go: 15 s) */
  pingTimeoutMs: number
  /** a connection died without a GOAWAY: its PING went unanswered */
  onDead?: (reason: string) => void
  /** every connection opened, and whether its TLS session was resumed */
  onConnect?: (protocol: 'h2' | 'http/1.1', resumed: boolean) => void
}

export interface LinkRequest {
  method: string
  path: string
  headers: Record<string, string | string[]>
  body?: Buffer
  signal?: (EventEmitter & { aborted: boolean }) | AbortSignal
  /** 0: none */
  headersTimeoutMs: number
  /** longest silence within the body; 0: none (watches) */
  bodyTimeoutMs: number
}

export interface LinkResponse {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: Readable
}

/** The server did not offer h2 in ALPN: the caller speaks HTTP/1.1 to it. */
export class NotH2Error extends Error {
  constructor(url: URL) {
    super(`${url.origin} does not speak HTTP/2`)
    this.name = 'NotH2Error'
  }
}

// hop-by-hop headers HTTP/2 forbids (RFC 9113 8.2.2); host becomes :authority
const connectionHeaders = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host', 'te'])

function coded(message: string, code: string): Error {
  return Object.assign(new Error(message), { code })
}

/** A stream the server never began (REFUSED_STREAM, or a session past its GOAWAY): safe to send again. */
class RefusedStream extends Error {}

/** The connection died before the response: a read is sent again on another, as Go's transport does. */
class LostConnection extends Error {
  readonly code = 'UND_ERR_SOCKET'
}

const idempotent = new Set(['GET', 'HEAD', 'OPTIONS'])

class Connection {
  readonly streams = new Set<ClientHttp2Stream>()
  draining = false
  limit: number
  private lastBytes = 0
  private lastHeard = Date.now()
  private pingSentAt = 0
  private readonly timer: NodeJS.Timeout

  constructor(
    readonly session: ClientHttp2Session,
    private readonly socket: TLSSocket,
    private readonly options: H2LinkOptions,
  ) {
    this.limit = options.maxStreamsPerConnection
    const tick = Math.max(50, Math.min(options.readIdleMs, options.pingTimeoutMs) / 4)
    this.timer = setInterval(() => this.checkLiveness(), tick).unref()
    session.once('close', () => clearInterval(this.timer))
    // before node:http2's own listener, which closes the streams with no error: a consumer waiting for
    // 'end' or 'error' would wait for ever, and one that takes 'close' for the end would take a cut body as whole
    socket.prependListener('close', () => this.cut())
  }

  /** The connection dropped: every stream not yet complete ends with an error. */
  private cut(): void {
    const error = coded(`the connection to ${this.options.url.origin} closed before the response ended`, 'UND_ERR_SOCKET')
    for (const stream of this.streams) if (!stream.closed) stream.destroy(error)
  }

  get usable(): boolean {
    return !this.draining && !this.session.closed && !this.session.destroyed && this.streams.size < this.limit
  }

  /** Bytes read are the sign of life (any frame counts, as in Go's ReadIdleTimeout); silence gets a PING. */
  private checkLiveness(): void {
    const now = Date.now()
    if (this.socket.bytesRead !== this.lastBytes) {
      this.lastBytes = this.socket.bytesRead
      this.lastHeard = now
      this.pingSentAt = 0
      return
    }
    if (this.pingSentAt > 0) {
      if (now - this.pingSentAt < this.options.pingTimeoutMs) return
      const reason = `HTTP/2 PING to ${this.options.url.origin} not answered in ${this.options.pingTimeoutMs} ms`
      this.session.destroy(coded(reason, 'ETIMEDOUT'))
      this.options.onDead?.(reason)
      return
    }
    if (now - this.lastHeard < this.options.readIdleMs || this.session.destroyed) return
    this.pingSentAt = now
    try {
      this.session.ping(() => {}) // the answer shows as bytes read
    } catch {
      // the session is closing: its 'close' ends the timer
    }
  }
}

export class H2Link {
  /** what the server speaks, once a connection said so */
  protocol: 'unknown' | 'h2' | 'http/1.1' = 'unknown'
  private readonly connections: Connection[] = []
  private opening: Promise<void> | undefined
  private tlsSession: Buffer | undefined
  private closed = false

  constructor(private readonly options: H2LinkOptions) {}

  /** How many connections are open (draining ones included). */
  get openConnections(): number {
    return this.connections.length
  }

  async request(req: LinkRequest): Promise<LinkResponse> {
    for (let attempt = 0; ; attempt++) {
      const connection = await this.connection(req.signal)
      try {
        return await this.send(connection, req)
      } catch (error) {
        // a stream the server refused, or a GOAWAY that raced it, was never acted on; a read may be asked again
        const again = error instanceof RefusedStream || (error instanceof LostConnection && idempotent.has(req.method))
        if (!again || attempt >= 2) throw error instanceof RefusedStream ? coded(error.message, 'UND_ERR_SOCKET') : error
      }
    }
  }

  /** A connection with room for a stream: one open, else the one being opened (shared), else a new one. */
  private async connection(signal: LinkRequest['signal']): Promise<Connection> {
    for (;;) {
      if (this.closed) throw coded('the upstream link is closed', 'UND_ERR_CLOSED')
      if (signal?.aborted) throw coded('the request was aborted', 'UND_ERR_ABORTED')
      const usable = this.connections.find(c => c.usable)
      if (usable) return usable
      this.opening ??= this.open().finally(() => (this.opening = undefined))
      // a probe that times out stops waiting; the connection goes on opening for the next one
      await new Promise<void>((resolve, reject) => {
        const undo = onAbort(signal, () => reject(coded('the request was aborted', 'UND_ERR_ABORTED')))
        this.opening!.then(resolve, reject).finally(undo)
      })
    }
  }

  private async open(): Promise<void> {
    const { url } = this.options
    const socket = await this.connectTls()
    const resumed = socket.isSessionReused()
    if (socket.alpnProtocol !== 'h2') {
      socket.destroy()
      this.protocol = 'http/1.1'
      this.options.onConnect?.('http/1.1', resumed)
      throw new NotH2Error(url)
    }
    this.protocol = 'h2'
    const session = http2.connect(url.origin, {
      createConnection: () => socket,
      // Go's transport: 4 MiB a stream before WINDOW_UPDATE, so a WAN's round trip does not throttle a list
      settings: { enablePush: false, initialWindowSize: 4 << 20 },
    })
    session.on('error', () => {}) // its streams carry the error; 'close' follows
    const connection = new Connection(session, socket, this.options)
    try {
      await this.settled(session, socket)
    } catch (error) {
      session.destroy()
      throw error
    }
    // the session's own window (64 KiB by default) would otherwise limit every stream together
    session.setLocalWindowSize(64 << 20)
    const applyLimit = (settings: http2.Settings) => {
      connection.limit = Math.min(this.options.maxStreamsPerConnection, settings.maxConcurrentStreams ?? Infinity)
    }
    applyLimit(session.remoteSettings)
    session.on('remoteSettings', applyLimit)
    session.once('goaway', () => (connection.draining = true))
    session.once('close', () => {
      const at = this.connections.indexOf(connection)
      if (at >= 0) this.connections.splice(at, 1)
    })
    this.connections.push(connection)
    this.options.onConnect?.('h2', resumed)
  }

  private connectTls(): Promise<TLSSocket> {
    const { url, connectTimeoutMs } = this.options
    const host = url.hostname.replace(/^\[|\]$/g, '')
    const port = Number(url.port) || 443
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ host, port, ...this.options.tlsOptions(), ALPNProtocols: ['h2', 'http/1.1'], session: this.tlsSession })
      socket.setKeepAlive(true, 15_000)
      socket.on('session', ticket => (this.tlsSession = ticket))
      const timer = setTimeout(() => socket.destroy(coded(`connect timeout after ${connectTimeoutMs} ms`, 'UND_ERR_CONNECT_TIMEOUT')), connectTimeoutMs)
      const failed = (error: Error) => {
        clearTimeout(timer)
        reject(error)
      }
      socket.once('error', failed)
      socket.once('secureConnect', () => {
        clearTimeout(timer)
        socket.removeListener('error', failed)
        socket.on('error', () => {}) // the session reports it
        resolve(socket)
      })
    })
  }

  /** Resolves once the server's SETTINGS arrived, so its stream limit holds from the first stream. */
  private settled(session: ClientHttp2Session, socket: TLSSocket): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(coded('no HTTP/2 SETTINGS from the server', 'UND_ERR_CONNECT_TIMEOUT')), this.options.connectTimeoutMs)
      const fail = (error: Error) => {
        clearTimeout(timer)
        session.removeListener('remoteSettings', ok)
        reject(error)
      }
      const ok = () => {
        clearTimeout(timer)
        session.removeListener('close', closed)
        resolve()
      }
      const closed = () =>
        fail(coded(`the connection to ${this.options.url.origin} closed before HTTP/2 SETTINGS`, socket.destroyed ? 'ECONNRESET' : 'UND_ERR_SOCKET'))
      session.once('remoteSettings', ok)
      session.once('close', closed)
    })
  }

  private send(connection: Connection, req: LinkRequest): Promise<LinkResponse> {
    if (req.signal?.aborted) return Promise.reject(coded('the request was aborted', 'UND_ERR_ABORTED'))
    const headers: Record<string, string | string[]> = { ':method': req.method, ':path': req.path }
    for (const name in req.headers) {
      const lower = name.toLowerCase()
      if (!connectionHeaders.has(lower)) headers[lower] = req.headers[name]
    }
    let stream: ClientHttp2Stream
    try {
      stream = connection.session.request(headers, { endStream: !req.body })
    } catch (error) {
      return Promise.reject(new RefusedStream(`HTTP/2 stream not opened: ${(error as Error).message}`))
    }
    connection.streams.add(stream)
    if (req.body) stream.end(req.body)

    return new Promise<LinkResponse>((resolve, reject) => {
      let answered = false
      const fail = (error: Error) => {
        if (answered) return
        answered = true
        clearTimeout(timer)
        reject(error)
      }
      const timer =
        req.headersTimeoutMs > 0
          ? setTimeout(() => {
              stream.close(NGHTTP2_CANCEL)
              fail(coded(`no response headers in ${req.headersTimeoutMs} ms`, 'UND_ERR_HEADERS_TIMEOUT'))
            }, req.headersTimeoutMs)
          : undefined
      const undoAbort = onAbort(req.signal, () => {
        stream.close(NGHTTP2_CANCEL)
        fail(coded('the request was aborted', 'UND_ERR_ABORTED'))
      })
      stream.once('close', () => {
        connection.streams.delete(stream)
        this.closeIfSpare(connection)
        undoAbort()
        if (answered) return
        if (stream.rstCode === NGHTTP2_REFUSED_STREAM) fail(new RefusedStream('the server refused the stream'))
        else if (connection.session.destroyed) fail(new LostConnection('the connection closed before the response'))
        else fail(coded('the HTTP/2 stream closed before its response', 'UND_ERR_SOCKET'))
      })
      // on, not once: a stream may report more than one error, and one before its response has no other listener
      stream.on('error', error => {
        if (answered) return
        if (stream.rstCode === NGHTTP2_REFUSED_STREAM) fail(new RefusedStream(error.message))
        else if (connection.session.destroyed) fail(new LostConnection(error.message))
        else fail(brokenStream(error))
      })
      stream.once('response', (head: IncomingHttpHeaders) => {
        if (answered) return
        answered = true
        clearTimeout(timer)
        if (req.bodyTimeoutMs > 0)
          stream.setTimeout(req.bodyTimeoutMs, () => stream.destroy(coded(`body silent for ${req.bodyTimeoutMs} ms`, 'UND_ERR_BODY_TIMEOUT')))
        resolve({ statusCode: Number(head[':status']), headers: plainHeaders(head), body: new StreamBody(stream) })
      })
    })
  }

  /** A connection beyond the first that carries nothing is closed: the first stays, as client-go's does. */
  private closeIfSpare(connection: Connection): void {
    if (connection.streams.size > 0 || this.connections[0] === connection) return
    if (!connection.draining || connection.session.closed) connection.session.close()
  }

  /** New TLS credentials: new streams go to new connections; those open finish what they carry. */
  drain(): void {
    for (const connection of this.connections) {
      connection.draining = true
      if (connection.streams.size === 0) connection.session.close()
    }
    this.tlsSession = undefined
  }

  close(): void {
    this.closed = true
    for (const connection of [...this.connections]) connection.session.destroy()
  }
}

/** Calls `abort` when the signal (an AbortSignal, or undici's EventEmitter kind) fires; returns the undo. */
function onAbort(signal: LinkRequest['signal'], abort: () => void): () => void {
  if (!signal) return () => {}
  if ('addEventListener' in signal) {
    signal.addEventListener('abort', abort, { once: true })
    return () => signal.removeEventListener('abort', abort)
  }
  signal.once('abort', abort)
  return () => signal.removeListener('abort', abort)
}

function brokenStream(error: Error): Error {
  const code = (error as { code?: string }).code
  return code && code !== 'ERR_HTTP2_STREAM_ERROR' ? error : coded(error.message, 'UND_ERR_SOCKET')
}

function plainHeaders(head: IncomingHttpHeaders): Record<string, string | string[] | undefined> {
  const headers: Record<string, string | string[] | undefined> = {}
  for (const [name, value] of Object.entries(head)) if (name[0] !== ':') headers[name] = value
  return headers
}

/**
 * The body handed on: a Readable of its own over the stream, as undici's body is over its socket.
 * Destroying it resets the stream (CANCEL) at once. Handing on the bare stream instead, a follower's
 * shared caches stopped watching after a pool's leader handed over (test/pool-handover.test.ts).
 */
class StreamBody extends Readable {
  constructor(private readonly stream: ClientHttp2Stream) {
    super()
    stream.on('data', chunk => {
      if (!this.push(chunk)) stream.pause()
    })
    stream.once('error', error => this.destroy(error))
    stream.once('end', () => this.push(null))
  }

  override _read(): void {
    this.stream.resume()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // a response read to its end closes by itself: a needless RST_STREAM per request is what a
    // server's rapid-reset guard counts (node:http2's closed the session after about a thousand)
    if (!this.stream.closed && !this.stream.readableEnded) this.stream.close(NGHTTP2_CANCEL)
    callback(error)
  }
}
