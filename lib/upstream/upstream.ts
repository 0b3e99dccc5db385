// The hub's only way to the apiserver: keep-alive undici pools, one pair per server, tried in
// order with failover on connection-level errors. Knows nothing about caching or filtering.
import type { Pool } from 'undici'
import { undici } from './http1.ts'
import type { Dispatcher } from 'undici'
import type { Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import type { EventEmitter } from 'node:events'
import net from 'node:net'
import tls from 'node:tls'
import type { ConnectionOptions } from 'node:tls'
import type { UpstreamCredentials } from './kubeconfig.ts'
import { hubUserAgent } from '../config.ts'
import { readAll } from './read-all.ts'
import { H2Link, NotH2Error } from './h2-link.ts'

export interface UpstreamRequest {
  method: string
  /** path and query, e.g. /api/v1/pods?watch=true */
  path: string
  headers: Record<string, string | string[]>
  body?: Buffer
  /** emits 'abort' when the client went away; `aborted` says whether it has */
  signal?: EventEmitter & { aborted: boolean }
  /** long-lived responses (watches) must not time out between events */
  longRunning?: boolean
}

export interface UpstreamResponse {
  server: URL
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: Readable
}

/** Every server failed before answering; `causes` says why, one entry per server. */
export class UpstreamUnavailableError extends Error {
  constructor(readonly causes: { server: string; error: string }[]) {
    super(`no apiserver reachable: ${causes.map(c => `${c.server}: ${c.error}`).join('; ')}`)
    this.name = 'UpstreamUnavailableError'
  }
}

export interface UpstreamOptions {
  servers: URL[]
  credentials: UpstreamCredentials
  connectTimeoutMs?: number
  /** how long a server that failed is tried after the others */
  failedServerBackoffMs?: number
  /** headers and body timeout for requests that are not long-running */
  requestTimeoutMs?: number
  /** passive health signals: every answer (ok) and every connection-level failure, per server */
  onResult?: (server: URL, ok: boolean, reason?: string) => void
  /** HTTP/2 where the server offers it (default true); false: HTTP/1.1, a connection per watch */
  http2?: boolean
  /** streams on one HTTP/2 connection at most (default 1000), fewer when the server says so (Go's default: 250) */
  maxStreamsPerConnection?: number
  /** silence on an HTTP/2 connection before a PING (default 30 s), and how long its answer may take (15 s) */
  readIdleMs?: number
  pingTimeoutMs?: number
  /** a link that died silently (its PING unanswered): every stream on it ended */
  onLinkDead?: (server: URL, reason: string) => void
}

/** Connections opened to the apiservers since start, by protocol and whether TLS was resumed. */
export interface ConnectionCounts {
  h2: number
  http1: number
  resumed: number
}

interface ServerState {
  url: URL
  /** the URL's path without its trailing slash, put before every request's path */
  basePath: string
  /**
   * Requests that carry the client's own Authorization go over a pool without the node's client
   * certificate: the apiserver authenticates x509 before bearer tokens, so presenting both would
   * turn the client's identity into the node's.
   */
  nodePool?: Promise<Pool>
  clientPool?: Promise<Pool>
  /** the same two identities over HTTP/2 (https servers only) */
  nodeLink?: H2Link
  clientLink?: H2Link
  failedUntil: number
}

// The request never reached the server: any request may be tried on the next one.
const notSentCodes = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT'])
// The connection broke before a response: the server may have acted, so only reads are retried.
const brokenCodes = new Set(['ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_HEADERS_TIMEOUT'])
const idempotentMethods = new Set(['GET', 'HEAD', 'OPTIONS'])

function errorCodes(error: unknown): string[] {
  const err = error as { code?: string; cause?: { code?: string } }
  return [err?.code, err?.cause?.code].filter((c): c is string => typeof c === 'string')
}

/**
 * A connection refused, cut or silent: the network's doing (an outage, the apiserver restarting),
 * which the health checker announces once, not the apiserver's answer. undici calls a body cut
 * mid-answer "Response does not match the HTTP/1.1 protocol (Invalid EOF state)".
 */
export function connectionLost(error: unknown): boolean {
  if (error instanceof UpstreamUnavailableError || cutMidAnswer(error)) return true
  return errorCodes(error).some(code => notSentCodes.has(code) || brokenCodes.has(code))
}

/** undici's parser on a connection closed inside a chunked body (its code is lost where the error is passed on) */
function cutMidAnswer(error: unknown): boolean {
  const err = error as { code?: string; message?: string }
  return err?.code === 'HPE_INVALID_EOF_STATE' || /\(Invalid EOF state\)/.test(err?.message ?? '')
}

function canTryNextServer(error: unknown, method: string): boolean {
  return errorCodes(error).some(
    code =>
      notSentCodes.has(code) ||
      (brokenCodes.has(code) && idempotentMethods.has(method)) ||
      // TLS verification failures are per server: a misconfigured server must not hide a good one.
      /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL/.test(code),
  )
}

export function describeError(error: unknown): string {
  const err = error as { code?: string; message?: string; cause?: { code?: string; message?: string } }
  const code = err?.code ?? err?.cause?.code
  if (cutMidAnswer(error)) return 'the connection closed in the middle of the answer'
  const message = err?.cause?.message ?? err?.message ?? String(error)
  return code && !message.includes(code) ? `${code}: ${message}` : message
}

export function tlsOptionsFor(url: URL, credentials: UpstreamCredentials, withClientCert: boolean): ConnectionOptions {
  const options: ConnectionOptions = {
    rejectUnauthorized: !credentials.insecureSkipTLSVerify,
    servername: isIpAddress(url.hostname) ? undefined : url.hostname,
  }
  if (credentials.ca) options.ca = credentials.ca
  if (withClientCert && credentials.cert && credentials.key) {
    options.cert = credentials.cert
    options.key = credentials.key
  }
  return options
}

function isIpAddress(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':') || host.startsWith('[')
}

