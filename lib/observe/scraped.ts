// The series read from the hub's own running state at each scrape (the cache's health and
// collections, the filters' tallies, the shared watch caches): nothing is counted twice on the
// request path, and lib/observe/metrics.ts wires where each is read from.
import { Counter, Gauge } from 'prom-client'
import type { Registry } from 'prom-client'
import { resourceDirName } from '../cache/types.ts'
import type { Collection } from '../cache/collection.ts'

/** What one response filter did so far (filters/registry.ts keeps the counts). */
export interface FilterTally {
  name: string
  ran: number
  changed: number
  dropped: number
  failed: number
}

/** How well the cache keeps its promise: failed writes (retried), objects not on disk yet, bodies lost, answers refused. */
export interface CacheHealth {
  writeFailures: number
  unsaved: number
  lost: number
  /** the disk cache is in use at all (the cache dir could be locked and written at start) */
  enabled: boolean
  /** everything memory holds is on disk */
  durable: boolean
  /** scopes whose cached lists are refused offline until listed whole again */
  incomplete: number
  /** answers not kept: of another kind than their resource's, or too large for the disk */
  rejectedKind: number
  tooLarge: number
  /** lists older than what their scope had seen: the apiserver's history went back */
  newHistories: number
}

/** What the shared watch caches say of themselves (lib/watch/watch-caches.ts describe()). */
export interface WatchCacheState {
  resource: string
  scope: string
  format: string
  watchers: number
  replayed: number
  expired: number
  /** the event window's bytes (--watch-window-memory bounds it) */
  windowBytes: number
}

/** Where the scraped series read from; set (and reset) by observeCache, observeFilters, observeWatchCaches. */
export interface ScrapeSources {
  collections: () => Collection[]
  cacheHealth: () => CacheHealth
  filterTallies: () => readonly FilterTally[]
  watchCaches: () => WatchCacheState[]
}

export function scrapeSources(): ScrapeSources {
  return {
    collections: () => [],
    cacheHealth: () => ({
      writeFailures: 0,
      unsaved: 0,
      lost: 0,
      enabled: true,
      durable: true,
      incomplete: 0,
      rejectedKind: 0,
      tooLarge: 0,
      newHistories: 0,
    }),
    filterTallies: () => [],
    watchCaches: () => [],
  }
}

