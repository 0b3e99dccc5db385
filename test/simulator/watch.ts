// One watch response: newline-delimited `{"type":…,"object":…}` events, headers flushed at once.
// Starts with synthetic ADDED events (resourceVersion unset or "0") or replays the window after
// resourceVersion N (ERROR 410 Expired when N is compacted), then follows live writes. Selectors
// behave like the apiserver's watch cache: an object that stops matching is sent as DELETED, one
// that starts matching as ADDED. WatchList (sendInitialEvents=true) sends the current state whatever
// the resourceVersion, then the BOOKMARK annotated k8s.io/initial-events-end that ends it.

import type { ServerResponse } from 'node:http'
import { failure } from '../../lib/api/status.ts'
import type { FieldSelector, LabelSelector } from '../../lib/api/selectors.ts'
import { matches, parseRV, tooLarge, type Cluster } from './cluster.ts'
import { sortKeys } from './objects.ts'
import { watchContentType, watchEventBytes } from './protobuf.ts'
import { bookmarkObject, renderObject, type Output } from './render.ts'
import type { ResourceEntry } from './resources.ts'
import type { StoreEvent } from './store.ts'
import { isHttp2 } from './h2.ts'

export interface WatchParams {
  entry: ResourceEntry
  namespace?: string
  name?: string
  labelSelector?: LabelSelector
  fieldSelector?: FieldSelector
  /** '' or '0': start with the current state; otherwise replay after it */
  resourceVersion: string
  /** true: the current state (resourceVersion is only a lower bound); false: no initial state, even for '' and '0' */
  sendInitialEvents?: boolean
  allowBookmarks: boolean
  bookmarkIntervalMs: number
  timeoutSeconds?: number
  output: Output
}

export class WatchStream {
  private unsubscribe: (() => void) | undefined
  private bookmarkTimer: NodeJS.Timeout | undefined
  private timeoutTimer: NodeJS.Timeout | undefined
  private lastRV = 0
  private closed = false
  /** blackholed: nothing more is written, the socket is left open */
  private silenced = false
  private readonly startRV: number | undefined

  /** Validates the parameters (throws ApiError before anything is written). */
  constructor(
    private readonly res: ServerResponse,
    private readonly cluster: Cluster,
    private readonly params: WatchParams,
    private readonly onDone: (w: WatchStream) => void,
  ) {
    const rv = params.resourceVersion
    this.startRV = rv === '' || rv === '0' ? undefined : parseRV(rv)
    const current = cluster.store.currentRV()
    // NotOlderThan a resourceVersion the store has not reached: the watch cache waits 3 s for it, then gives up
    if (params.sendInitialEvents && this.startRV !== undefined && this.startRV > current) throw tooLarge(this.startRV, current)
  }

  start(headers: Record<string, string>): void {
    const { res, params, cluster } = this
    res.on('close', () => this.cleanup())
    res.on('error', () => this.cleanup())
    res.writeHead(200, { ...headers, 'Content-Type': watchContentType(params.output), ...(isHttp2(res) ? {} : { 'Transfer-Encoding': 'chunked' }) })
    res.flushHeaders()
    const store = cluster.store
    const fromState = params.sendInitialEvents ?? this.startRV === undefined
    if (fromState || this.startRV === undefined) {
      this.lastRV = store.currentRV()
      if (fromState) {
        for (const [, obj] of store.snapshot(params.entry.storageKey)) {
          const converted = cluster.registry.convertFromStorage(params.entry, obj)
          if (this.matches(converted)) this.send('ADDED', converted)
        }
      }
      // like the cacher's isListWatchRequest: the end of the state is marked only for bookmark-aware clients
      if (params.sendInitialEvents && params.allowBookmarks) this.bookmark(true)
    } else {
      const events = store.eventsAfter(this.startRV)
      if (events === 'expired') {
        this.write({ type: 'ERROR', object: failure(410, 'The resourceVersion for the provided watch is too old.', 'Expired') })
        this.end()
        return
      }
      this.lastRV = this.startRV
      for (const ev of events) this.onEvent(ev)
    }
    this.unsubscribe = store.subscribe(ev => this.onEvent(ev))
    if (params.allowBookmarks && params.bookmarkIntervalMs > 0) {
      this.bookmarkTimer = setInterval(() => this.bookmark(), params.bookmarkIntervalMs)
      this.bookmarkTimer.unref()
    }
    if (params.timeoutSeconds !== undefined && params.timeoutSeconds > 0) {
      this.timeoutTimer = setTimeout(() => this.end(), params.timeoutSeconds * 1000)
      this.timeoutTimer.unref()
    }
  }

