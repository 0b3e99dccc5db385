// Answers reads from the cache while the cloud is unreachable, for clients acting as the node,
// shaped like the apiserver's answers: objects, lists with limit/continue, watch streams with
// BOOKMARKs and WatchList's initial events, kubectl's Tables. The client's own component's cache
// answers first; else whatever the node holds for that resource and scope in any component's
// cache, freshest first. Formats follow the apiserver's negotiation (JSON for `*/*`), translated
// field by field for the kinds the hub knows. It answers only what the cache knows whole: a scope
// never listed, or one with objects whose bodies are lost, is a 503 that says so, never a short list.
import type { ServerResponse } from 'node:http'
import type { RequestInfo } from '../api/requestinfo.ts'
import { queryFlag } from '../api/requestinfo.ts'
import type { CachedObject } from './types.ts'
import type { CacheStore } from './store.ts'
import { LostObjectError } from './store.ts'
import { scopeOfName } from './scope.ts'
import type { ParsedScope } from './scope.ts'
import { assembleList, encodeUnknown, encodeWatchEvent } from '../codec/protobuf.ts'
import { decodeContinue, encodeContinue, storageKey } from '../api/continue-token.ts'
import { failure, notFound, serviceUnavailable, tooLargeResourceVersion } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import { bookmarkFrame } from './bookmark.ts'
import { contentTypeOf, wantedRepresentations } from '../api/negotiate.ts'
import type { Wanted } from '../api/negotiate.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { asJson, bodyIn, canTranslate } from './translate.ts'
import { toTable } from '../api/tables.ts'
import { describeScope } from './scope.ts'
import type { Collection } from './collection.ts'
import { numericVersion } from './versions.ts'
import { scopeOf } from './scope.ts'
import { resourceKeyOf } from './types.ts'
import { listStatesPresent } from '../api/requestinfo.ts'
import type { WireFormat } from '../api/wire-format.ts'

export { protobufType } from '../api/negotiate.ts'

function sendBody(res: ServerResponse, code: number, contentType: string, body: Buffer | string, from?: string): void {
  const headers: Record<string, string | number> = {
    'content-type': contentType,
    'cache-control': 'no-cache, private',
    'content-length': Buffer.byteLength(body),
    // debugging aids: curl -i shows the answer came from the hub's cache, and whose
    'x-outpost-cache': 'hit',
  }
  if (from) headers['x-outpost-cache-source'] = from
  res.writeHead(code, headers)
  res.end(body)
}

export function sendStatusObject(res: ServerResponse, status: Status): void {
  sendBody(res, status.code, 'application/json', JSON.stringify(status))
}

/** One read to answer from the cache, and why the cloud is not answering it (for every refusal). */
export interface OfflineRead {
  store: CacheStore
  info: RequestInfo
  accept: string | undefined
  res: ServerResponse
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
      `${reason}; the cached list of ${info.resource} (${describeScope(scope)}) is incomplete, so the cache does not answer it until the apiserver lists it whole again: ${incomplete}`,
    )
  const listed = candidates.flatMap(c => [...c.listed.values()].map(l => describeScope(l.scope)))
  const why =
    listed.length === 0
      ? `nothing on this node ever listed ${info.resource} through this hub, so nothing is cached to answer with`
      : `${info.resource} were listed here only for ${[...new Set(listed)].join('; ')}, which does not answer for ${describeScope(scope)}`
  return serviceUnavailable(`${reason}; ${why}`)
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
  const where = source ? `; ${source.key.component} holds them, see /debug/cache/${source.key.component}/${info.resource}` : ''
  return serviceUnavailable(
    `${reason}; ${info.resource} are cached as ${[...stored].join(' and ')}, which the hub cannot give in the format this request accepts (${accept ?? '*/*'})${where}`,
  )
}

