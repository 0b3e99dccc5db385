// The hub's only way to the apiserver: keep-alive undici pools, one pair per server, tried in
// order with failover on connection-level errors. Knows nothing about caching or filtering.
import { Client, Pool } from 'undici'
import type { Dispatcher } from 'undici'
import type { Readable } from 'node:stream'
import type { EventEmitter } from 'node:events'
import net from 'node:net'
import tls from 'node:tls'
import type { ConnectionOptions } from 'node:tls'
import type { UpstreamCredentials } from './kubeconfig.ts'
import { hubUserAgent } from '../config.ts'
import { readAll } from './read-all.ts'

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
  nodePool: Pool
  clientPool: Pool
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

  constructor(private readonly options: UpstreamOptions) {
    if (options.servers.length === 0) throw new Error('at least one apiserver URL is required')
    this.credentials = options.credentials
    this.failedServerBackoffMs = options.failedServerBackoffMs ?? 10_000
    this.requestTimeoutMs = options.requestTimeoutMs ?? 300_000
    this.states = options.servers.map(url => ({
      url,
      basePath: url.pathname.replace(/\/$/, ''),
      nodePool: this.createPool(url, true),
      clientPool: this.createPool(url, false),
      failedUntil: 0,
    }))
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

  private createPool(url: URL, withClientCert: boolean): Pool {
    return new Pool(url.origin, { connections: null, ...this.connectionOptions(url, withClientCert) })
  }

  /**
   * A long-running request (watch) holds a connection for its whole life, so it gets one of its own,
   * destroyed when the response ends or the client leaves: a pool would keep spare sockets around,
   * and after 200 watches come and go, nothing of them may remain open.
   */
  private async requestOnOwnConnection(url: URL, withClientCert: boolean, options: Dispatcher.RequestOptions) {
    const client = new Client(url.origin, this.connectionOptions(url, withClientCert))
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
      state.nodePool = this.createPool(state.url, true)
      state.clientPool = this.createPool(state.url, false)
      for (const pool of old) void pool.close().catch(() => pool.destroy())
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
      const pool = ownCredentials ? state.clientPool : state.nodePool
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
        const res = req.longRunning ? await this.requestOnOwnConnection(state.url, !ownCredentials, options) : await pool.request(options)
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
    // reset: the probe's connection closes after it, so probing never holds sockets open
    // the node's token too, not only its certificate: a revoked token must show here, not in kubelet's requests
    const { headers } = this.authorize({ 'user-agent': hubUserAgent })
    const res = await state.nodePool.request({ method: 'GET', path: `${state.basePath}/readyz`, headers, signal, reset: true })
    await res.body.dump()
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
    await Promise.all(this.states.flatMap(s => [s.nodePool.destroy(), s.clientPool.destroy()]))
  }
}
