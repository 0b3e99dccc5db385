// ApiServerSimulator: the stand-in for kube-apiserver used by the hub's integration tests and the
// demo. Plain node:http / node:https on 127.0.0.1, faults on command (refuse, hang, reset,
// blackhole), a request log, WebSocket and SPDY-style upgrades echoed back, CSRs approved and signed.

import { once } from 'node:events'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import https from 'node:https'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'
import type { TLSSocket } from 'node:tls'
import { parseAllDocuments } from 'yaml'
import { WebSocketServer } from 'ws'
import { clockSkewAllowanceMs, createCertificateAuthority, type CertificateAndKey } from '../../certs/authority.ts'
import { apiserverRequestInfo } from '../../lib/api/requestinfo.ts'
import { failure } from '../../lib/api/status.ts'
import { anonymous, identify, isPublic, type AuthConfig, type Identity } from './auth.ts'
import { Cluster } from './cluster.ts'
import { csrStrategy } from './csr.ts'
import { discovery, versionInfo } from './discovery.ts'
import { ApiError, noSuchResource } from './errors.ts'
import { Blackhole, gateConnections, resetSocket, type Fault } from './faults.ts'
import { errorStatus, handleResource, sendJSON, sendStatus, baseHeaders } from './handlers.ts'
import { openapiDocument, openapiIndex } from './openapi.ts'
import { negotiate, notAcceptableMessage } from './render.ts'
import { ResourceRegistry, type ResourceEntry, type ResourceType } from './resources.ts'
import { CsrController, type AutoApprove } from './signer.ts'
import { Store, type StoreBackup } from './store.ts'
import { countMatching, logEntry, type LoggedRequest, type RequestFilter } from './requestlog.ts'
import { echoUpgrade } from './upgrade.ts'
import { HugeLists } from './huge-list.ts'
import type { WatchStream } from './watch.ts'
import { Http2Side, type Http2Options } from './h2.ts'

export interface SimulatorOptions {
  /** https when given; with ca + requestCert, client certificates are verified (a valid one authenticates) */
  tls?: { key: string | Buffer; cert: string | Buffer; ca?: string | Buffer; requestCert?: boolean }
  /** when set, requests must carry `Authorization: Bearer <one of these>` (or a verified client cert), else 401 */
  tokens?: string[]
  /** watch events kept for replay (default 1000); older resourceVersions answer 410 Expired */
  eventWindow?: number
  /** BOOKMARK period for watches with allowWatchBookmarks=true (default 5000 ms) */
  bookmarkIntervalMs?: number
  /** default 0 (random); the host is always 127.0.0.1 */
  port?: number
  /** the CA approved CSRs are signed with (ECDSA P-256, PKCS#8 key); generated when not given */
  signerCa?: CertificateAndKey
  /** approve CSRs on creation (all, or those the function accepts), like kube-controller-manager's csrapproving */
  autoApproveCsr?: AutoApprove
  /** serve WatchList (sendInitialEvents), as kube-apiserver >= 1.32 does by default (default true); false: v1.24's 422 for it */
  watchList?: boolean
  /** with tls: HTTP/2 offered in ALPN, as kube-apiserver does (default on); false: HTTP/1.1 only */
  http2?: false | Http2Options
}

export type { Fault, LoggedRequest, RequestFilter }

const noop = () => {}
const maxLoggedRequests = 10_000

/** The objects of a multi-document YAML text; a document that does not parse is an error. */
function parseObjects(text: string): any[] {
  return parseAllDocuments(text).map(doc => {
    if (doc.errors.length > 0) throw new Error(`simulator: bad YAML: ${doc.errors[0].message}`)
    return doc.toJS()
  })
}

export class ApiServerSimulator {
  readonly requests: LoggedRequest[] = []
  /** lists answered with a generated body far bigger than memory (huge-list.ts) */
  readonly hugeLists = new HugeLists()
  readonly registry = new ResourceRegistry()
  readonly store: Store
  readonly cluster: Cluster
  private readonly server: http.Server
  /** HTTP/2 connections (https with http2 on) */
  readonly http2: Http2Side | undefined
  private readonly wss = new WebSocketServer({ noServer: true })
  private readonly sockets = new Set<Socket>()
  /** https: the TLS sockets over `sockets`, where the HTTP server reads, writes and times out */
  private readonly tlsSockets = new Set<TLSSocket>()
  private readonly blackhole = new Blackhole()
  private readonly watches = new Set<WatchStream>()
  private hung: { req: IncomingMessage; res: ServerResponse }[] = []
  private fault: Fault = 'none'
  private listening = false
  private closed = false
  private boundPort = 0
  private closedSocketBytes = 0
  private readonly auth: AuthConfig
  private readonly csr: CsrController

