// Writing responses to clients: Status errors, whole bodies, and watch streams frame by frame.
import { pipeline } from 'node:stream'
import type { ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { WatchFrameSplitter } from './frames.ts'
import type { Status } from './status.ts'

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
 * A watch: headers leave at once (a watch from the current resourceVersion may have nothing to say
 * for minutes, and clients block until they see headers), then whole frames. When the upstream
 * breaks, the client's stream ends cleanly after the last whole frame, so it re-watches.
 * `transform` (record in the cache, then filter) sees every frame first; what it resolves to leaves,
 * in order, while later frames are already being recorded. `inject` adds frames of the hub's own
 * (re-filtered objects) into the same ordered stream.
 */
export async function streamWatch(
  body: Readable,
  splitter: WatchFrameSplitter,
  res: ServerResponse,
  transform?: (frame: Buffer) => Promise<Buffer> | Buffer,
  onInject?: (inject: (frame: Buffer) => void) => void,
): Promise<void> {
  res.flushHeaders()
  const frames = pipeline(body, splitter, () => {})
  // Frames that arrive together leave together: corked until the next tick, one writev for a burst.
  let corked = false
  const uncork = () => {
    corked = false
    res.uncork()
  }
  const write = async (frame: Buffer) => {
    if (res.destroyed) return
    if (!corked) {
      corked = true
      res.cork()
      process.nextTick(uncork)
    }
    if (!res.write(frame)) await drainedOrClosed(res)
  }
  let inOrder: Promise<void> = Promise.resolve()
  let queued = 0
  onInject?.(frame => {
    inOrder = inOrder.then(() => write(frame))
  })
  try {
    for await (const frame of frames) {
      if (!transform) {
        await write(frame)
      } else {
        const outgoing = transform(frame)
        queued++
        inOrder = inOrder.then(() => outgoing).then(write).finally(() => queued--)
        if (queued > 256) await inOrder // bound memory when the disk is slower than the stream
      }
      if (res.destroyed) break
    }
  } catch {
    // upstream dropped, or the client went away: both end below
  } finally {
    await inOrder
    body.destroy()
    if (!res.destroyed) res.end()
  }
}
