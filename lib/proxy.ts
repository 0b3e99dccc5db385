// The forwarding path: one client request → one upstream request → the response streamed back.
// Watches go frame by frame with their headers flushed at once; everything else is piped as is.
import { EventEmitter } from 'node:events'
import { pipeline } from 'node:stream'
import type { ServerResponse, IncomingMessage } from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import { classify, isWatch } from './requestinfo.ts'
import type { RequestInfo } from './requestinfo.ts'
import { upstreamRequestHeaders, clientResponseHeaders } from './headers.ts'
import { BodyTooLargeError, hasBody, readBody } from './body.ts'
import { WatchFrameSplitter, framingOf } from './frames.ts'
import { Upstream, UpstreamUnavailableError, describeError } from './upstream.ts'
import type { UpstreamResponse } from './upstream.ts'
import { failure, serviceUnavailable } from './status.ts'
import type { Status } from './status.ts'

export interface ProxyOptions {
  upstream: Upstream
  log: FastifyBaseLogger
  maxRequestBodyBytes: number
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

function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise(resolve => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

export function sendStatus(res: ServerResponse, status: Status): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = JSON.stringify(status)
  res.writeHead(status.code, {
    'content-type': 'application/json',
    'cache-control': 'no-cache, private',
    'content-length': Buffer.byteLength(body),
  })
  res.end(body)
}

/** Forwards one request; resolves when the response to the client has ended or been abandoned. */
export async function forward(req: IncomingMessage, res: ServerResponse, options: ProxyOptions): Promise<void> {
  const started = performance.now()
  const info = classify(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
  const log = options.log
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
    const message =
      error instanceof UpstreamUnavailableError
        ? error.message
        : `apiserver connection failed before it answered (the request may have been applied): ${describeError(error)}`
    log.warn({ component: info.component, verb: info.verb, path: info.path, err: message }, 'upstream unavailable')
    sendStatus(res, serviceUnavailable(message))
    return
  }

  res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
  const framing = framingOf(upstreamRes.headers['content-type'] as string | undefined)
  const framed = isWatch(info) && upstreamRes.statusCode === 200 && framing && !upstreamRes.headers['content-encoding']
  if (framed) {
    await streamWatch(upstreamRes, new WatchFrameSplitter(framing), res)
  } else {
    if (isWatch(info)) res.flushHeaders()
    await streamBody(upstreamRes, res)
  }
  log.debug(
    {
      component: info.component,
      verb: info.verb,
      resource: describeResource(info),
      code: upstreamRes.statusCode,
      ms: Math.round(performance.now() - started),
    },
    'request',
  )
}

function describeResource(info: RequestInfo): string {
  if (!info.isResourceRequest) return info.path
  const gr = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource
  return info.subresource ? `${gr}/${info.subresource}` : gr
}

/**
 * A whole response. A broken upstream must not look like a complete body, so the client connection
 * is cut. Piped by hand: stream.pipeline allocates an AbortController (and a DOMException when it
 * finishes) per call, which was the hottest item in the profile of small GETs.
 */
function streamBody(upstreamRes: UpstreamResponse, res: ServerResponse): Promise<void> {
  return new Promise(resolve => {
    const body = upstreamRes.body
    body.on('error', () => {
      if (!res.destroyed) res.destroy()
    })
    res.on('close', () => {
      if (!body.readableEnded) body.destroy()
      resolve()
    })
    body.pipe(res)
  })
}

/**
 * A watch: headers leave at once (a watch from the current resourceVersion may have nothing to say
 * for minutes, and clients block until they see headers), then whole frames. When the upstream
 * breaks, the client's stream ends cleanly after the last whole frame, so it re-watches.
 */
async function streamWatch(
  upstreamRes: UpstreamResponse,
  splitter: WatchFrameSplitter,
  res: ServerResponse,
): Promise<void> {
  res.flushHeaders()
  const frames = pipeline(upstreamRes.body, splitter, () => {})
  try {
    // Frames that arrive together leave together: corked until the next tick, one writev for a burst.
    let corked = false
    const uncork = () => {
      corked = false
      res.uncork()
    }
    for await (const frame of frames) {
      if (!corked) {
        corked = true
        res.cork()
        process.nextTick(uncork)
      }
      if (!res.write(frame)) await drainedOrClosed(res)
      if (res.destroyed) break
    }
  } catch {
    // upstream dropped, or the client went away: both end below
  } finally {
    upstreamRes.body.destroy()
    if (!res.destroyed) res.end()
  }
}