  private matches(obj: any): boolean {
    const p = this.params
    return matches(p.entry, obj, {
      namespace: p.entry.namespaced ? p.namespace : undefined,
      name: p.name,
      labelSelector: p.labelSelector,
      fieldSelector: p.fieldSelector,
    })
  }

  private onEvent(ev: StoreEvent): void {
    if (this.closed || ev.storageKey !== this.params.entry.storageKey) return
    // the cacher sends a watcher nothing at or below the version it watches from
    if (this.startRV !== undefined && ev.rv <= this.startRV) return
    const { registry } = this.cluster
    const entry = this.params.entry
    const prev = ev.prev && registry.convertFromStorage(entry, ev.prev)
    const prevMatch = prev !== undefined && this.matches(prev)
    if (ev.type === 'DELETED') {
      if (prevMatch) this.send('DELETED', registry.convertFromStorage(entry, ev.object))
    } else {
      const cur = registry.convertFromStorage(entry, ev.object)
      const curMatch = this.matches(cur)
      if (curMatch) this.send(prevMatch ? 'MODIFIED' : 'ADDED', cur)
      else if (prevMatch) {
        // stopped matching: the previous state, at this event's resourceVersion
        this.send('DELETED', { ...prev, metadata: { ...prev.metadata, resourceVersion: String(ev.rv) } })
      }
    }
    this.lastRV = Math.max(this.lastRV, ev.rv)
  }

  private send(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: any): void {
    this.write({ type, object: renderObject(this.params.entry, obj, this.params.output) })
  }

  private bookmark(initialEventsEnd = false): void {
    const { entry, output } = this.params
    // a watch from a version this history has not reached (etcd restored from a backup) hears nothing
    if (this.startRV !== undefined && this.cluster.store.currentRV() < this.startRV) return
    const rv = String(Math.max(this.lastRV, this.cluster.store.currentRV()))
    let object = bookmarkObject(entry, rv, output)
    // storage.AnnotateInitialEventsEndBookmark; a Table's metadata is a ListMeta, with no annotations
    if (initialEventsEnd && output.kind !== 'table') {
      const metadata = { ...object.metadata, annotations: { 'k8s.io/initial-events-end': 'true' } }
      object = { ...object, metadata: entry.custom && output.kind === 'json' ? sortKeys(metadata) : metadata }
    }
    this.write({ type: 'BOOKMARK', object })
  }

  private write(event: unknown): void {
    if (this.closed || this.silenced || this.res.destroyed || this.res.writableEnded) return
    this.res.write(watchEventBytes(event, this.params.output))
  }

  /** End the stream cleanly (timeoutSeconds, server close). */
  end(): void {
    if (!this.silenced && !this.res.writableEnded && !this.res.destroyed) this.res.end()
    this.cleanup()
  }

  /** Write nothing more, not even the end of the stream, and leave the socket open: a blackholed link. */
  silence(): void {
    this.silenced = true
    this.unsubscribe?.()
    clearInterval(this.bookmarkTimer)
    clearTimeout(this.timeoutTimer)
  }

  /** Cut the connection mid-stream, as a dropped upstream would. */
  drop(): void {
    this.cleanup()
    // over HTTP/2 the stream is reset; its connection carries others
    if (!isHttp2(this.res)) this.res.socket?.destroy()
    this.res.destroy()
  }

  private cleanup(): void {
    if (this.closed) return
    this.closed = true
    this.unsubscribe?.()
    clearInterval(this.bookmarkTimer)
    clearTimeout(this.timeoutTimer)
    this.onDone(this)
  }
}
