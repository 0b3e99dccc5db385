// Lists and watches a shared watch cache answers, as data for lib/front/ to write, with kube-apiserver's resourceVersion
// semantics: 0 is the cache's state (a watch begins with it as ADDED events, N replays); unset is a consistent read,
// the cache's state only once a probe proves it caught up with the apiserver (freshness.ts), else declined; NotOlderThan
// N waits for the cache to reach N; a read of the past (Exact, continue) is rebuilt from the event window or declined
// (the router tries the next source); limit/continue page that state; until a scope's first list is in, 429 with
// Retry-After, as the apiserver's watch cache answers.
import type { RequestInfo } from '../api/requestinfo.ts'
import { queryFlag } from '../api/requestinfo.ts'
import type { WireFormat } from '../api/wire-format.ts'
import type { Answer } from '../api/reply.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { scopeOf } from '../cache/scope.ts'
import { getBody, listBody, paginate } from '../cache/list-body.ts'
import { contentTypeOf, wantedRepresentations } from '../api/negotiate.ts'
import { failure, invalidResourceVersion, isStatus, notFound, tooLargeResourceVersion } from '../api/status.ts'
import { storageKey } from '../api/continue-token.ts'
import { describeScope, everything } from '../cache/scope.ts'
import { selects } from './selection.ts'
import { fieldSelectorProblem } from '../api/field-selectors.ts'
import type { WatchCache } from './cache.ts'
import { pastList } from './past-state.ts'
import type { PastList } from './past-state.ts'
import { listVersionOf } from '../cache/list-version.ts'
import type { ListVersion } from '../cache/list-version.ts'
import type { Status } from '../api/status.ts'
import type { WatchCaches } from './watch-caches.ts'
import type { WatcherOptions } from './watcher.ts'
import type { MintedRead } from '../overlay/minted.ts'
import { proofWaitMs } from './freshness.ts'
import type { ListBodies } from './list-bodies.ts'
import type { ParsedScope } from '../cache/scope.ts'

/** What a watch cache makes of a list or watch. */
export type CacheRead =
  /** not the cache's to answer (a Table, a read of the past, offline with nothing whole yet): the next source tries */
  | { kind: 'declined'; why: string }
  | { kind: 'answer'; answer: Answer }
  /** a watch to serve: a CacheWatcher over `cache` with these options, once the head is written */
  | { kind: 'watch'; cache: WatchCache; watcher: Omit<WatcherOptions, 'filter' | 'bookmarkIntervalMs' | 'onRefilterSent'>; cached?: { component: string } }

/** The wire format the client wants first, when it wants the object itself (not a Table). */
function wantedFormat(accept: string | undefined): WireFormat | undefined {
  const first = wantedRepresentations(accept)[0]
  return first?.kind === 'object' ? first.format : undefined
}

function waitFor(condition: () => boolean, ms: number, cache: WatchCache): Promise<boolean> {
  if (condition()) return Promise.resolve(true)
  return new Promise(resolve => {
    const deadline = Date.now() + ms
    const check = setInterval(() => {
      if (condition()) {
        clearInterval(check)
        resolve(true)
      } else if (Date.now() >= deadline) {
        clearInterval(check)
        resolve(false)
      }
    }, 10)
    void cache.synced.then(() => condition() && (clearInterval(check), resolve(true)))
  })
}

export interface CacheReadOptions {
  /** whether the cloud is reachable: offline, a cache never waits for what will not come */
  online: boolean
  filter?: ResponseFilter
  /** how long a request waits for a new scope's first list before a 429 */
  syncWaitMs?: number
  /** the request's resourceVersion is one the pod overlay minted offline: the current state, or a watch from now (lib/overlay/minted.ts) */
  minted?: MintedRead
}

const answer = (a: Answer): CacheRead => ({ kind: 'answer', answer: a })

