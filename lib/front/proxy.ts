// One client request, end to end: classify it; with the cloud reachable, forward it and record
// cacheable answers on the way back; without, answer reads from the cache and refuse writes.
import { EventEmitter } from 'node:events'
import { gunzip } from 'node:zlib'
import { promisify } from 'node:util'
import type { ServerResponse, IncomingMessage } from 'node:http'
import type { Logger } from 'pino'
import { classify, isWatch, qualifiedResource, queryFlag } from '../api/requestinfo.ts'
import { upstreamPath } from '../api/paths.ts'
import type { RequestInfo } from '../api/requestinfo.ts'
import { upstreamRequestHeaders, clientResponseHeaders } from './headers.ts'
import { BodyTimeoutError, BodyTooLargeError, hasBody, readBody } from './body.ts'
import type { Authenticate } from './authn.ts'
import { WatchFrameSplitter, framingOf, isBookmark } from '../api/frames.ts'
import { Upstream, UpstreamUnavailableError, describeError } from '../upstream/upstream.ts'
import type { UpstreamResponse } from '../upstream/upstream.ts'
import { failure, notFound, serviceUnavailable } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import { sendStatus, streamBody } from './respond.ts'
import { planRequest, shapeOf } from './plan.ts'
import { streamWatch } from '../watch/pipeline.ts'
import { serveFromCache } from '../watch/serve.ts'
import type { WatchCaches } from '../watch/watch-caches.ts'
import type { WatchStages } from '../watch/pipeline.ts'
import type { Recorder, CachePolicy } from '../cache/recorder.ts'
import type { CacheStore } from '../cache/store.ts'
import { numericVersion } from '../cache/versions.ts'
import { isCachedKind } from '../cache/recorder.ts'
import type { FilterRegistry, ResponseFilter } from '../../filters/registry.ts'
import { FilteredWatch } from '../watch/refilter.ts'
import type { FilteredWatches } from '../watch/refilter.ts'
import { decodeList, decodeObject, formatOf } from '../cache/decode.ts'
import { serveGet, serveList, serveWatch } from '../cache/offline.ts'
import { isDiscoveryDocument, serveDocument } from '../cache/documents.ts'
import type { LiveStreams } from '../watch/streams.ts'
import type { RequestObserver, Source } from '../observe/metrics.ts'
import { scopeOf } from '../cache/scope.ts'
import { resourceKeyOf } from '../cache/types.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { readAll } from '../upstream/read-all.ts'

export interface ProxyOptions {
  upstream: Upstream
  log: Logger
  maxRequestBodyBytes: number
  /** a request body must keep arriving: at most this long between chunks */
  bodyIdleTimeoutMs?: number
  /** who may use this port (the HTTPS port); undefined: anyone who reaches it (loopback) */
  authenticate?: Authenticate
  /** this node's name: its Lease renewals are answered locally while offline */
  nodeName: string
  cache?: { recorder: Recorder; policy: CachePolicy }
  /** whether the cloud is reachable, and if not, why */
  cloud: { isOnline(): boolean; outage(): string }
  streams: LiveStreams
  offlineBookmarkIntervalMs: number
  /** told when each request ends and while each watch is open (metrics) */
  observer?: RequestObserver
  filters?: FilterRegistry
  filteredWatches?: FilteredWatches
  /** an upstream watch with BOOKMARKs that is silent this long is ended (half-open link); 0: never */
  watchSilenceMs?: number
  /** shared watch caches for what node components list and watch all day */
  watchCaches?: WatchCaches
  /** BOOKMARK period of watches served from a watch cache (default: a minute, as the apiserver) */
  cacheBookmarkIntervalMs?: number
}

/**
 * undici takes an EventEmitter as its abort signal. One per request is far cheaper than an
 * AbortController, whose DOMException and signal plumbing showed up at the top of the profile.
 */
class ClientGone extends EventEmitter {
  aborted = false
  abort(): void {
    if (this.aborted) return
    this.aborted = true
    this.emit('abort')
  }
}