  private constructor(
    private readonly options: SimulatorOptions,
    signerCa: CertificateAndKey,
  ) {
    this.store = new Store(options.eventWindow ?? 1000)
    this.cluster = new Cluster(this.registry, this.store)
    this.cluster.setStrategy(this.entryFor('certificates.k8s.io/v1', 'CertificateSigningRequest').storageKey, csrStrategy)
    this.csr = new CsrController(this.cluster, signerCa, options.autoApproveCsr ?? false)
    this.auth = { tokens: options.tokens, required: options.tokens !== undefined || !!(options.tls?.ca && options.tls.requestCert) }
    const handler = (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res)
    const tls = options.tls
    const alpn = tls && options.http2 !== false ? { ALPNProtocols: ['h2', 'http/1.1'] } : {}
    this.server = tls
      ? https.createServer({ key: tls.key, cert: tls.cert, ca: tls.ca, requestCert: !!tls.requestCert, rejectUnauthorized: false, ...alpn }, handler)
      : http.createServer(handler)
    this.http2 = tls && options.http2 !== false ? new Http2Side(this.server as https.Server, handler, options.http2 ?? {}) : undefined
    gateConnections(this.server, socket => this.admit(socket))
    this.server.on('secureConnection', (socket: TLSSocket) => {
      this.tlsSockets.add(socket)
      socket.on('close', () => this.tlsSockets.delete(socket))
    })
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head))
    this.server.on('clientError', (_err: Error, socket: Duplex) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')
      else socket.destroy()
    })
    this.server.on('tlsClientError', noop)
    this.server.keepAliveTimeout = 30_000
    for (const ns of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) this.cluster.ensureNamespace(ns)
  }

  static async start(options: SimulatorOptions = {}): Promise<ApiServerSimulator> {
    const now = Date.now()
    const signerCa =
      options.signerCa ??
      (await createCertificateAuthority({
        commonName: `simulator-csr-signer@${Math.floor(now / 1000)}`,
        notBefore: new Date(now - clockSkewAllowanceMs),
        notAfter: new Date(now + 10 * 365 * 86_400_000),
      }))
    const sim = new ApiServerSimulator(options, signerCa)
    await sim.listen(options.port ?? 0)
    return sim
  }

  get port(): number {
    return this.boundPort
  }

  get url(): string {
    return `${this.options.tls ? 'https' : 'http'}://127.0.0.1:${this.boundPort}`
  }

  /** the CA approved CSRs are signed with */
  get signerCa(): CertificateAndKey {
    return this.csr.signerCa
  }

  private async listen(port: number): Promise<void> {
    this.server.listen(port, '127.0.0.1')
    await once(this.server, 'listening')
    this.boundPort = (this.server.address() as { port: number }).port
    this.listening = true
  }

  // --- programmatic API ---------------------------------------------------------------------

  registerResource(type: ResourceType): void {
    this.registry.register(type)
  }

  private entryFor(apiVersion: string, kind: string): ResourceEntry {
    const entry = this.registry.byKind(apiVersion, kind)
    if (!entry) throw new Error(`simulator: no resource registered for ${apiVersion} ${kind}`)
    return entry
  }

  /** Multi-document YAML; CustomResourceDefinitions register their resource, `List`s are unpacked. */
  load(yamlText: string): void {
    for (const obj of parseObjects(yamlText)) {
      if (obj === null || obj === undefined) continue
      if (typeof obj.kind === 'string' && obj.kind.endsWith('List') && Array.isArray(obj.items)) {
        for (const item of obj.items) this.create(item)
      } else if (obj.kind === 'CustomResourceDefinition') {
        this.registerCRD(obj)
      } else {
        this.create(obj)
      }
    }
  }

  private registerCRD(crd: any): void {
    const spec = crd.spec ?? {}
    const names = spec.names ?? {}
    for (const v of spec.versions ?? []) {
      if (v.served === false) continue
      this.registerResource({
        group: spec.group,
        version: v.name,
        resource: names.plural,
        kind: names.kind,
        listKind: names.listKind,
        namespaced: spec.scope !== 'Cluster',
        shortNames: names.shortNames,
        singular: names.singular,
      })
    }
  }

  create(obj: any): any {
    return this.cluster.create(this.entryFor(obj?.apiVersion, obj?.kind), obj, { programmatic: true, namespace: obj?.metadata?.namespace })
  }

  update(obj: any): any {
    return this.cluster.update(this.entryFor(obj?.apiVersion, obj?.kind), obj, { programmatic: true })
  }

  patch(apiVersion: string, kind: string, namespace: string, name: string, mergePatch: any): any {
    return this.cluster.patch(this.entryFor(apiVersion, kind), namespace, name, 'merge', mergePatch, { programmatic: true })
  }

  /** Deletes the object and returns it, or undefined when there is none. */
  remove(apiVersion: string, kind: string, namespace: string, name: string): any {
    const entry = this.entryFor(apiVersion, kind)
    if (!this.cluster.get(entry, namespace, name)) return undefined
    return this.cluster.delete(entry, namespace, name, { programmatic: true })
  }

  get(apiVersion: string, kind: string, namespace: string, name: string): any | undefined {
    return this.cluster.get(this.entryFor(apiVersion, kind), namespace, name)
  }

  list(apiVersion: string, kind: string): any[] {
    return this.cluster.list(this.entryFor(apiVersion, kind)).items
  }

  /** Approves a CSR (through its approval subresource); the certificate follows shortly. Returns the approved object. */
  approveCsr(name: string, message = 'approved by the apiserver simulator'): any {
    return this.csr.decide(name, 'Approved', 'SimulatorApprove', message)
  }

  denyCsr(name: string, message: string): any {
    return this.csr.decide(name, 'Denied', 'SimulatorDeny', message)
  }

  currentResourceVersion(): string {
    return String(this.store.currentRV())
  }

  compact(): void {
    this.store.compact()
  }

  /** The cluster's state now, for restore(): etcd's snapshot save. */
  backup(): StoreBackup {
    return this.store.backup()
  }

  /**
   * etcd restored from a backup, then the apiserver restarted: the objects and resourceVersion
   * of the backup, no history before it, every watch cut. A watch from a version the restored
   * history has not reached waits in silence (kube-apiserver v1.24's cacher sends nothing at or
   * below it, BOOKMARKs included); a list not older than such a version answers 504.
   */
  restore(backup: StoreBackup): void {
    this.store.restore(backup)
    this.dropStreams()
  }

  // --- faults and connections ---------------------------------------------------------------

  async setFault(fault: Fault): Promise<void> {
    if (this.closed) return
    const previous = this.fault
    this.fault = fault
    if (previous === 'blackhole' && fault !== 'blackhole') this.blackhole.end()
    if (fault === 'refuse') {
      if (this.listening) {
        this.listening = false
        const closed = new Promise<void>(resolve => this.server.close(() => resolve()))
        this.destroyAll()
        await closed
      }
      this.hung = []
      return
    }
    if (!this.listening) await this.listen(this.boundPort)
    if (fault === 'reset') this.destroyAll()
    if (fault === 'blackhole') {
      this.hung = [] // held, never answered: reset with their sockets when the blackhole ends
      for (const w of this.watches) w.silence()
      this.http2?.hold()
      for (const socket of [...this.sockets, ...this.tlsSockets]) this.blackhole.hold(socket)
    }
    if (previous === 'hang' && fault !== 'hang') {
      const pending = this.hung
      this.hung = []
      for (const { req, res } of pending) if (!res.destroyed && !req.socket.destroyed) this.dispatch(req, res)
    }
  }

  /** Every open watch stalls (no event, no BOOKMARK, never ends) while requests are answered: a watch cache behind, a half-dead stream. */
  stallWatches(): void {
    for (const w of this.watches) w.silence()
  }

  /** Cut every open watch mid-stream, as an upstream drop would. */
  dropStreams(): void {
    for (const w of [...this.watches]) w.drop()
  }

  openConnections(): number {
    return this.sockets.size
  }

  /** Bytes on the wire (TLS included) both ways, over every connection since start: what a WAN link carries. */
  bytesTransferred(): number {
    let bytes = this.closedSocketBytes
    for (const socket of this.sockets) bytes += socket.bytesRead + socket.bytesWritten
    return bytes
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.csr.stop()
    const closed = this.listening ? new Promise<void>(resolve => this.server.close(() => resolve())) : Promise.resolve()
    this.listening = false
    this.destroyAll()
    this.wss.close()
    await closed
  }

  private destroyAll(): void {
    for (const w of [...this.watches]) w.drop()
    for (const s of [...this.sockets]) s.destroy()
  }

  /** Whether the HTTP(S) server gets a new connection: not when reset, nor in a blackhole (accepted, never answered). */
  private admit(socket: Socket): boolean {
    socket.on('error', noop)
    if (this.fault === 'reset' || this.closed) {
      resetSocket(socket)
      return false
    }
    this.sockets.add(socket)
    socket.on('close', () => {
      this.sockets.delete(socket)
      this.closedSocketBytes += socket.bytesRead + socket.bytesWritten
    })
    if (this.fault !== 'blackhole') return true
    this.blackhole.hold(socket)
    return false
  }

  // --- requests -----------------------------------------------------------------------------

  private log(req: IncomingMessage): void {
    this.requests.push(logEntry(req, identify(req, this.auth)?.username))
    if (this.requests.length > maxLoggedRequests) this.requests.splice(0, this.requests.length - maxLoggedRequests)
  }

  /** How many logged requests (of the last 10000) match: a predicate, or fields to equal (query: parameters to have). */
  countRequests(filter: RequestFilter | ((r: LoggedRequest) => boolean) = {}): number {
    return countMatching(this.requests, filter)
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    this.log(req)
    req.on('error', noop)
    res.on('error', noop)
    if (this.fault === 'blackhole') return // read just before its connection was held: never answered
    if (this.fault === 'hang') {
      this.hung.push({ req, res })
      return
    }
    this.dispatch(req, res)
  }

  private dispatch(req: IncomingMessage, res: ServerResponse): void {
    this.handle(req, res).catch(err => {
      if (!res.headersSent) sendStatus(req, res, errorStatus(err))
      else res.destroy()
    })
  }

  /** The request's identity when it may go on to `path`, else undefined (answered 401). */
  private authorize(req: IncomingMessage, path: string): Identity | undefined {
    const identity = identify(req, this.auth)
    if (identity === anonymous && this.auth.required && !isPublic(path)) return undefined
    return identity
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const info = apiserverRequestInfo(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
    if (info.problem) throw new ApiError(info.problem) // refused before authentication: an invalid escape, /api/v1/watch
    const user = this.authorize(req, info.path)
    if (!user) throw new ApiError(failure(401, 'Unauthorized', 'Unauthorized'))
    if (info.isResourceRequest && this.hugeLists.answers(info, res, this.currentResourceVersion())) return
    if (info.isResourceRequest) {
      const bookmarkIntervalMs = this.options.bookmarkIntervalMs ?? 5000
      return handleResource(
        { cluster: this.cluster, user, bookmarkIntervalMs, watchList: this.options.watchList ?? true, watches: this.watches },
        req,
        res,
        info,
      )
    }

    const path = info.path.replace(/\/+$/, '') || '/'
    if (['/healthz', '/livez', '/readyz'].some(p => path === p || path.startsWith(`${p}/`))) {
      res.writeHead(200, { ...baseHeaders(), 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': '2' })
      res.end(req.method === 'HEAD' ? undefined : 'ok')
      return
    }
    if (path === '/version') return sendJSON(req, res, 200, versionInfo)
    if (path === '/openapi/v3') return sendJSON(req, res, 200, openapiIndex(this.registry))
    if (path.startsWith('/openapi/v3/')) {
      const doc = openapiDocument(this.registry, path.slice('/openapi/v3/'.length))
      if (!doc) throw noSuchResource()
      return sendJSON(req, res, 200, doc)
    }
    if (path === '/api' || path.startsWith('/api/') || path === '/apis' || path.startsWith('/apis/')) {
      const doc = discovery(this.registry, path, `127.0.0.1:${this.boundPort}`)
      if (!doc) throw noSuchResource()
      if (!negotiate(req.headers.accept, 'object')) throw ApiError.of(406, notAcceptableMessage, 'NotAcceptable')
      return sendJSON(req, res, 200, doc)
    }
    res.writeHead(404, { ...baseHeaders(), 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' })
    res.end('404 page not found\n')
  }

  // --- upgrades (exec, attach, port-forward) ------------------------------------------------

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.log(req)
    socket.on('error', noop)
    if (this.fault === 'blackhole') return this.blackhole.hold(socket)
    if (this.fault === 'hang') return
    if (!this.authorize(req, new URL(req.url ?? '/', 'http://simulator').pathname)) {
      const body = JSON.stringify(failure(401, 'Unauthorized', 'Unauthorized'))
      socket.end(
        `HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      )
      return
    }
    echoUpgrade(this.wss, req, socket, head, () => this.fault === 'blackhole')
  }
}
