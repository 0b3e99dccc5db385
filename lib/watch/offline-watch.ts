// An offline watch, streamed: the cached state as ADDED events (through the client's filters), the
// annotated BOOKMARK that ends WatchList's initial events, then BOOKMARKs at the client's version
// until the cloud is back (the caller ends it) or timeoutSeconds runs out. lib/cache/offline.ts
// decides what it holds.
//
// A filtered offline watch is live: when what its filters read changes (the node's own pods as
// kubelet wrote them, the topology), the client gets the objects whose filtered form changed, as a
// watch from the cloud would (lib/watch/refilter.ts). Offline nothing newer is real, so the stream
// moves on to the version the pod overlay minted for the change (lib/overlay/pod-overlay.ts), and
// every client, client-node's informer too, takes the event as news.
import { bookmarkFrame, eventFrameParts } from '../api/watch-event-frames.ts'
import type { OfflineWatchStart } from '../cache/offline.ts'
import type { CachedObject } from '../cache/types.ts'
import { bodyIn } from '../cache/translate.ts'
import { storedBody } from '../cache/list-body.ts'
import { numericVersion } from '../cache/versions.ts'
import { FilteredWatch } from './refilter.ts'
import type { RefilterableWatch } from './filtered-watches.ts'
import { writeAsTaken } from './frame-sink.ts'
import type { Frame, FrameSink } from './frame-sink.ts'

export interface OfflineWatch {
  /** ends the stream cleanly, so the client re-watches (against the cloud, once it is back) */
  end(): void
}

/** How a filtered offline watch learns that its filters' inputs changed. */
export interface LiveOptions {
  register(watch: RefilterableWatch): () => void
}

export interface OfflineWatchOptions {
  bookmarkIntervalMs: number
  stallMs?: number
  onStalled?(): void
  live?: LiveOptions
}

/** The cached objects in the watch's format (a translated copy where the cache holds the other). */
export function inFormat(objects: readonly CachedObject[], format: OfflineWatchStart['format']): CachedObject[] {
  return objects.map(o => (o.format === format ? o : { ...o, format, body: bodyIn(o, format) }))
}

export function runOfflineWatch(start: OfflineWatchStart, sink: FrameSink, options: OfflineWatchOptions): OfflineWatch {
  const { format, filter, kind, apiVersion } = start
  const { bookmarkIntervalMs, stallMs = 60_000, onStalled, live } = options
  let streamVersion = start.resourceVersion
  // frames of the hub's own (re-filtered objects) wait for the initial state, then go in order
  let flowing = false
  const waiting: (() => Frame[])[] = []
  const inject = (produce: () => Frame[]) => {
    if (!flowing) waiting.push(produce)
    else for (const frame of produce()) sink.write(frame)
  }
  const tracker = filter && live ? new FilteredWatch(format, filter, inject, { startResourceVersion: streamVersion }) : undefined
  const unregister =
    tracker && live
      ? live.register({
          settle: () => tracker.settle(),
          refilter: (moveTo, affects) => {
            // BOOKMARKs from then on at the version the stream moved to
            if (moveTo !== undefined && moveTo > numericVersion(streamVersion)) streamVersion = moveTo.toString()
            tracker.refilter(moveTo, affects)
          },
        })
      : undefined
  const initialObjects = tracker ? inFormat(start.initial, format) : start.initial
  if (tracker && start.initial.length === 0) tracker.seed(inFormat(start.state, format))
  const version = numericVersion(start.resourceVersion)
  // "state, then changes": the cached state as ADDED events, like the apiserver's initial events
  function* initial(): Generator<Frame> {
    for (const o of initialObjects) {
      if (tracker) {
        yield* tracker.takeObject('ADDED', o, version)
        continue
      }
      const out = storedBody(o, format, filter)
      if (out) yield eventFrameParts(format, 'ADDED', o.apiVersion, o.kind, out)
    }
  }
  const timers: NodeJS.Timeout[] = []
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    for (const timer of timers) clearTimeout(timer)
    unregister?.()
    tracker?.close()
    sink.end()
  }
  void writeAsTaken(sink, initial(), stallMs).then(whole => {
    if (ended) return
    // a client that stopped reading its initial state is cut off: it must not take it as whole
    if (!whole) {
      onStalled?.()
      unregister?.()
      tracker?.close()
      return sink.abort()
    }
    if (start.initialEventsEnd) sink.write(bookmarkFrame(format, kind, apiVersion, start.resourceVersion, true))
    flowing = true
    for (const produce of waiting.splice(0)) for (const frame of produce()) sink.write(frame)
    if (start.allowBookmarks) timers.push(setInterval(() => sink.write(bookmarkFrame(format, kind, apiVersion, streamVersion, false)), bookmarkIntervalMs))
  })
  if (start.timeoutSeconds > 0) timers.push(setTimeout(end, start.timeoutSeconds * 1000))
  sink.onClose(end)
  return { end }
}
