// Writing responses to clients, the one place that does: Status errors, the hub's own answers
// (Reply), relayed bodies, and the heads and frame sinks of watch streams.
import type { ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { Status } from '../api/status.ts'
import type { Reply } from '../api/reply.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { contentTypeOf } from '../api/negotiate.ts'
import type { FrameSink } from '../watch/frame-sink.ts'

/** How far behind a client may fall before the hub ends its response (--max-watch-backlog, --stall-timeout). */
export interface ClientLimits {
  /** bytes a watch's client may leave unread */
  watchBacklogBytes: number
  /** a response whose client takes nothing of what waits for it this long is ended */
  stallTimeoutMs: number
}

/** A Status, with the headers the apiserver sends with it (Retry-After for a 429). */
export function sendStatus(res: ServerResponse, status: Status, extra?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = JSON.stringify(status)
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'cache-control': 'no-cache, private',
    'content-length': Buffer.byteLength(body),
    ...extra,
  }
  if (status.details?.retryAfterSeconds !== undefined) headers['retry-after'] = String(status.details.retryAfterSeconds)
  res.writeHead(status.code, headers)
  res.end(body)
}

/** Debugging aids: curl -i shows the answer came from the hub's cache, and whose. */
export function cacheHeaders(cached: { component?: string } | undefined): Record<string, string> {
  if (!cached) return {}
  return cached.component ? { 'x-outpost-cache': 'hit', 'x-outpost-cache-source': cached.component } : { 'x-outpost-cache': 'hit' }
}

/** A 200 the hub answers itself. */
export function sendReply(res: ServerResponse, reply: Reply): void {
  res.writeHead(200, {
    'content-type': reply.contentType,
    'cache-control': 'no-cache, private',
    'content-length': reply.body.length,
    ...cacheHeaders(reply.cached),
  })
  res.end(reply.body)
}

/** The head of a watch the hub serves itself, sent at once: clients block until they see it. */
export function sendWatchHead(res: ServerResponse, format: WireFormat, extra?: Record<string, string>): void {
  res.writeHead(200, {
    'content-type': format === 'json' ? 'application/json' : `${contentTypeOf('protobuf')};stream=watch`,
    'cache-control': 'no-cache, private',
    ...extra,
  })
  res.flushHeaders()
}

/**
 * A whole response. A broken upstream must not look like a complete body, so the client connection
 * is cut. Piped by hand: stream.pipeline allocates an AbortController (and a DOMException when it
 * finishes) per call, which was the hottest item in the profile of small GETs.
 */
export function streamBody(body: Readable, res: ServerResponse): Promise<void> {
  return new Promise(resolve => {
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
 * The client's response as a sink of watch frames (its head already sent). Frames written in one
 * go (a burst of events, one tick) leave together, corked until the next tick: one writev, not a
 * syscall per frame.
 */
export function responseSink(res: ServerResponse): FrameSink {
  let corked = false
  const uncork = () => {
    corked = false
    res.uncork()
  }
  return {
    write(frame) {
      if (!corked) {
        corked = true
        res.cork()
        process.nextTick(uncork)
      }
      return res.write(frame)
    },
    get backlog() {
      return res.writableLength
    },
    get closed() {
      return res.destroyed || res.closed || res.writableEnded
    },
    drained() {
      return new Promise(resolve => {
        const done = () => {
          res.off('drain', done)
          res.off('close', done)
          resolve()
        }
        res.on('drain', done)
        res.on('close', done)
      })
    },
    onClose(listener) {
      if (res.closed) listener()
      else res.once('close', listener)
    },
    end() {
      if (!res.writableEnded && !res.destroyed) res.end()
    },
    abort() {
      res.destroy()
    },
  }
}
