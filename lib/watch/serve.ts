// Lists and watches answered from a shared watch cache, with kube-apiserver's resourceVersion
// semantics: unset or 0 is the cache's state (a watch begins with it as ADDED events, N replays); NotOlderThan N waits (3 s at most) for the cache to
// reach N; a read of the past at a version other than the cache's is not the cache's to answer (the caller
// forwards it); limit/continue page the cache's snapshot; until a scope's first list is in, 429
// with Retry-After, as the apiserver's watch cache answers.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { RequestInfo } from '../api/requestinfo.ts'
import { queryFlag } from '../api/requestinfo.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { listBody, paginate } from '../cache/offline.ts'
import { contentTypeOf, wantedRepresentations } from '../api/negotiate.ts'
import { failure, tooLargeResourceVersion } from '../api/status.ts'
import { sendStatus } from '../front/respond.ts'
import type { WatchCache } from './cache.ts'
import type { WatchCaches } from './watch-caches.ts'
import { CacheWatcher } from './watcher.ts'
import { scopeOf } from '../cache/scope.ts'
import { listStatesPresent } from '../api/requestinfo.ts'
import type { WireFormat } from '../api/wire-format.ts'

export interface CacheServeOptions {
  caches: WatchCaches
  filter?: ResponseFilter
  /** BOOKMARK period of cache-served watches (the apiserver's: about a minute) */
  bookmarkIntervalMs?: number
  /** how long a request waits for a new scope's first list before a 429 */
  syncWaitMs?: number
  onRefilterSent?(count: number): void
  /** a watch is being served: returns what to call when it ends */
  watchOpened?(end: () => void): () => void
}

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

/**
 * Serves a list or watch from the cache; resolves false when the cache is not the one to answer
 * (a Table, an exact older version, offline with nothing on disk): the caller goes on as before.
 */
export async function serveFromCache(
  info: RequestInfo,
  req: IncomingMessage,
  res: ServerResponse,
  online: boolean,
  options: CacheServeOptions,
): Promise<boolean> {
  const format = wantedFormat(req.headers.accept)
  if (!format) return false
  const rv = info.resourceVersion
  if (rv !== '' && !/^\d+$/.test(rv)) {
    sendStatus(res, failure(400, `invalid resource version "${rv}"`, 'BadRequest'))
    return true
  }
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    sendStatus(res, failure(400, (error as Error).message))
    return true
  }
  const cache = options.caches.cacheFor(info, format)
  if (!(await waitFor(() => cache.isSynced, online ? (options.syncWaitMs ?? 3_000) : 200, cache))) {
    if (!online) return false // nothing whole on disk for this scope: the offline path says why
    res.setHeader('retry-after', '1')
    sendStatus(
      res,
      failure(429, `the watch cache for ${info.resource} (${describe(info)}) is not initialized yet`, 'TooManyRequests', { retryAfterSeconds: 1 }),
    )
    return true
  }
  const wanted = rv === '' || rv === '0' ? 0n : BigInt(rv)
  // a read of the past (Exact, or a legacy resourceVersion=N with limit) at another version than the cache's
  if (info.verb === 'list' && !listStatesPresent(info) && wanted !== cache.resourceVersion) return false
  if (wanted > cache.resourceVersion && !(await waitFor(() => cache.resourceVersion >= wanted, online ? 3_000 : 0, cache))) {
    sendStatus(res, tooLargeResourceVersion(wanted, cache.resourceVersion))
    return true
  }
  if (info.verb === 'list') {
    const { items, resourceVersion } = cache.snapshot()
    const page = paginate(info, items, resourceVersion.toString(), scope)
    if ('code' in page) {
      sendStatus(res, page)
      return true
    }
    const meta: Record<string, unknown> = { resourceVersion: resourceVersion.toString() }
    if (page.continue) meta.continue = page.continue
    if (page.remainingItemCount !== undefined) meta.remainingItemCount = page.remainingItemCount
    const body = listBody(cache.format, cache.kind, cache.apiVersion, page, meta, options.filter)
    await cache.written()
    res.writeHead(200, {
      'content-type': contentTypeOf(cache.format),
      'content-length': body.length,
      'cache-control': 'no-cache, private',
      ...offlineHeaders(online, cache),
    })
    res.end(body)
    return true
  }
  await cache.written()
  if (res.destroyed) return true // the client went away meanwhile
  for (const [name, value] of Object.entries(offlineHeaders(online, cache))) res.setHeader(name, value)
  const watcher = new CacheWatcher(cache, res, {
    filter: options.filter,
    allowBookmarks: queryFlag(info, 'allowWatchBookmarks'),
    // unset and 0 both begin with the state as ADDED events (the API's "Get State and Start at Most Recent")
    from: queryFlag(info, 'sendInitialEvents') || rv === '0' || rv === '' ? 'state' : wanted,
    sendInitialEvents: queryFlag(info, 'sendInitialEvents'),
    timeoutSeconds: Number(info.query.get('timeoutSeconds')) || undefined,
    bookmarkIntervalMs: options.bookmarkIntervalMs,
    onRefilterSent: options.onRefilterSent,
  })
  const ended = options.watchOpened?.(() => watcher.close('ended'))
  watcher.start()
  await watcher.done()
  ended?.()
  return true
}

/** Offline, an answer says it came from the cache, and whose (curl -i shows it). */
function offlineHeaders(online: boolean, cache: WatchCache): Record<string, string> {
  return online ? {} : { 'x-outpost-cache': 'hit', 'x-outpost-cache-source': cache.options.storeKey.component }
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