export class Upstream {
  private readonly states: ServerState[]
  private readonly failedServerBackoffMs: number
  private readonly requestTimeoutMs: number
  private credentials: UpstreamCredentials
  readonly connectionCounts: ConnectionCounts = { h2: 0, http1: 0, resumed: 0 }

  constructor(private readonly options: UpstreamOptions) {
    if (options.servers.length === 0) throw new Error('at least one apiserver URL is required')
    this.credentials = options.credentials
    this.failedServerBackoffMs = options.failedServerBackoffMs ?? 10_000
    this.requestTimeoutMs = options.requestTimeoutMs ?? 300_000
    this.states = options.servers.map(url => ({
      url,
      basePath: url.pathname.replace(/\/$/, ''),
      nodeLink: this.createLink(url, true),
      clientLink: this.createLink(url, false),
      failedUntil: 0,
    }))
  }

  private createLink(url: URL, withClientCert: boolean): H2Link | undefined {
    if (url.protocol !== 'https:' || this.options.http2 === false) return undefined
    return new H2Link({
      url,
      tlsOptions: () => tlsOptionsFor(url, this.credentials, withClientCert),
      connectTimeoutMs: this.options.connectTimeoutMs ?? 5_000,
      maxStreamsPerConnection: this.options.maxStreamsPerConnection ?? 1_000,
      readIdleMs: this.options.readIdleMs ?? 30_000,
      pingTimeoutMs: this.options.pingTimeoutMs ?? 15_000,
      onDead: reason => this.options.onLinkDead?.(url, reason),
      onConnect: (protocol, resumed) => {
        this.connectionCounts[protocol === 'h2' ? 'h2' : 'http1']++
        if (resumed) this.connectionCounts.resumed++
      },
    })
  }

  /** HTTP/2 connections open now, over every server and identity. */
  get openH2Connections(): number {
    return this.states.reduce((sum, s) => sum + (s.nodeLink?.openConnections ?? 0) + (s.clientLink?.openConnections ?? 0), 0)
  }

  private connectionOptions(url: URL, withClientCert: boolean) {
    return {
      pipelining: 1,
      connectTimeout: this.options.connectTimeoutMs ?? 5_000,
      keepAliveTimeout: 30_000,
      // Probes start after 15 s of silence (undici's default is 60 s): with libuv ≥ 1.49 (Node 22+)
      // a half-open connection is then found within about 25 s; Node 20 leaves the probe interval
      // to the kernel (75 s × 9), which is why watches also end on silence (lib/watch/pipeline.ts).
      connect: { ...(url.protocol === 'https:' ? tlsOptionsFor(url, this.credentials, withClientCert) : {}), keepAlive: true, keepAliveInitialDelay: 15_000 },
    }
  }

