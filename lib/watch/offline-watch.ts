// An offline watch, streamed: the cached state as ADDED events (through the client's filters), the
// annotated BOOKMARK that ends WatchList's initial events, then BOOKMARKs at the client's version
// until the cloud is back (the caller ends it) or timeoutSeconds runs out. lib/cache/offline.ts
// decides what it holds.
import { bookmarkFrame, eventFrameParts } from '../api/watch-event-frames.ts'
import type { OfflineWatchStart } from '../cache/offline.ts'
import { bodyIn } from '../cache/translate.ts'
import { writeAsTaken } from './frame-sink.ts'
import type { FrameSink } from './frame-sink.ts'

export interface OfflineWatch {
  /** ends the stream cleanly, so the client re-watches (against the cloud, once it is back) */
  end(): void
}

export function runOfflineWatch(start: OfflineWatchStart, sink: FrameSink, bookmarkIntervalMs: number, stallMs = 60_000, onStalled?: () => void): OfflineWatch {
  const { format, filter, kind, apiVersion, resourceVersion } = start
  // "state, then changes": the cached state as ADDED events, like the apiserver's initial events
  function* initial(): Generator<Buffer | Buffer[]> {
    for (const o of start.initial) {
      const body = bodyIn(o, format)
      if (!filter) {
        yield eventFrameParts(format, 'ADDED', o.apiVersion, o.kind, body)
        continue
      }
      const out = filter.object(format, o.apiVersion, o.kind, body)
      if (out) yield eventFrameParts(format, 'ADDED', o.apiVersion, o.kind, out)
    }
  }
  const timers: NodeJS.Timeout[] = []
  let ended = false
  const end = () => {
    ended = true
    for (const timer of timers) clearTimeout(timer)
    sink.end()
  }
  void writeAsTaken(sink, initial(), stallMs).then(whole => {
    if (ended) return
    // a client that stopped reading its initial state is cut off: it must not take it as whole
    if (!whole) {
      onStalled?.()
      return sink.abort()
    }
    if (start.initialEventsEnd) sink.write(bookmarkFrame(format, kind, apiVersion, resourceVersion, true))
    if (start.allowBookmarks) timers.push(setInterval(() => sink.write(bookmarkFrame(format, kind, apiVersion, resourceVersion, false)), bookmarkIntervalMs))
  })
  if (start.timeoutSeconds > 0) timers.push(setTimeout(end, start.timeoutSeconds * 1000))
  sink.onClose(end)
  return { end }
}
