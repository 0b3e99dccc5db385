// One client request, end to end: classify it; with the cloud reachable, forward it and record
// cacheable answers on the way back; without, answer reads from the cache and refuse writes.
import { EventEmitter } from 'node:events'
import { gunzipSync } from 'node:zlib'
import type { ServerResponse, IncomingMessage } from 'node:http'
import type { Logger } from 'pino'
import { classify, isWatch } from './requestinfo.ts'
import type { RequestInfo } from './requestinfo.ts'
import { upstreamRequestHeaders, clientResponseHeaders } from './headers.ts'
import { BodyTooLargeError, hasBody, readBody } from './body.ts'
import { WatchFrameSplitter, framingOf } from './frames.ts'
import { Upstream, UpstreamUnavailableError, describeError } from './upstream.ts'
import type { UpstreamResponse } from './upstream.ts'
import { failure, serviceUnavailable } from './status.ts'
import { sendStatus, streamBody, streamWatch } from './respond.ts'
import type { Recorder, CachePolicy } from './cache/recorder.ts'
import { scopeOf } from './cache/recorder.ts'
import { vouchedFields } from './cache/store.ts'
import { formatOf } from './cache/decode.ts'
import { serveGet, serveList, serveWatch } from './cache/offline.ts'
import { serveDocument } from './cache/documents.ts'
import type { LiveStreams } from './streams.ts'

export interface ProxyOptions {
  upstream: Upstream
  log: Logger
  maxRequestBodyBytes: number
  /** this node's name: its Lease renewals are answered locally while offline */
  nodeName: string
  cache?: { recorder: Recorder; policy: CachePolicy }
  /** whether the cloud is reachable, and if not, why */
  cloud: { isOnline(): boolean; outage(): string }
  streams: LiveStreams
  offlineBookmarkIntervalMs: number
  onServedFromCache?: (info: RequestInfo) => void
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
  const clientGone = new ClientGone()
  res.on('close', () => {
    if (!res.writableFinished) clientGone.abort()
  })

  let body: Buffer | undefined
  if (hasBody(req)) {
    try {
      body = await readBody(req, options.maxRequestBodyBytes)
    } catch (error) {
      if (error instanceof BodyTooLargeError) sendStatus(res, failure(413, error.message))
      else res.destroy()
      return
    }
  }
  const cacheable = options.cache?.policy.isCacheable(info) ?? false
  const document = options.cache?.policy.isCacheableDocument(info) ?? false
  if (!options.cloud.isOnline()) {
    await answerOffline(info, req, res, body, options, options.cloud.outage())
    logRequest(options.log, info, res.statusCode, started, 'cache')
    return
  }

  let upstreamRes: UpstreamResponse
  try {
    upstreamRes = await options.upstream.request({
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: upstreamRequestHeaders(req.headers),
      body,
      signal: clientGone,
      longRunning: isWatch(info) || info.verb === 'proxy',
    })
  } catch (error) {
    if (clientGone.aborted) return
    if (error instanceof UpstreamUnavailableError) {
      options.log.warn({ component: info.component, verb: info.verb, path: info.path, err: error.message }, 'upstream unavailable')
      if (cacheable || document) return answerOffline(info, req, res, body, options, error.message)
      return sendStatus(res, serviceUnavailable(error.message))
    }
    const message = `apiserver connection failed before it answered (the request may have been applied): ${describeError(error)}`
    options.log.warn({ component: info.component, verb: info.verb, path: info.path, err: message }, 'upstream failed')
    return sendStatus(res, serviceUnavailable(message))
  }

