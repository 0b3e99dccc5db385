// Writing responses to clients: Status errors and whole bodies (watch streams: watch-pipeline.ts).
import type { ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { Status } from '../api/status.ts'

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
 * res.write for a stream of frames: frames written in one go (a burst of events, one tick) leave
 * together, corked until the next tick: one writev, not a syscall per frame. Returns res.write's
 * answer (false: wait for 'drain').
 */
export function burstWriter(res: ServerResponse): (frame: Buffer) => boolean {
  let corked = false
  const uncork = () => {
    corked = false
    res.uncork()
  }
  return frame => {
    if (!corked) {
      corked = true
      res.cork()
      process.nextTick(uncork)
    }
    return res.write(frame)
  }
}
