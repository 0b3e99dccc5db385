// Answers reads from the cache while the cloud is unreachable, for clients acting as the node,
// shaped like the apiserver's answers: objects, lists with limit/continue, watch streams with
// BOOKMARKs and WatchList's initial events, kubectl's Tables. The client's own component's cache
// answers first; else whatever the node holds for that resource and scope in any component's
// cache, freshest first. Formats follow the apiserver's negotiation (JSON for `*/*`), translated
// field by field for the kinds the hub knows. It answers only what the cache knows whole: a scope
// never listed, or one with objects whose bodies are lost, is a 503 that says so, never a short list.
import type { RequestInfo } from '../api/requestinfo.ts'
import { queryFlag } from '../api/requestinfo.ts'
import type { CachedObject } from './types.ts'
import type { CacheStore } from './store.ts'
import { LostObjectError } from './store.ts'
import { scopeOfName } from './scope.ts'
import type { ParsedScope, Scope } from './scope.ts'
import { fieldSelectorProblem } from '../api/field-selectors.ts'
import { failure, invalidResourceVersion, isStatus, notFound, serviceUnavailable, tooLargeResourceVersion } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import { contentTypeOf, wantedRepresentations } from '../api/negotiate.ts'
import type { Wanted } from '../api/negotiate.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { asJson, bodyIn, canTranslate } from './translate.ts'
import { toTable } from '../api/tables.ts'
import type { Collection } from './collection.ts'
import { numericVersion } from './versions.ts'
import { scopeOf } from './scope.ts'
import { resourceKeyOf } from './types.ts'
import { listStatesPresent } from '../api/requestinfo.ts'
import type { WireFormat } from '../api/wire-format.ts'
import type { Answer, Reply } from '../api/reply.ts'
import { getBody, listBody, paginate } from './list-body.ts'
import { listVersionOf, pastExpired } from './list-version.ts'

/** A body from the cache, marked as such (curl -i shows it, and whose copy answered). */
function cachedReply(contentType: string, body: Buffer | Buffer[] | string, component: string): Reply {
  return { contentType, body: typeof body === 'string' ? Buffer.from(body) : body, cached: { component } }
}

/** One read to answer from the cache, and why the cloud is not answering it (for every refusal). */
export interface OfflineRead {
  store: CacheStore
  info: RequestInfo
  accept: string | undefined
  /** applied to what the cache answers, as to what the cloud answers: the cache holds unfiltered objects */
  filter?: ResponseFilter
  /** the cloud's failure, e.g. `no apiserver reachable: https://…: connect ECONNREFUSED` */
  reason: string
}

function lostStatus({ info, reason }: OfflineRead, error: LostObjectError): Status {
  return serviceUnavailable(`${reason}; the cache cannot answer ${info.verb} ${info.resource} whole: ${error.message}`)
}

function unlisted({ info, reason }: OfflineRead, candidates: Collection[], scope: ParsedScope): Status {
  const incomplete = candidates.map(c => c.whyIncomplete(scope)).find(why => why !== undefined)
  if (incomplete)
    return serviceUnavailable(
      `${reason}; the hub's copy of ${asked(info, scope)} is incomplete, so it does not answer until the apiserver lists it whole again: ${incomplete}`,
    )
  // who listed what: one client's view (kubelet's own pods) does not answer for another's (all pods)
  const byWho = new Map<string, Set<string>>()
  for (const c of candidates)
    for (const l of c.listed.values()) byWho.set(listedBy(c.key.component), (byWho.get(listedBy(c.key.component)) ?? new Set()).add(selection(l.scope)))
  const why =
    byWho.size === 0
      ? `nothing on this node ever listed ${info.resource} through this hub, so nothing is cached to answer ${asked(info, scope)} with`
      : `the hub holds ${info.resource} only as ${[...byWho].map(([listed, scopes]) => `${listed} (${[...scopes].join('; ')})`).join(' and ')}; this request asks for ${asked(info, scope)}, which that does not cover`
  return serviceUnavailable(`${reason}; ${why}`)
}

/** A cache's component in words: the hub's own collections have internal names that mean nothing to a user. */
export function who(component: string): string {
  if (component.startsWith('shared-')) return "the hub's shared watch cache"
  if (component === 'outpost') return 'the hub itself'
  if (component === '') return 'a client that did not name itself'
  return component
}

/** Who listed a collection's scopes: a shared watch cache lists for whichever clients asked, unnamed. */
function listedBy(component: string): string {
  return component.startsWith('shared-') ? "clients listed them through the hub's shared watch cache" : `${who(component)} listed them`
}

/** A listed scope's selectors, briefly: `spec.nodeName=kind-worker2`, `namespace default, app=web`, `all namespaces`. */
function selection(scope: Scope): string {
  const parts = [scope.namespace && `namespace ${scope.namespace}`, scope.labelSelector, scope.fieldSelector].filter(Boolean)
  return parts.length > 0 ? parts.join(', ') : 'all namespaces'
}