/** A list or watch from the shared watch cache of its scope and format. */
export async function readWatchCache(
  caches: Pick<WatchCaches, 'cacheFor'> & Partial<Pick<WatchCaches, 'latestRevision' | 'consistentRead' | 'readFloors' | 'listBodies'>>,
  info: RequestInfo,
  accept: string | undefined,
  options: CacheReadOptions,
): Promise<CacheRead> {
  const { online } = options
  const format = wantedFormat(accept)
  if (!format) return { kind: 'declined', why: 'a watch cache answers objects, not Tables' }
  const rv = info.resourceVersion
  const invalid = invalidResourceVersion(rv)
  if (invalid) return answer(invalid)
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    return answer(failure(400, (error as Error).message))
  }
  // a field the apiserver cannot select on is its 400, before any cache is made for it
  const unsupported = fieldSelectorProblem(info.apiGroup, info.resource, scope.fields)
  if (unsupported) return answer(failure(400, unsupported, 'BadRequest'))
  const cache = caches.cacheFor(info, format)
  // the part of the cache the request selects (undefined: all of it)
  const selection = scope.id === cache.options.scope.id ? undefined : scope
  // a cache given up (its list over --max-list-bytes) declines at once: the relay answers
  if (cache.givenUp) return { kind: 'declined', why: cache.givenUp }
  const synced = await waitFor(() => cache.isSynced || cache.givenUp !== undefined, online ? (options.syncWaitMs ?? 3_000) : 200, cache)
  if (cache.givenUp) return { kind: 'declined', why: cache.givenUp }
  if (!synced) {
    if (!online) return { kind: 'declined', why: 'nothing whole on disk for this scope' } // the offline answer says why
    if (info.verb === 'get') return { kind: 'declined', why: 'the watch cache is not initialized yet' } // as the apiserver, which reads etcd then
    return answer(failure(429, `the watch cache for ${info.resource} (${describe(info)}) is not initialized yet`, 'TooManyRequests', { retryAfterSeconds: 1 }))
  }
  // a minted version is not one the cache's history has: the current state is not older than it
  const minted = options.minted === 'state' || options.minted === 'now'
  const wanted = rv === '' || rv === '0' || minted ? 0n : BigInt(rv)
  // a read of the past (Exact, a legacy resourceVersion=N with limit, a continue token's version): rebuilt from the window (past-state.ts)
  const listAt = info.verb !== 'list' ? undefined : minted ? ({ kind: 'state' } as const) : listVersionOf(info)
  if (listAt && isStatus(listAt)) return answer(listAt)
  const past = listAt && listAt.kind !== 'state' ? pastList(cache, info, listAt, online) : undefined
  if (past?.kind === 'declined') return past
  if (past?.kind === 'status') return answer(past.status)
  if (online && isConsistentRead(info, listAt) && caches.latestRevision) {
    const proof = await proveFresh(cache, caches)
    caches.consistentRead?.(cache, proof.fresh ? 'cache' : 'relayed')
    if (!proof.fresh) {
      // the apiserver's answer will be at least that revision: this client's later "any state" reads must not be older
      if (proof.revision !== undefined) caches.readFloors?.(cache).raise(info.component, proof.revision)
      return { kind: 'declined', why: proof.why }
    }
  }
  const floor = online && rv === '0' ? caches.readFloors?.(cache).floorFor(info.component, cache.resourceVersion) : undefined
  if (floor !== undefined && !(await waitFor(() => cache.resourceVersion >= floor, proofWaitMs(0), cache)))
    return { kind: 'declined', why: `this client was given ${floor} by the apiserver; the watch cache is at ${cache.resourceVersion}` }
  // a watch from a version the cache has not reached, that the apiserver has: served from the cache, which skips what the client holds
  const provenAhead = info.verb === 'watch' && online && wanted > cache.resourceVersion && (await reachedByApiserver(cache, caches, wanted))
  if (!provenAhead && wanted > cache.resourceVersion && !(await waitFor(() => cache.resourceVersion >= wanted, online ? 1_000 : 0, cache))) {
    // Online the version may be real and newer than any event of this resource (a write to another
    // resource moved etcd on: the apiserver's own watch cache asks etcd for progress then); the
    // apiserver knows it, so it answers. Offline nobody can: the apiserver's 504.
    if (online) return { kind: 'declined', why: `the watch cache is at ${cache.resourceVersion}, short of ${wanted}` }
    return answer(tooLargeResourceVersion(wanted, cache.resourceVersion))
  }
  const cached = online ? undefined : { component: cache.options.storeKey.component }
  if (info.verb === 'get') {
    await cache.written()
    return getFromWatchCache(cache, info, options.filter, cached)
  }
  if (info.verb === 'list') {
    const body = listFromCache(cache, info, scope, selection, past, options.filter, caches.listBodies)
    if (isStatus(body)) return answer(body)
    await cache.written()
    return answer({ contentType: contentTypeOf(cache.format), body, cached })
  }
  await cache.written()
  const initialEvents = queryFlag(info, 'sendInitialEvents')
  // sendInitialEvents=false with 0 or unset: "Start at Any" / "Start at Most Recent" (KEP-3157), no state first
  const noState = info.query.get('sendInitialEvents') === 'false' && (rv === '' || rv === '0')
  return {
    kind: 'watch',
    cache,
    cached,
    watcher: {
      allowBookmarks: queryFlag(info, 'allowWatchBookmarks'),
      selection,
      // unset and 0 both begin with the state as ADDED events (the API's "Get State and Start at Most Recent")
      from: noState || options.minted === 'now' ? 'now' : initialEvents || rv === '0' || rv === '' ? 'state' : wanted,
      sendInitialEvents: initialEvents,
      timeoutSeconds: Number(info.query.get('timeoutSeconds')) || undefined,
    },
  }
}