/** Forwards one request; resolves when the response to the client has ended or been abandoned. */
export async function forward(req: IncomingMessage, res: ServerResponse, options: ProxyOptions): Promise<void> {
  const started = performance.now()
  const info = classify(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
  let source: Source = 'hub'
  try {
    source = await answer(info, req, res, options)
  } catch (error) {
    // The reply is hijacked: nobody else would answer, and the client would wait forever.
    const message = error instanceof Error ? error.message : String(error)
    options.log.error({ component: info.component, verb: info.verb, path: info.path, err: message }, 'request failed inside the hub')
    sendStatus(res, failure(500, `the hub failed to answer: ${message}`, 'InternalError'))
  }
  // Headers never sent: the client left first, or the connection was cut (nginx's 499).
  const code = res.headersSent ? res.statusCode : 499
  const seconds = (performance.now() - started) / 1000
  options.observer?.requestDone(info, code, source, seconds)
  logRequest(options.log, info, code, seconds, source, res.getHeader('x-outpost-cache-source') as string | undefined)
}

async function answer(info: RequestInfo, req: IncomingMessage, res: ServerResponse, options: ProxyOptions): Promise<Source> {
  const clientGone = new ClientGone()
  res.on('close', () => {
    if (!res.writableFinished) clientGone.abort()
  })

  const denied = options.authenticate?.(req)
  if (denied) {
    sendStatus(res, denied)
    return 'hub'
  }
  // what the apiserver answers to this path whoever asks (a bad escape, a watch of nothing): online or not
  if (info.problem) {
    sendStatus(res, info.problem)
    return 'hub'
  }
  let body: Buffer | undefined
  if (hasBody(req)) {
    try {
      body = await readBody(req, options.maxRequestBodyBytes, options.bodyIdleTimeoutMs)
    } catch (error) {
      // the rest of the body is not read: the connection cannot carry another request
      res.shouldKeepAlive = false
      if (error instanceof BodyTooLargeError) sendStatus(res, failure(413, error.message))
      else if (error instanceof BodyTimeoutError) sendStatus(res, failure(408, error.message, 'Timeout'))
      else res.destroy()
      return 'hub'
    }
  }
  const online = options.cloud.isOnline()
  const actsAsNode = req.headers.authorization === undefined
  const filter = options.filters?.forRequest(info)
  const plan = planRequest({
    actsAsNode,
    online,
    cacheable: options.cache?.policy.isCacheable(info) ?? false,
    recordedWrite: options.cache?.policy.recordsWrite(info) ?? false,
    document: options.cache !== undefined && isDiscoveryDocument(info),
    cachedKind: options.cache !== undefined && isCachedKind(info),
    watchCache: options.watchCaches?.serves(info) ?? false,
    filtered: filter !== undefined,
  })
  if (plan.route === 'watch-cache' && (await answerFromWatchCache(info, req, res, online, filter, options))) return 'cache'
  if (!online) return answerOffline(info, req, res, body, options, options.cloud.outage(), actsAsNode)

  let upstreamRes: UpstreamResponse
  try {
    upstreamRes = await options.upstream.request({
      method: req.method ?? 'GET',
      // the hub always asks for BOOKMARKs: they tell a live link from a half-open one, and how far
      // the stream has come (lib/watch/refilter.ts); clients that did not ask never see them
      // written from what the hub read, never the client's string: the apiserver reads what the hub did
      path: upstreamPath(info, isWatch(info) && !asksForBookmarks(info) ? { allowWatchBookmarks: 'true' } : undefined),
      headers: upstreamRequestHeaders(req.headers),
      body,
      signal: clientGone,
      longRunning: isWatch(info) || info.verb === 'proxy',
    })
  } catch (error) {
    if (clientGone.aborted) return 'cloud'
    if (error instanceof UpstreamUnavailableError) {
      options.log.warn({ component: info.component, verb: info.verb, path: info.path, err: error.message }, 'upstream unavailable')
      if (plan.fallback) return answerOffline(info, req, res, body, options, error.message, actsAsNode, true)
      sendStatus(res, serviceUnavailable(error.message))
      return 'hub'
    }
    const message = `apiserver connection failed before it answered (the request may have been applied): ${describeError(error)}`
    options.log.warn({ component: info.component, verb: info.verb, path: info.path, err: message }, 'upstream failed')
    sendStatus(res, serviceUnavailable(message))
    return 'hub'
  }

  const contentType = (upstreamRes.headers['content-type'] as string | undefined) ?? ''
  const format = formatOf(contentType)
  const framing = framingOf(contentType)
  // a create answers 201 Created with what was stored, which is recorded as a 200 is
  const ok = upstreamRes.statusCode === 200 || (upstreamRes.statusCode === 201 && info.verb === 'create')
  const shape = shapeOf(plan, info, {
    ok,
    framed: framing !== undefined,
    encoded: upstreamRes.headers['content-encoding'] !== undefined,
    decodable: format !== undefined,
  })
  const recorder = ok && ((plan.record === 'objects' && format) || plan.record === 'document') ? options.cache?.recorder : undefined
  const outgoing = ok && format ? filter : undefined
  if (shape === 'watch') {
    res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
    const closed = options.observer?.watchOpened(info, 'cloud')
    try {
      await relayWatch(info, format, upstreamRes, res, framing!, recorder, outgoing, options)
    } finally {
      closed?.()
    }
  } else if (shape === 'whole') {
    await bufferThenSend(
      upstreamRes,
      res,
      async decoded => {
        if (recorder) {
          if (plan.record === 'document') await recorder.recordDocument(info, contentType, decoded)
          else if (info.verb === 'list') await recorder.recordListPage(info, format!, decoded)
          else await recorder.recordObject(info, format!, decoded)
        }
        // a filtered list the cache does not keep: its watch will start from it
        else if (outgoing && info.verb === 'list') options.filteredWatches?.rememberList(info, decodeList(format!, decoded).items)
        return outgoing ? outgoing.body(format!, decoded) : decoded
      },
      () => notFound(info.resource, info.apiGroup, info.name),
    )
  } else {
    res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
    if (isWatch(info)) res.flushHeaders()
    await streamBody(upstreamRes.body, res)
  }
  return 'cloud'
}

/** A list or watch from a shared watch cache; false when the cache is not the one to answer it. */
function answerFromWatchCache(
  info: RequestInfo,
  req: IncomingMessage,
  res: ServerResponse,
  online: boolean,
  filter: ResponseFilter | undefined,
  options: ProxyOptions,
): Promise<boolean> {
  return serveFromCache(info, req, res, online, {
    caches: options.watchCaches!,
    filter,
    bookmarkIntervalMs: options.cacheBookmarkIntervalMs,
    onRefilterSent: count => options.observer?.refiltered?.(count),
    watchOpened: end => {
      options.streams.addHeldWatch(end)
      const closed = options.observer?.watchOpened(info, 'cache')
      return () => {
        options.streams.removeHeldWatch(end)
        closed?.()
      }
    },
  })
}

/**
 * A watch: each frame is recorded (the cache) as it arrives, then at its turn tracked and filtered
 * and sent; a filtered watch remembers its objects, so a topology change can send what now filters
 * differently. It starts from what the client listed: the cache's copy for cached components, the
 * list the hub passed on for the others.
 */
async function relayWatch(
  info: RequestInfo,
  format: WireFormat | undefined,
  upstreamRes: UpstreamResponse,
  res: ServerResponse,
  framing: 'json' | 'protobuf',
  recorder: Recorder | undefined,
  filter: ResponseFilter | undefined,
  options: ProxyOptions,
): Promise<void> {
  const recording = recorder && format ? recorder.watch(info, format) : undefined
  const clientBookmarks = asksForBookmarks(info)
  let tracker: FilteredWatch | undefined
  let seeding: Promise<void> | undefined
  let untrack = () => {}
  const stages: WatchStages = {
    prepare:
      recording || filter
        ? async frame => {
            await seeding
            await recording?.record(frame)
          }
        : undefined,
    take: frame => {
      const filtered = !tracker && filter && format ? filter.frame(format, frame) : frame
      const out = tracker ? tracker.take(frame) : filtered ? [filtered] : []
      // a BOOKMARK the hub asked for, not the client: it moved the tracker on, and goes no further
      return clientBookmarks || !isBookmark(framing, frame) ? out : out.slice(1)
    },
    onInject: inject => {
      if (!filter || !format || !options.filteredWatches) return
      const watches = options.filteredWatches
      const watch = new FilteredWatch(format, filter, inject, {
        startResourceVersion: info.resourceVersion,
        onSent: count => options.observer?.refiltered?.(count),
      })
      tracker = watch
      const store = options.cache?.recorder.store
      const cached = recorder !== undefined && store !== undefined
      seeding = cached
        ? store.list(resourceKeyOf(info), scopeOf(info)).then(
            list => watch.seed(list?.items ?? []),
            () => {},
          )
        : Promise.resolve(watch.seed(watches.takeList(info)))
      untrack = watches.add(watch)
    },
  }
  const stop = () => upstreamRes.body.destroy()
  options.streams.addUpstreamWatch(stop)
  try {
    // with BOOKMARKs the apiserver speaks about every minute: a watch silent much longer is a dead link
    await streamWatch(upstreamRes.body, new WatchFrameSplitter(framing), res, stages, options.watchSilenceMs ?? 0)
  } finally {
    options.streams.removeUpstreamWatch(stop)
    untrack()
  }
}

/**
 * A get or list to record or filter: the whole body is read (lists are bounded), recorded durably,
 * and only then sent: an object a client has seen is an object a restarted hub still has. What the
 * apiserver sent goes out byte for byte (gzip included) unless a filter changed it.
 */
async function bufferThenSend(
  upstreamRes: UpstreamResponse,
  res: ServerResponse,
  process: (decoded: Buffer) => Promise<Buffer | null>,
  gone: () => Status,
): Promise<void> {
  let raw: Buffer
  try {
    raw = await readAll(upstreamRes.body)
  } catch {
    res.destroy() // the upstream broke mid-body: the client must not take a truncated answer as whole
    return
  }
  const encoding = upstreamRes.headers['content-encoding']
  let decoded: Buffer | undefined = raw
  if (encoding === 'gzip') {
    try {
      decoded = await gunzipAsync(raw) // on the thread pool: a big list must not stall every other client
    } catch {
      decoded = undefined // not the cache's to fix: the client gets the bytes and its own error
    }
  } else if (encoding) {
    decoded = undefined
  }
  const out = decoded ? await process(decoded) : raw
  // a single object the client's filters drop is, for that client, not there
  if (out === null) return sendStatus(res, gone())
  const headers = clientResponseHeaders(upstreamRes.headers)
  const body = out === decoded ? raw : out
  if (body !== raw) delete headers['content-encoding'] // filtered: sent plain, the client accepts either
  headers['content-length'] = body.length
  res.writeHead(upstreamRes.statusCode, headers)
  res.end(body)
}

const gunzipAsync = promisify(gunzip)

function asksForBookmarks(info: RequestInfo): boolean {
  return queryFlag(info, 'allowWatchBookmarks')
}

function isOwnLeaseRenewal(info: RequestInfo, nodeName: string): boolean {
  return (
    info.verb === 'update' &&
    info.apiGroup === 'coordination.k8s.io' &&
    info.resource === 'leases' &&
    info.namespace === 'kube-node-lease' &&
    info.name === nodeName
  )
}

/**
 * An offline renewal is acknowledged from the last Lease the apiserver acknowledged: kubelet builds
 * each renewal from the previous answer, so one built from another version is the apiserver's
 * 409 Conflict (kubelet then reads the Lease again, from the cache, and renews from that).
 */
async function leaseConflict(store: CacheStore, info: RequestInfo, contentType: string | undefined, body: Buffer): Promise<Status | undefined> {
  const format = formatOf(contentType ?? 'application/json')
  if (!format) return undefined
  let sent: string
  try {
    sent = decodeObject(format, body).resourceVersion
  } catch {
    return undefined // not the cache's to judge: acknowledged as before
  }
  let held = ''
  for (const c of await store.candidates(resourceKeyOf(info))) {
    const lease = await store.get(c.key, info.namespace, info.name).catch(() => undefined)
    if (lease && numericVersion(lease.resourceVersion) > numericVersion(held)) held = lease.resourceVersion
  }
  if (!held || !sent || sent === held) return undefined
  return failure(
    409,
    `Operation cannot be fulfilled on leases.coordination.k8s.io "${info.name}": the object has been modified; please apply your changes to the latest version and try again`,
    'Conflict',
    { name: info.name, group: 'coordination.k8s.io', kind: 'leases' },
  )
}

async function answerOffline(
  info: RequestInfo,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | undefined,
  options: ProxyOptions,
  reason: string,
  actsAsNode: boolean,
  /** the cloud still counts as up: every upstream failed this once */
  blip = false,
): Promise<Source> {
  if (!actsAsNode) {
    sendStatus(
      res,
      serviceUnavailable(
        `${reason}: this request carries its own credentials, which cannot be checked while the apiserver is unreachable; only clients acting as the node are answered from the cache`,
      ),
    )
    return 'hub'
  }
  const cache = options.cache
  if (cache && isDiscoveryDocument(info) && (await serveDocument(cache.recorder.store, info, req.headers.accept, res))) return 'cache'
  if (cache && isCachedKind(info)) {
    const read = { store: cache.recorder.store, info, accept: req.headers.accept, res, filter: options.filters?.forRequest(info), reason }
    if (info.verb === 'get') await serveGet(read)
    else if (info.verb === 'list') await serveList(read)
    else {
      const watch = await serveWatch(read, options.offlineBookmarkIntervalMs)
      if (watch) {
        const closed = options.observer?.watchOpened(info, 'cache')
        if (blip) options.streams.addFallbackWatch(watch.end)
        else options.streams.addOfflineWatch(watch.end)
        if (!res.closed) await new Promise<void>(resolve => res.once('close', resolve))
        options.streams.removeOfflineWatch(watch.end)
        closed?.()
      }
    }
    return 'cache'
  }
  if (body && isOwnLeaseRenewal(info, options.nodeName)) {
    const conflict = cache && (await leaseConflict(cache.recorder.store, info, req.headers['content-type'], body))
    if (conflict) {
      sendStatus(res, conflict)
      return 'hub'
    }
    // kubelet renews its Lease every 10 s and restarts its node status loop when renewals fail;
    // offline the renewal is acknowledged with what it sent, and nothing is written anywhere.
    res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/json', 'content-length': body.length })
    res.end(body)
    return 'hub'
  }
  const what = info.isResourceRequest ? `${info.verb} ${info.resource}` : `${info.verb} ${info.path}`
  const nothing = ['create', 'update', 'patch', 'delete', 'deletecollection'].includes(info.verb) ? '; nothing was written' : ''
  sendStatus(res, serviceUnavailable(`${reason}: ${what} for ${info.component || 'this client'} cannot be answered from the cache${nothing}`))
  return 'hub'
}

function logRequest(log: Logger, info: RequestInfo, code: number, seconds: number, source: Source, from: string | undefined): void {
  if (!log.isLevelEnabled('debug')) return
  // from: whose cache answered, when it was the cache
  log.debug(
    { component: info.component, verb: info.verb, resource: qualifiedResource(info) || info.path, code, source, from, ms: Math.round(seconds * 1000) },
    'request',
  )
}