/** What a request asks for: `pods in all namespaces`, `pods in namespace default with app=web`, `pods named default/web-1`. */
function asked(info: RequestInfo, scope: Scope): string {
  if (info.name) return `${info.resource} named ${info.namespace ? `${info.namespace}/` : ''}${info.name}`
  const where = scope.namespace ? `in namespace ${scope.namespace}` : 'in all namespaces'
  const selectors = [scope.labelSelector, scope.fieldSelector].filter(Boolean).join(', ')
  return `${info.resource} ${where}${selectors ? ` with ${selectors}` : ''}`
}

/**
 * The representation to answer with, from what the client accepts (in its order) and what the
 * objects are stored as; a Status when none can be made.
 */
function choose({ info, accept, reason }: OfflineRead, items: CachedObject[], source: Collection | undefined, tables = true): Wanted | Status {
  const stored = new Set(items.map(o => o.format))
  const translatable = items.every(canTranslate) && (items.length > 0 || (source !== undefined && canTranslate(source)))
  for (const wanted of wantedRepresentations(accept)) {
    if (wanted.kind === 'table') {
      if (tables) return wanted
      continue
    }
    if (stored.size === 0 || (stored.size === 1 && stored.has(wanted.format)) || translatable) return wanted
  }
  const where = source ? `; ${who(source.key.component)} holds them, see /debug/cache/${source.key.component}/${info.resource}` : ''
  return serviceUnavailable(
    `${reason}; ${info.resource} are cached as ${[...stored].join(' and ')}, which the hub cannot give in the format this request accepts (${accept ?? '*/*'})${where}`,
  )
}

/**
 * The freshest copy of one object among the collections (the client's own first among equals):
 * newest wins. Throws LostObjectError when a copy's body cannot be read.
 */
export async function freshestCopy(
  store: CacheStore,
  candidates: readonly Collection[],
  namespace: string,
  name: string,
): Promise<{ object: CachedObject; source: Collection } | undefined> {
  let best: { object: CachedObject; source: Collection } | undefined
  for (const source of candidates) {
    const object = await store.get(source.key, namespace, name)
    if (object && (!best || numericVersion(object.resourceVersion) > numericVersion(best.object.resourceVersion))) best = { object, source }
  }
  return best
}

/** A get, answered from the freshest copy any component holds. */
export async function getFromCache(read: OfflineRead): Promise<Answer> {
  const { store, info, filter } = read
  const candidates = await store.candidates(resourceKeyOf(info))
  let found
  try {
    found = await freshestCopy(store, candidates, info.namespace, info.name)
  } catch (error) {
    if (error instanceof LostObjectError) return lostStatus(read, error)
    throw error
  }
  const { object, source } = found ?? {}
  if (!object || !source) {
    // "not found" is the cache's to say only where a whole list would have held the object
    const scope = scopeOfName(info.namespace, info.name)
    return candidates.some(c => c.coveringScope(scope)) ? notFound(info.resource, info.apiGroup, info.name) : unlisted(read, candidates, scope)
  }
  const wanted = choose(read, [object], source)
  if (isStatus(wanted)) return wanted
  const from = source.key.component
  if (wanted.kind === 'table') return cachedReply('application/json', JSON.stringify(table(info, [object], {})), from)
  const body = getBody(object, wanted.format, filter)
  if (body === null) return notFound(info.resource, info.apiGroup, info.name) // the client's filters drop it
  return cachedReply(contentTypeOf(wanted.format), body, from)
}

interface Whole {
  items: CachedObject[]
  resourceVersion: string
  collection: Collection
}

/** A scope's objects from the first collection that knows it whole, else the Status that says why not. */
async function selectWhole(read: OfflineRead, scope: ParsedScope): Promise<Whole | Status> {
  const { store, info } = read
  const candidates = await store.candidates(resourceKeyOf(info))
  for (const c of candidates) {
    if (!c.coveringScope(scope)) continue
    const selection = (await store.list(c.key, scope))!
    if (selection.lost.length > 0) return lostStatus(read, new LostObjectError(selection.lost))
    return selection
  }
  return unlisted(read, candidates, scope)
}

function table(info: RequestInfo, items: readonly CachedObject[], listMeta: Record<string, unknown>): unknown {
  const include =
    info.query.get('includeObject') === 'None' || info.query.get('includeObject') === 'Object'
      ? (info.query.get('includeObject') as 'None' | 'Object')
      : 'Metadata'
  // with includeObject=Object the client gets each object whole: never one with fields missing (bodyIn throws then)
  const objects = items.map(
    o =>
      (include === 'Object' ? (JSON.parse(bodyIn(o, 'json').toString()) as Record<string, unknown>) : asJson(o)) ?? {
        kind: o.kind,
        apiVersion: o.apiVersion,
        metadata: { name: o.name, namespace: o.namespace || undefined, resourceVersion: o.resourceVersion },
      },
  )
  return toTable(info.apiGroup, info.resource, objects, listMeta, include)
}