  /** The identity's HTTP/1.1 pool to the server, made on first use (http1.ts). */
  private poolOf(state: ServerState, withClientCert: boolean): Promise<Pool> {
    const make = async () => {
      const { Pool } = await undici()
      const pool = new Pool(state.url.origin, { connections: null, ...this.connectionOptions(state.url, withClientCert) })
      pool.on('connect', () => this.connectionCounts.http1++)
      return pool
    }
    if (withClientCert) return (state.nodePool ??= make())
    return (state.clientPool ??= make())
  }

  /**
   * A long-running request (watch) holds a connection for its whole life, so it gets one of its own,
   * destroyed when the response ends or the client leaves: a pool would keep spare sockets around,
   * and after 200 watches come and go, nothing of them may remain open.
   */
  private async requestOnOwnConnection(url: URL, withClientCert: boolean, options: Dispatcher.RequestOptions) {
    const { Client } = await undici()
    const client = new Client(url.origin, this.connectionOptions(url, withClientCert))
    client.on('connect', () => this.connectionCounts.http1++)
    try {
      const res = await client.request({ ...options, reset: true })
      res.body.once('close', () => void client.destroy())
      return res
    } catch (error) {
      void client.destroy()
      throw error
    }
  }

  get servers(): URL[] {
    return this.states.map(s => s.url)
  }

  /** Servers in the order to try them now: healthy ones in configured order, recently failed ones last. */
  orderedServers(): ServerState[] {
    if (this.states.length === 1) return this.states
    const now = Date.now()
    return [...this.states].sort((a, b) => Number(a.failedUntil > now) - Number(b.failedUntil > now))
  }

  markFailed(url: URL): void {
    const state = this.states.find(s => s.url === url)
    if (state) state.failedUntil = Date.now() + this.failedServerBackoffMs
  }

  get bearerToken(): string | undefined {
    return this.credentials.token
  }

  /**
   * New node credentials (a rotated certificate, a new token): requests from now on use them. The
   * old pools finish what they carry and close; watches have connections of their own and stay open
   * (the apiserver checked the old certificate when they began, as it does for kubelet's).
   */
  setCredentials(credentials: UpstreamCredentials): void {
    this.credentials = credentials
    for (const state of this.states) {
      const old = [state.nodePool, state.clientPool]
      state.nodePool = state.clientPool = undefined
      for (const pool of old) void pool?.then(p => p.close().catch(() => p.destroy()))
      state.nodeLink?.drain()
      state.clientLink?.drain()
    }
  }

  /** Headers for the upstream: the hub's bearer token unless the client brought its own credentials. */
  authorize(headers: Record<string, string | string[]>): { headers: Record<string, string | string[]>; ownCredentials: boolean } {
    if (headers.authorization) return { headers, ownCredentials: true }
    const token = this.credentials.token
    if (!token) return { headers, ownCredentials: false }
    return { headers: { ...headers, authorization: `Bearer ${token}` }, ownCredentials: false }
  }

  async request(req: UpstreamRequest): Promise<UpstreamResponse> {
    const { headers, ownCredentials } = this.authorize(req.headers)
    const causes: { server: string; error: string }[] = []
    for (const state of this.orderedServers()) {
      const options: Dispatcher.RequestOptions = {
        method: req.method as Dispatcher.HttpMethod,
        path: state.basePath + req.path,
        headers,
        body: req.body,
        signal: req.signal,
        headersTimeout: req.longRunning ? 60_000 : this.requestTimeoutMs,
        bodyTimeout: req.longRunning ? 0 : this.requestTimeoutMs,
      }
      try {
        const res = await this.send(state, ownCredentials, options, req.longRunning === true)
        state.failedUntil = 0
        this.options.onResult?.(state.url, true)
        return { server: state.url, statusCode: res.statusCode, headers: res.headers, body: res.body }
      } catch (error) {
        if (req.signal?.aborted) throw error
        state.failedUntil = Date.now() + this.failedServerBackoffMs
        this.options.onResult?.(state.url, false, describeError(error))
        if (!canTryNextServer(error, req.method)) throw error
        causes.push({ server: state.url.origin, error: describeError(error) })
      }
    }
    throw new UpstreamUnavailableError(causes)
  }