  const contentType = (upstreamRes.headers['content-type'] as string | undefined) ?? ''
  const format = formatOf(contentType)
  const recorder = upstreamRes.statusCode === 200 && ((cacheable && format) || document) ? options.cache?.recorder : undefined
  if (recorder && !isWatch(info)) {
    await recordThenSend(upstreamRes, res, decoded =>
      document
        ? recorder.recordDocument(info, contentType, decoded)
        : info.verb === 'list'
          ? recorder.recordListPage(info, format!, decoded)
          : recorder.recordObject(info, format!, decoded),
    )
  } else {
    res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
    const framing = framingOf(upstreamRes.headers['content-type'] as string | undefined)
    if (isWatch(info) && upstreamRes.statusCode === 200 && framing && !upstreamRes.headers['content-encoding']) {
      const fields = recorder ? vouchedFields(scopeOf(info)) : undefined
      const record = recorder && format ? (frame: Buffer) => recorder.recordEvent(info, format, frame, fields) : undefined
      const stop = () => upstreamRes.body.destroy()
      options.streams.addUpstreamWatch(stop)
      await streamWatch(upstreamRes.body, new WatchFrameSplitter(framing), res, record)
      options.streams.removeUpstreamWatch(stop)
    } else {
      if (isWatch(info)) res.flushHeaders()
      await streamBody(upstreamRes.body, res)
    }
  }
  logRequest(options.log, info, upstreamRes.statusCode, started, 'cloud')
}

/**
 * A cacheable get or list: the whole body is read (lists are bounded), recorded durably, and only
 * then sent, exactly as the apiserver sent it (gzip included): an object a client has seen is an
 * object a restarted hub still has.
 */
async function recordThenSend(upstreamRes: UpstreamResponse, res: ServerResponse, record: (decoded: Buffer) => Promise<void>): Promise<void> {
  let raw: Buffer
  try {
    const chunks: Buffer[] = []
    for await (const chunk of upstreamRes.body) chunks.push(chunk as Buffer)
    raw = Buffer.concat(chunks)
  } catch {
    res.destroy() // the upstream broke mid-body: the client must not take a truncated answer as whole
    return
  }
  const encoding = upstreamRes.headers['content-encoding']
  let decoded: Buffer | undefined = raw
  if (encoding === 'gzip') {
    try {
      decoded = gunzipSync(raw)
    } catch {
      decoded = undefined // not the cache's to fix: the client gets the bytes and its own error
    }
  } else if (encoding) {
    decoded = undefined
  }
  if (decoded) await record(decoded)
  const headers = clientResponseHeaders(upstreamRes.headers)
  headers['content-length'] = raw.length
  res.writeHead(upstreamRes.statusCode, headers)
  res.end(raw)
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

async function answerOffline(
  info: RequestInfo,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | undefined,
  options: ProxyOptions,
  reason: string,
): Promise<void> {
  const cache = options.cache
  if (cache?.policy.isCacheableDocument(info) && (await serveDocument(cache.recorder.store, info, req.headers.accept, res))) {
    options.onServedFromCache?.(info)
    return
  }
  if (cache?.policy.isCacheable(info)) {
    const store = cache.recorder.store
    const accept = req.headers.accept
    options.onServedFromCache?.(info)
    if (info.verb === 'get') return serveGet(store, info, accept, res)
    if (info.verb === 'list') return serveList(store, info, accept, res)
    const watch = await serveWatch(store, info, accept, res, options.offlineBookmarkIntervalMs)
    if (watch) {
      options.streams.addOfflineWatch(watch.end)
      res.on('close', () => options.streams.removeOfflineWatch(watch.end))
    }
    return
  }
  if (body && isOwnLeaseRenewal(info, options.nodeName)) {
    // kubelet renews its Lease every 10 s and restarts its node status loop when renewals fail;
    // offline the renewal is acknowledged with what it sent, and nothing is written anywhere.
    res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/json', 'content-length': body.length })
    res.end(body)
    return
  }
  const what = info.isResourceRequest ? `${info.verb} ${info.resource}` : `${info.verb} ${info.path}`
  const nothing = ['create', 'update', 'patch', 'delete', 'deletecollection'].includes(info.verb) ? '; nothing was written' : ''
  sendStatus(res, serviceUnavailable(`${reason}: ${what} for ${info.component || 'this client'} cannot be answered from the cache${nothing}`))
}

function logRequest(log: Logger, info: RequestInfo, code: number, started: number, from: 'cloud' | 'cache'): void {
  if (!log.isLevelEnabled('debug')) return
  const gr = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource
  const resource = info.isResourceRequest ? (info.subresource ? `${gr}/${info.subresource}` : gr) : info.path
  log.debug({ component: info.component, verb: info.verb, resource, code, from, ms: Math.round(performance.now() - started) }, 'request')
}