/**
 * What the apiserver says to a list at a version the cache does not hold: `Exact` (or a legacy
 * `resourceVersion=N` with `limit`, which etcd reads at exactly N) older than the cache's version is
 * 410 Expired, as for a compacted version; a state newer than the cache's is 504 "Too large resource
 * version", as the watch cache answers after waiting for it.
 */
function versionProblem(info: RequestInfo, held: string): Status | undefined {
  const rv = info.resourceVersion
  if (rv === '' || rv === '0' || info.query.has('continue')) return undefined
  const wanted = numericVersion(rv)
  const have = numericVersion(held)
  if (wanted > have) return tooLargeResourceVersion(rv, held)
  if (!listStatesPresent(info) && wanted !== have) return failure(410, 'The resourceVersion for the provided list is too old.', 'Expired')
  return undefined
}

/** A list, answered from the first collection that holds its scope whole. */
export async function listFromCache(read: OfflineRead): Promise<Answer> {
  const { info, filter } = read
  const at = listVersionOf(info)
  if (isStatus(at)) return at
  const scope = scopeOrStatus(info)
  if (isStatus(scope)) return scope
  const whole = await selectWhole(read, scope)
  if (isStatus(whole)) return whole
  const { collection, resourceVersion } = whole
  const version = versionProblem(info, resourceVersion)
  if (version) return version
  // every page is of its token's version; the disk holds only its current one (the pod overlay moves it)
  if (at.kind === 'exact' && at.from === 'continue' && at.version !== numericVersion(resourceVersion)) return pastExpired(info, at)
  if (!collection.kind) return serviceUnavailable(`${read.reason}; the cache holds no object of ${info.resource} to tell its kind, so it cannot name the list`)
  const wanted = choose(read, whole.items, collection)
  if (isStatus(wanted)) return wanted
  const page = paginate(info, whole.items, resourceVersion, scope)
  if (isStatus(page)) return page
  const from = collection.key.component
  const meta: Record<string, unknown> = { resourceVersion }
  if (page.continue) meta.continue = page.continue
  if (page.remainingItemCount !== undefined) meta.remainingItemCount = page.remainingItemCount
  if (wanted.kind === 'table') return cachedReply('application/json', JSON.stringify(table(info, page.items, meta)), from)
  return cachedReply(contentTypeOf(wanted.format), listBody(wanted.format, collection.kind, collection.apiVersion, page, meta, filter), from)
}

/** The scope a list or watch selects; a malformed selector, or a field it cannot select on, is the apiserver's 400. */
function scopeOrStatus(info: RequestInfo): ParsedScope | Status {
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    return failure(400, (error as Error).message)
  }
  // a field the apiserver cannot select on is its 400 offline too, never an empty list
  const unsupported = fieldSelectorProblem(info.apiGroup, info.resource, scope.fields)
  return unsupported ? failure(400, unsupported, 'BadRequest') : scope
}

/**
 * An offline watch that can be answered, as data (lib/watch/offline-watch.ts streams it): from
 * resourceVersion unset or 0 (or with sendInitialEvents) the cached state as ADDED events first
 * (WatchList's end with the annotated BOOKMARK); then only BOOKMARKs (if asked for) at the version
 * the client has, so its reflector neither relists nor skips anything.
 */
export interface OfflineWatchStart {
  format: WireFormat
  /** whose copy answers */
  component: string
  kind: string
  apiVersion: string
  /** the version the client is at, in every BOOKMARK */
  resourceVersion: string
  /** sent as ADDED events first (the state), if any */
  initial: CachedObject[]
  /** what the cache holds of the scope: what the client has, once its initial events (if any) are sent */
  state: CachedObject[]
  initialEventsEnd: boolean
  allowBookmarks: boolean
  timeoutSeconds: number
  filter: ResponseFilter | undefined
}

export async function watchFromCache(read: OfflineRead): Promise<OfflineWatchStart | Status> {
  const { info, filter } = read
  const invalid = invalidResourceVersion(info.resourceVersion)
  if (invalid) return invalid
  const scope = scopeOrStatus(info)
  if (isStatus(scope)) return scope
  const whole = await selectWhole(read, scope)
  if (isStatus(whole)) return whole
  const { collection } = whole
  const wanted = choose(read, whole.items, collection, false)
  if (isStatus(wanted)) return wanted
  if (wanted.kind !== 'object') return serviceUnavailable(read.reason)
  const fromNow = !info.resourceVersion || info.resourceVersion === '0'
  const initialEvents = queryFlag(info, 'sendInitialEvents')
  return {
    format: wanted.format,
    component: collection.key.component,
    kind: collection.kind,
    apiVersion: collection.apiVersion,
    resourceVersion: fromNow || initialEvents ? whole.resourceVersion : info.resourceVersion,
    initial: fromNow || initialEvents ? whole.items : [],
    state: whole.items,
    initialEventsEnd: initialEvents,
    allowBookmarks: queryFlag(info, 'allowWatchBookmarks'),
    timeoutSeconds: Number(info.query.get('timeoutSeconds')) || 0,
    filter,
  }
}