/**
 * A list's body from the cache: the state now, or the past rebuilt; one page of it, through the
 * filters. A whole list of the state now is kept as its bytes (list-bodies.ts) and written again
 * while neither the cache nor what the filters read has changed.
 */
function listFromCache(
  cache: WatchCache,
  info: RequestInfo,
  scope: ParsedScope,
  selection: ParsedScope | undefined,
  past: Extract<PastList, { kind: 'items' }> | undefined,
  filter: ResponseFilter | undefined,
  bodies: ListBodies | undefined,
): Buffer | Buffer[] | Status {
  const whole = !past && !info.query.get('continue') && (!(Number(info.query.get('limit')) > 0) || info.resourceVersion === '0')
  const filters = filter?.generation
  const keeps = bodies && whole && (!filter || (filters && filter.recording)) ? bodies : undefined
  const key = `${cache.id}|${selection?.id ?? ''}|${filter?.names.join(',') ?? ''}`
  const stamp = { generation: cache.generation, resourceVersion: cache.resourceVersion, filters }
  const kept = keeps?.get(key, stamp)
  if (kept) return kept
  const snapshot = past ?? cache.snapshot()
  const { resourceVersion } = snapshot
  const items = selection ? snapshot.items.filter(object => selects(selection, object)) : snapshot.items
  const page = paginate(info, items, resourceVersion.toString(), scope)
  if (isStatus(page)) return page
  const meta: Record<string, unknown> = { resourceVersion: resourceVersion.toString() }
  if (page.continue) meta.continue = page.continue
  if (page.remainingItemCount !== undefined) meta.remainingItemCount = page.remainingItemCount
  const make = () => listBody(cache.format, cache.kind, cache.apiVersion, page, meta, filter)
  if (!keeps) return make()
  const made = filter?.recording ? filter.recording(make) : { value: make(), failed: false, replay: () => {} }
  const body = Buffer.concat(made.value)
  if (!made.failed) keeps.set(key, stamp, body, made.replay)
  return body
}