export async function serveGet(read: OfflineRead): Promise<void> {
  const { store, info, res, filter } = read
  const candidates = await store.candidates(resourceKeyOf(info))
  let object: CachedObject | undefined
  let source: Collection | undefined
  try {
    // the freshest copy any component holds (the client's own first among equals): newest wins
    for (const c of candidates) {
      const found = await store.get(c.key, info.namespace, info.name)
      if (!found) continue
      if (!object || numericVersion(found.resourceVersion) > numericVersion(object.resourceVersion)) {
        object = found
        source = c
      }
    }
  } catch (error) {
    if (error instanceof LostObjectError) return sendStatusObject(res, lostStatus(read, error))
    throw error
  }
  if (!object || !source) {
    // "not found" is the cache's to say only where a whole list would have held the object
    const scope = scopeOfName(info.namespace, info.name)
    return sendStatusObject(
      res,
      candidates.some(c => c.coveringScope(scope)) ? notFound(info.resource, info.apiGroup, info.name) : unlisted(read, candidates, scope),
    )
  }
  const wanted = choose(read, [object], source)
  if ('code' in wanted) return sendStatusObject(res, wanted)
  const from = source.key.component
  if (wanted.kind === 'table') return sendBody(res, 200, 'application/json', JSON.stringify(table(info, [object], {})), from)
  const raw = bodyIn(object, wanted.format)
  const encoded = wanted.format === 'json' ? raw : encodeUnknown({ apiVersion: object.apiVersion, kind: object.kind, raw })
  const body = filter ? filter.body(wanted.format, encoded) : encoded
  if (body === null) return sendStatusObject(res, notFound(info.resource, info.apiGroup, info.name)) // the client's filters drop it
  sendBody(res, 200, contentTypeOf(wanted.format), body, from)
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

function table(info: RequestInfo, items: CachedObject[], listMeta: Record<string, unknown>): unknown {
  const include =
    info.query.get('includeObject') === 'None' || info.query.get('includeObject') === 'Object'
      ? (info.query.get('includeObject') as 'None' | 'Object')
      : 'Metadata'
  const objects = items.map(
    o =>
      asJson(o) ?? {
        kind: o.kind,
        apiVersion: o.apiVersion,
        metadata: { name: o.name, namespace: o.namespace || undefined, resourceVersion: o.resourceVersion },
      },
  )
  return toTable(info.apiGroup, info.resource, objects, listMeta, include)
}

export interface Page {
  items: CachedObject[]
  continue: string
  remainingItemCount?: number
}

/** limit/continue as the apiserver pages (resourceVersion=0 reads the watch cache, which ignores limit). */
export function paginate(info: RequestInfo, items: CachedObject[], resourceVersion: string, scope: ParsedScope): Page | Status {
  // keys in tokens are relative to the list's own prefix: a namespaced list's are bare names
  const keyOf = (o: CachedObject) => (info.namespace ? o.name : storageKey(o.namespace, o.name))
  const token = info.query.get('continue')
  let start = 0
  if (token) {
    const decoded = decodeContinue(token)
    if (typeof decoded === 'string') return failure(400, decoded)
    start = items.findIndex(o => keyOf(o) >= decoded.start)
    if (start === -1) start = items.length
  }
  const limit = Number(info.query.get('limit'))
  if (!(limit > 0) || info.resourceVersion === '0') return { items: items.slice(start), continue: '' }
  const page = items.slice(start, start + limit)
  const rest = items.length - start - page.length
  if (rest <= 0) return { items: page, continue: '' }
  const next = encodeContinue({ rv: Number(resourceVersion) || 1, start: `${keyOf(page[page.length - 1])}\u0000` })
  const selectors = scope.labels.requirements.length > 0 || scope.fields.requirements.length > 0
  return selectors ? { items: page, continue: next } : { items: page, continue: next, remainingItemCount: rest }
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

export async function serveList(read: OfflineRead): Promise<void> {
  const { info, res, filter } = read
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    return sendStatusObject(res, failure(400, (error as Error).message))
  }
  const whole = await selectWhole(read, scope)
  if ('code' in whole) return sendStatusObject(res, whole)
  const { collection, resourceVersion } = whole
  const version = versionProblem(info, resourceVersion)
  if (version) return sendStatusObject(res, version)
  if (!collection.kind)
    return sendStatusObject(
      res,
      serviceUnavailable(`${read.reason}; the cache holds no object of ${info.resource} to tell its kind, so it cannot name the list`),
    )
  const wanted = choose(read, whole.items, collection)
  if ('code' in wanted) return sendStatusObject(res, wanted)
  const page = paginate(info, whole.items, resourceVersion, scope)
  if ('code' in page) return sendStatusObject(res, page)
  const from = collection.key.component
  const meta: Record<string, unknown> = { resourceVersion }
  if (page.continue) meta.continue = page.continue
  if (page.remainingItemCount !== undefined) meta.remainingItemCount = page.remainingItemCount
  if (wanted.kind === 'table') return sendBody(res, 200, 'application/json', JSON.stringify(table(info, page.items, meta)), from)
  sendBody(res, 200, contentTypeOf(wanted.format), listBody(wanted.format, collection.kind, collection.apiVersion, page, meta, filter), from)
}

/**
 * A list as the apiserver writes it, from stored objects, each through the request's filters (if
 * any; the dropped left out): protobuf reassembled from the items' raw messages, JSON spliced from
 * the stored text (no parse and re-serialize per object); objects in the other format translated.
 */
export function listBody(format: WireFormat, kind: string, apiVersion: string, page: Page, meta: Record<string, unknown>, filter?: ResponseFilter): Buffer {
  const listKind = `${kind}List`
  const items: Buffer[] = []
  const kept: CachedObject[] = []
  for (const o of page.items) {
    const body = bodyIn(o, format)
    const out = filter ? filter.object(format, o.apiVersion, o.kind, body) : body
    if (out === null) continue
    items.push(out)
    kept.push(o)
  }
  if (format === 'protobuf') {
    const raw = assembleList({ resourceVersion: String(meta.resourceVersion), continue: page.continue, remainingItemCount: page.remainingItemCount, items })
    return encodeUnknown({ apiVersion, kind: listKind, raw })
  }
  const head = `{"kind":${JSON.stringify(listKind)},"apiVersion":${JSON.stringify(apiVersion)},"metadata":${JSON.stringify(meta)},"items":[`
  const parts: Buffer[] = [Buffer.from(head)]
  items.forEach((body, i) => {
    // the apiserver writes list items without kind and apiVersion
    const typeMeta = typeMetaLength(body, kept[i].kind, kept[i].apiVersion)
    if (typeMeta === 0) parts.push(...(i === 0 ? [body] : [comma, body]))
    else parts.push(i === 0 ? openBrace : commaOpenBrace, body.subarray(typeMeta))
  })
  parts.push(closeList)
  return Buffer.concat(parts)
}

const openBrace = Buffer.from('{')
const comma = Buffer.from(',')
const commaOpenBrace = Buffer.from(',{')
const closeList = Buffer.from(']}')
const typeMetaPrefixes = new Map<string, Buffer>()

/** How many bytes of a stored JSON object are its `{"kind":…,"apiVersion":…,` (0 when it does not begin so). */
function typeMetaLength(body: Buffer, kind: string, apiVersion: string): number {
  const key = `${kind} ${apiVersion}`
  let prefix = typeMetaPrefixes.get(key)
  if (!prefix) {
    prefix = Buffer.from(`{"kind":${JSON.stringify(kind)},"apiVersion":${JSON.stringify(apiVersion)},`)
    if (typeMetaPrefixes.size < 1_000) typeMetaPrefixes.set(key, prefix)
  }
  return body.length > prefix.length && body.compare(prefix, 0, prefix.length, 0, prefix.length) === 0 ? prefix.length : 0
}

export interface OfflineWatch {
  /** ends the stream cleanly, so the client re-watches (against the cloud, once it is back) */
  end(): void
}

function addedFrame(format: WireFormat, object: CachedObject): Buffer {
  const body = bodyIn(object, format)
  return format === 'json'
    ? Buffer.concat([Buffer.from('{"type":"ADDED","object":'), body, Buffer.from('}\n')])
    : encodeWatchEvent('ADDED', encodeUnknown({ apiVersion: object.apiVersion, kind: object.kind, raw: body }))
}

/**
 * An offline watch: 200 at once; from resourceVersion unset or 0 (or with sendInitialEvents) the
 * cached state as ADDED events first (WatchList's end with the annotated BOOKMARK); then only
 * BOOKMARKs (if asked for) at the version the client has, so its reflector neither relists nor
 * skips anything; ended when the cloud is back or timeoutSeconds runs out.
 */
export async function serveWatch(read: OfflineRead, bookmarkIntervalMs: number): Promise<OfflineWatch | undefined> {
  const { info, res, filter } = read
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    sendStatusObject(res, failure(400, (error as Error).message))
    return undefined
  }
  const whole = await selectWhole(read, scope)
  if ('code' in whole) {
    sendStatusObject(res, whole)
    return undefined
  }
  const { collection } = whole
  const wanted = choose(read, whole.items, collection, false)
  if ('code' in wanted || wanted.kind !== 'object') {
    sendStatusObject(res, 'code' in wanted ? wanted : serviceUnavailable(read.reason))
    return undefined
  }
  const format = wanted.format
  res.writeHead(200, {
    'content-type': format === 'json' ? 'application/json' : `${contentTypeOf('protobuf')};stream=watch`,
    'cache-control': 'no-cache, private',
    'x-outpost-cache': 'hit',
    'x-outpost-cache-source': collection.key.component,
  })
  res.flushHeaders()
  const fromNow = !info.resourceVersion || info.resourceVersion === '0'
  const initialEvents = queryFlag(info, 'sendInitialEvents')
  const resourceVersion = fromNow || initialEvents ? whole.resourceVersion : info.resourceVersion
  const send = (frame: Buffer) => {
    const out = filter ? filter.frame(format, frame) : frame
    if (out) res.write(out)
  }
  // "state, then changes": the cached state as ADDED events, like the apiserver's initial events
  if (fromNow || initialEvents) for (const object of whole.items) send(addedFrame(format, object))
  if (initialEvents) res.write(bookmarkFrame(format, collection.kind, collection.apiVersion, resourceVersion, true))
  const timers: NodeJS.Timeout[] = []
  const end = () => {
    for (const timer of timers) clearTimeout(timer)
    if (!res.writableEnded && !res.destroyed) res.end()
  }
  if (queryFlag(info, 'allowWatchBookmarks')) {
    timers.push(setInterval(() => res.write(bookmarkFrame(format, collection.kind, collection.apiVersion, resourceVersion, false)), bookmarkIntervalMs))
  }
  const timeoutSeconds = Number(info.query.get('timeoutSeconds'))
  if (timeoutSeconds > 0) timers.push(setTimeout(end, timeoutSeconds * 1000))
  res.on('close', end)
  return { end }
}