  /** Over the identity's HTTP/2 link while the server speaks h2; else HTTP/1.1, a watch on a connection of its own. */
  private async send(state: ServerState, ownCredentials: boolean, options: Dispatcher.RequestOptions, longRunning: boolean) {
    const link = ownCredentials ? state.clientLink : state.nodeLink
    if (link && link.protocol !== 'http/1.1') {
      try {
        return await link.request({
          method: options.method,
          path: options.path,
          headers: options.headers as Record<string, string | string[]>,
          body: options.body as Buffer | undefined,
          signal: options.signal as UpstreamRequest['signal'],
          headersTimeoutMs: options.headersTimeout ?? 0,
          bodyTimeoutMs: options.bodyTimeout ?? 0,
        })
      } catch (error) {
        if (!(error instanceof NotH2Error)) throw error
      }
    }
    if (longRunning) return this.requestOnOwnConnection(state.url, !ownCredentials, options)
    return (await this.poolOf(state, !ownCredentials)).request(options)
  }

  /** A JSON request of the hub's own (the CSR flows), with the node's credentials. */
  async callJson(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown): Promise<{ statusCode: number; body: any }> {
    const res = await this.request({
      method,
      path,
      headers: { 'user-agent': hubUserAgent, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
    })
    const text = (await readAll(res.body)).toString()
    let parsed: unknown
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {
      parsed = { message: text.slice(0, 200) }
    }
    return { statusCode: res.statusCode, body: parsed }
  }

  /** One health probe of one server, with the node's credentials: GET /readyz answered 200 (401 and 403 throw, saying so). */
  async probe(server: URL, signal: AbortSignal): Promise<boolean> {
    const state = this.states.find(s => s.url === server)
    if (!state) return false
    // the node's token too, not only its certificate: a revoked token must show here, not in kubelet's requests
    const { headers } = this.authorize({ 'user-agent': hubUserAgent })
    // over HTTP/2 the probe is a stream on the link everything uses; over HTTP/1.1 (reset) its connection closes after it
    const options = {
      method: 'GET' as const,
      path: `${state.basePath}/readyz`,
      headers,
      signal,
      reset: true,
      headersTimeout: this.requestTimeoutMs,
      bodyTimeout: this.requestTimeoutMs,
    }
    const res = await this.send(state, false, options, false)
    res.body.resume()
    await finished(res.body).catch(() => {})
    // a refusal is not an outage: lib/upstream/health.ts tells the operator to fix the credentials
    if (res.statusCode === 401 || res.statusCode === 403)
      throw new Error(`the apiserver refused the node's credentials: ${res.statusCode} ${res.statusCode === 401 ? 'Unauthorized' : 'Forbidden'} on GET /readyz`)
    return res.statusCode === 200
  }

  /**
   * A raw connection for protocol upgrades (exec, attach, port-forward over SPDY or WebSocket),
   * which the pools cannot carry: the first server that accepts, with the same TLS settings.
   */
  async connectRaw(ownCredentials: boolean): Promise<{ server: URL; socket: net.Socket }> {
    const causes: { server: string; error: string }[] = []
    for (const state of this.orderedServers()) {
      try {
        const socket = await this.openSocket(state.url, !ownCredentials)
        state.failedUntil = 0
        return { server: state.url, socket }
      } catch (error) {
        state.failedUntil = Date.now() + this.failedServerBackoffMs
        causes.push({ server: state.url.origin, error: describeError(error) })
      }
    }
    throw new UpstreamUnavailableError(causes)
  }

  private openSocket(url: URL, withClientCert: boolean): Promise<net.Socket> {
    const secure = url.protocol === 'https:'
    const port = Number(url.port) || (secure ? 443 : 80)
    const host = url.hostname.replace(/^\[|\]$/g, '')
    return new Promise((resolve, reject) => {
      const socket = secure ? tls.connect({ host, port, ...tlsOptionsFor(url, this.credentials, withClientCert) }) : net.connect({ host, port })
      const timer = setTimeout(
        () => socket.destroy(Object.assign(new Error('connect timeout'), { code: 'UND_ERR_CONNECT_TIMEOUT' })),
        this.options.connectTimeoutMs ?? 5_000,
      )
      socket.once(secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer)
        socket.removeListener('error', reject)
        resolve(socket)
      })
      socket.once('error', error => {
        clearTimeout(timer)
        reject(error)
      })
    })
  }

  async close(): Promise<void> {
    for (const s of this.states) for (const link of [s.nodeLink, s.clientLink]) link?.close()
    await Promise.all(this.states.flatMap(s => [s.nodePool, s.clientPool]).map(pool => pool?.then(p => p.destroy())))
  }
}