/**
 * A read that must show every write acknowledged before it began: a list with no resourceVersion
 * (not a continue token's page, which reads at the token's version), and a watch with none that
 * sends the state first (legacy "Get State and Start at Most Recent", and WatchList, how informers
 * start from 1.35). kube-apiserver answers them from etcd, or from its watch cache once proven fresh.
 */
export function isConsistentRead(info: RequestInfo, listAt: ListVersion | Status | undefined): boolean {
  if (info.resourceVersion !== '') return false
  if (info.verb === 'list') return listAt !== undefined && !isStatus(listAt) && listAt.kind === 'state'
  return info.verb === 'watch' && info.query.get('sendInitialEvents') !== 'false'
}

type Prober = Partial<Pick<WatchCaches, 'latestRevision'>>

/** The apiserver's current revision (probed) and how long to wait for the cache to reach it, or why it is not known. */
async function probed(cache: WatchCache, caches: Prober): Promise<{ revision: bigint; waitMs: number } | string> {
  try {
    return (await caches.latestRevision?.(cache)) ?? 'this cache has no proof of freshness'
  } catch (error) {
    return `the apiserver's current revision is not known: ${(error as Error).message}`
  }
}

/** Whether the apiserver's current revision has reached `version`: a version a client was given, not one it made up. */
async function reachedByApiserver(cache: WatchCache, caches: Prober, version: bigint): Promise<boolean> {
  const proof = await probed(cache, caches)
  return typeof proof !== 'string' && proof.revision >= version
}

/**
 * Fresh once the cache has reached the apiserver's current revision, or why it is not proven (with
 * the revision, when known): the read is then relayed, never answered from a cache that may be behind.
 */
async function proveFresh(cache: WatchCache, caches: Prober): Promise<{ fresh: true } | { fresh: false; why: string; revision?: bigint }> {
  const proof = await probed(cache, caches)
  if (typeof proof === 'string') return { fresh: false, why: `a consistent read, and ${proof}` }
  const { revision, waitMs } = proof
  if (cache.resourceVersion >= revision) return { fresh: true }
  // the event that reaches the revision is here and being written: worth the wait. Otherwise it is
  // not coming (another resource moved etcd on: the apiserver's watch brings its events faster than a
  // list's round trip), and waiting would only delay the relay
  if (cache.receivedVersion >= revision && (await waitFor(() => cache.resourceVersion >= revision, waitMs, cache))) return { fresh: true }
  return { fresh: false, revision, why: `a consistent read: the watch cache is at ${cache.resourceVersion}, the apiserver at ${revision}` }
}

/**
 * A get at resourceVersion=0, as the apiserver answers it from its watch cache: the object as held,
 * in the cache's format. A cache of the whole resource that does not hold it says 404; kubelet's pods
 * cache holds only this node's, so a pod it does not hold is another source's to answer.
 */
function getFromWatchCache(cache: WatchCache, info: RequestInfo, filter: ResponseFilter | undefined, cached: { component: string } | undefined): CacheRead {
  const object = cache.objects.get(storageKey(info.namespace, info.name))
  const whole = cache.options.scope.id === everything.id
  if (!object && !whole) return { kind: 'declined', why: `the cache holds only ${describeScope(cache.options.scope)}` }
  const gone = notFound(info.resource, info.apiGroup, info.name)
  if (!object) return answer(gone)
  const out = getBody(object, cache.format, filter)
  if (out === null) return answer(gone) // the client's filters drop it
  return answer({ contentType: contentTypeOf(cache.format), body: out, cached })
}

function describe(info: RequestInfo): string {
  return (
    [
      info.namespace && `namespace ${info.namespace}`,
      info.labelSelector && `labels ${info.labelSelector}`,
      info.fieldSelector && `fields ${info.fieldSelector}`,
    ]
      .filter(Boolean)
      .join(', ') || 'all'
  )
}