export function registerScraped(registry: Registry, from: ScrapeSources): void {
  const registers = [registry]
  const counterFrom = (value: (h: CacheHealth) => number) =>
    function (this: Counter) {
      this.reset()
      this.inc(value(from.cacheHealth()))
    }
  const fromHealth = (value: (h: CacheHealth) => number) =>
    function (this: Gauge) {
      this.set(value(from.cacheHealth()))
    }
  new Counter({
    name: 'outpost_cache_write_failures_total',
    help: 'Cache writes (and removals) the disk refused; each is kept in memory and retried until it lands',
    registers,
    collect: counterFrom(h => h.writeFailures),
  })
  new Gauge({
    name: 'outpost_cache_enabled',
    help: '1 when the disk cache is in use (offline autonomy on); 0 when the cache dir could not be used at start (/v1/readyz says why)',
    registers,
    collect: fromHealth(h => (h.enabled ? 1 : 0)),
  })
  new Gauge({
    name: 'outpost_cache_durable',
    help: '1 when everything the cache holds in memory is on disk; 0 while writes fail (kept in memory, retried; /v1/readyz says why)',
    registers,
    collect: fromHealth(h => (h.enabled && h.durable ? 1 : 0)),
  })
  new Gauge({
    name: 'outpost_cache_incomplete_scopes',
    help: 'Cached scopes not known to be whole (damaged files, an event not recorded, an object too large): offline, their lists answer 503 until listed again',
    registers,
    collect: fromHealth(h => h.incomplete),
  })
  new Counter({
    name: 'outpost_cache_rejected_objects_total',
    help: 'Answers the cache did not keep: kind (not of the resource the request named) or too-large (over what the disk takes); relayed as usual',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset()
      const h = from.cacheHealth()
      this.inc({ reason: 'kind' }, h.rejectedKind)
      this.inc({ reason: 'too-large' }, h.tooLarge)
    },
  })
  new Counter({
    name: 'outpost_cache_new_histories_total',
    help: "Lists older than what their scope had already seen (the apiserver's history went back, e.g. etcd restored): the scope was replaced",
    registers,
    collect: counterFrom(h => h.newHistories),
  })
  new Gauge({
    name: 'outpost_cache_unsaved_objects',
    help: 'Objects whose latest state is not on disk yet because a write failed (retried with backoff)',
    registers,
    collect: fromHealth(h => h.unsaved),
  })
  new Gauge({
    name: 'outpost_cache_lost_objects',
    help: 'Cached objects whose file vanished or broke: offline answers that would include them are 503 until the cloud relists them',
    registers,
    collect: fromHealth(h => h.lost),
  })
  const perCollection = (value: (c: Collection) => number) =>
    function (this: Gauge<'component' | 'resource'>) {
      this.reset()
      for (const c of from.collections()) this.set({ component: c.key.component, resource: resourceDirName(c.key) }, value(c))
    }
  const collectionLabels =
    'component: a component with a disk cache (--cache-components; with *, the first 32 seen), or shared-json and shared-protobuf (the shared watch caches); resource: <resource>.<version>.<group> of what it read'
  new Gauge({
    name: 'outpost_cache_objects',
    help: `Objects in the cache, by component and resource (${collectionLabels})`,
    labelNames: ['component', 'resource'],
    registers,
    collect: perCollection(c => c.entries.size),
  })
  new Gauge({
    name: 'outpost_cache_bytes',
    help: 'Bytes of cached object bodies, by component and resource (as outpost_cache_objects)',
    labelNames: ['component', 'resource'],
    registers,
    collect: perCollection(c => c.bytes()),
  })

  // the filters count what they do in plain numbers (filters/registry.ts), read here when scraped:
  // a label lookup per filtered object costs more than the filter itself on small objects
  const perFilter = (value: (t: FilterTally) => number) =>
    function (this: Counter<'filter'>) {
      this.reset()
      for (const t of from.filterTallies()) if (value(t) > 0) this.inc({ filter: t.name }, value(t))
    }
  for (const [name, help, value] of [
    ['outpost_filter_invocations_total', 'Objects a response filter ran on, by filter', (t: FilterTally) => t.ran],
    ['outpost_filter_changed_objects_total', 'Objects a response filter rewrote, by filter', (t: FilterTally) => t.changed],
    ['outpost_filter_dropped_objects_total', 'Objects a response filter kept from the client, by filter', (t: FilterTally) => t.dropped],
    [
      'outpost_filter_failures_total',
      'Objects a response filter could not read and let pass unfiltered, by filter (the first is logged)',
      (t: FilterTally) => t.failed,
    ],
  ] as const) {
    new Counter({ name, help: `${help}; filter: one of the hub's filters (/debug/filters)`, labelNames: ['filter'], registers, collect: perFilter(value) })
  }

  const scopeLabels = 'resource: one of --shared-resources; scope: the one scope the hub watches it in; format: json or protobuf'
  new Gauge({
    name: 'outpost_watch_cache_watchers',
    help: `Local watches served by each shared watch cache (${scopeLabels})`,
    labelNames: ['resource', 'scope', 'format'],
    registers,
    collect(this: Gauge<'resource' | 'scope' | 'format'>) {
      this.reset()
      for (const c of from.watchCaches()) this.inc({ resource: c.resource, scope: c.scope, format: c.format }, c.watchers)
    },
  })
  new Gauge({
    name: 'outpost_watch_cache_window_bytes',
    help: `Bytes of the recent events a shared watch cache keeps for resumed watches, with the objects they replaced and their frames; bounded by --watch-window-memory (${scopeLabels})`,
    labelNames: ['resource', 'scope', 'format'],
    registers,
    collect(this: Gauge<'resource' | 'scope' | 'format'>) {
      this.reset()
      for (const c of from.watchCaches()) this.inc({ resource: c.resource, scope: c.scope, format: c.format }, c.windowBytes)
    },
  })
  new Counter({
    name: 'outpost_watch_cache_replayed_events_total',
    help: `Events replayed from a shared watch cache's window to watches that resumed from a version (${scopeLabels})`,
    labelNames: ['resource', 'scope', 'format'],
    registers,
    collect: growth(() => from.watchCaches().map(c => [c, c.replayed])),
  })
  new Counter({
    name: 'outpost_watch_cache_expired_total',
    help: `Watches a shared watch cache told 410 Expired: their version was older than its window (${scopeLabels})`,
    labelNames: ['resource', 'scope', 'format'],
    registers,
    collect: growth(() => from.watchCaches().map(c => [c, c.expired])),
  })
}

type ScopeLabels = Pick<WatchCacheState, 'resource' | 'scope' | 'format'>

/**
 * A counter over running counts that start again at 0 (a watch cache nobody uses is dropped, and
 * made anew when asked for): each scrape adds what each count grew by since the last, so the series
 * never goes down. What a cache counted between the last scrape and its drop is not seen.
 */
function growth(read: () => [ScopeLabels, number][]) {
  const last = new Map<string, number>()
  return function (this: Counter<'resource' | 'scope' | 'format'>) {
    const seen = new Set<string>()
    for (const [c, count] of read()) {
      const labels = { resource: c.resource, scope: c.scope, format: c.format }
      const key = `${c.resource}\0${c.scope}\0${c.format}`
      seen.add(key)
      const before = last.get(key) ?? 0
      this.inc(labels, count >= before ? count - before : count)
      last.set(key, count)
    }
    for (const key of last.keys()) if (!seen.has(key)) last.delete(key)
  }
}
