// Writing responses to clients, the one place that does: Status errors, the hub's own answers
// (Reply), relayed bodies, and the heads and frame sinks of watch streams.
import type { ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { Status } from '../api/status.ts'
import type { Reply } from '../api/reply.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { contentTypeOf } from '../api/negotiate.ts'
import { writeAsTaken } from '../watch/frame-sink.ts'
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

const defaultStallMs = 60_000
/** a body this small is written at once, as writeAsTaken would write it in one batch anyway */
const smallBodyBytes = 16 * 1024

/**
 * A 200 the hub answers itself. A body in parts (a list) is written as the client takes it
 * (writeAsTaken, as a watch's initial state): an unread list holds a batch, not a copy of the list.
 * A client that takes nothing for `stallTimeoutMs` is cut off, as one that stopped reading.
 */
export async function sendReply(res: ServerResponse, reply: Reply, stallTimeoutMs = defaultStallMs): Promise<'sent' | 'stalled'> {
  const parts = Array.isArray(reply.body) ? reply.body : [reply.body]
  let length = 0
  for (const part of parts) length += part.length
  res.writeHead(200, {
    'content-type': reply.contentType,
    'cache-control': 'no-cache, private',
    'content-length': length,
    ...cacheHeaders(reply.cached),
  })
  // a body the socket takes in one write (a get's object) goes in it: nothing to pace
  if (parts.length === 1 && length <= smallBodyBytes) {
    res.end(parts[0])
    return 'sent'
  }
  if (await writeAsTaken(responseSink(res), parts, stallTimeoutMs)) {
    res.end()
    return 'sent'
  }
  if (res.destroyed) return 'sent' // the client went away
  res.destroy()
  return 'stalled'
}

/** Resolves true when the client has taken what was written (or the response closed), false after `timeoutMs` without. */
function drained(res: ServerResponse, timeoutMs: number): Promise<boolean> {
  return new Promise(resolve => {
    const done = (taken: boolean) => {
      clearTimeout(timer)
      res.off('drain', onDrain)
      res.off('close', onDrain)
      resolve(taken)
    }
    const onDrain = () => done(true)
    const timer = setTimeout(() => done(false), timeoutMs)
    res.on('drain', onDrain)
    res.on('close', onDrain)
  })
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
 * A relayed body, with backpressure: a client that does not read holds the upstream, not the
 * hub's memory, and is cut off when it takes nothing for `stallMs` (between one and two periods,
 * checked each period). `head`: chunks already read from the body (a list over the cap), written
 * first. A broken upstream must not look like a complete body, so the client connection is cut.
 * Piped by hand: stream.pipeline allocates an AbortController (and a DOMException when it
 * finishes) per call, which was the hottest item in the profile of small GETs.
 */
export function streamBody(body: Readable, res: ServerResponse, options: { head?: Buffer[]; stallMs?: number } = {}): Promise<'sent' | 'stalled'> {
  return new Promise(resolve => {
    const { head = [], stallMs } = options
    let drains = 0
    let seen = -1
    let stalled = false
    const onDrain = () => drains++
    const stall = stallMs
      ? setInterval(() => {
          if (res.writableNeedDrain && drains === seen) {
            stalled = true
            res.destroy()
          }
          seen = drains
        }, stallMs)
      : undefined
    stall?.unref()
    if (stall) res.on('drain', onDrain)
    body.on('error', () => {
      if (!res.destroyed) res.destroy()
    })
    res.on('close', () => {
      clearInterval(stall)
      res.off('drain', onDrain)
      if (!body.readableEnded) body.destroy()
      resolve(stalled ? 'stalled' : 'sent')
    })
    for (const chunk of head) res.write(chunk)
    head.length = 0 // the chunks are the socket's now: nothing here keeps them once written
    if (!res.destroyed) body.pipe(res) // resumes a paused body, or waits for 'drain' if the head filled the socket
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
      if (!Array.isArray(frame)) return res.write(frame)
      let taken = true
      for (const part of frame) taken = res.write(part)
      return taken
    },
    get backlog() {
      return res.writableLength
    },
    get closed() {
      return res.destroyed || res.closed || res.writableEnded
    },
    drained(timeoutMs) {
      return drained(res, timeoutMs ?? 2 ** 31 - 1)
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
