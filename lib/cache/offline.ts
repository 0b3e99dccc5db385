// Answers reads from the cache while the cloud is unreachable, in the wire format the client asked
// for, shaped like the apiserver's answers (lists with limit/continue, objects, watch streams with
// BOOKMARKs, WatchList's initial events). It answers only what the cache knows whole: a scope never
// listed, or one with objects whose bodies are lost, is a 503 that says so, never a short list.
import type { ServerResponse } from 'node:http'
import type { RequestInfo } from '../requestinfo.ts'
import type { CachedObject, WireFormat } from './types.ts'
import type { CacheStore, Collection, Selection } from './store.ts'
import { LostObjectError, describeScope } from './store.ts'
import { resourceKeyOf, scopeOf } from './recorder.ts'
import { scopeOfName } from './scope.ts'
import type { ParsedScope } from './scope.ts'
import { assembleList, encodeUnknown, encodeWatchEvent } from '../codec/protobuf.ts'
import { decodeContinue, encodeContinue, storageKey } from '../continue-token.ts'
import { failure, notFound, serviceUnavailable } from '../status.ts'
import type { Status } from '../status.ts'
import { bookmarkFrame } from './bookmark.ts'

export const protobufType = 'application/vnd.kubernetes.protobuf'

/** Formats the client accepts, in its order of preference (kubelet: protobuf, then anything). */
export function acceptedFormats(accept: string | undefined): WireFormat[] {
  const formats: WireFormat[] = []
  for (const part of (accept ?? '*/*').split(',')) {
    const [type, ...params] = part.trim().toLowerCase().split(';')
    if (params.some(p => p.trim().startsWith('as='))) continue // tables and metadata views are not cached
    if (type === protobufType) formats.push('protobuf')
    else if (type === 'application/json') formats.push('json')
    else if (type === '*/*' || type === 'application/*') formats.push('json', 'protobuf')
  }
  return [...new Set(formats)]
}

function sendBody(res: ServerResponse, code: number, contentType: string, body: Buffer | string): void {
  res.writeHead(code, {
    'content-type': contentType,
    'cache-control': 'no-cache, private',
    'content-length': Buffer.byteLength(body),
    // a debugging aid: curl -i shows the answer came from the hub's cache
    'x-outpost-cache': 'hit',
  })
  res.end(body)
}

export function sendStatusObject(res: ServerResponse, status: Status): void {
  sendBody(res, status.code, 'application/json', JSON.stringify(status))
}

/** The stored format, if the client accepts it; the cache cannot translate protobuf into JSON. */
function pickFormat(info: RequestInfo, accept: string | undefined, stored: WireFormat): WireFormat | Status {
  if (acceptedFormats(accept).includes(stored)) return stored
  return serviceUnavailable(
    `the apiserver is unreachable and ${info.resource} for ${info.component} are cached as ${stored}, which this request's Accept header does not allow`,
  )
}

function encodeObject(object: CachedObject): Buffer {
  if (object.format === 'json') return object.body
  return encodeUnknown({ apiVersion: object.apiVersion, kind: object.kind, raw: object.body })
}

function contentTypeOf(format: WireFormat): string {
  return format === 'json' ? 'application/json' : protobufType
}

/** Applied to what the cache answers, as to what the cloud answers: the cache holds unfiltered objects. */
export interface OutgoingFilter {
  body(format: WireFormat, body: Buffer): Buffer
  frame(format: WireFormat, frame: Buffer): Buffer
}

function lostStatus(info: RequestInfo, error: LostObjectError): Status {
  return serviceUnavailable(`the apiserver is unreachable and the cache cannot answer ${info.verb} ${info.resource} for ${info.component} whole: ${error.message}`)
}

function unlisted(info: RequestInfo, collection: Collection | undefined, scope: ParsedScope): Status {
  const listed = collection ? [...collection.listed.values()].map(l => describeScope(l.scope)) : []
  const why =
    listed.length === 0
      ? `${info.component || 'this client'} never listed ${info.resource} through this hub, so nothing is cached to answer with`
      : `${info.component || 'this client'} listed ${info.resource} only for ${listed.join('; ')}, which does not answer for ${describeScope(scope)}`
  return serviceUnavailable(`the apiserver is unreachable and ${why}`)
}

export async function serveGet(store: CacheStore, info: RequestInfo, accept: string | undefined, res: ServerResponse, filter?: OutgoingFilter): Promise<void> {
  const key = resourceKeyOf(info)
  let object: CachedObject | undefined
  try {
    object = await store.get(key, info.namespace, info.name)
  } catch (error) {
    if (error instanceof LostObjectError) return sendStatusObject(res, lostStatus(info, error))
    throw error
  }
  if (!object) {
    // "not found" is the cache's to say only where a whole list would have held the object
    const scope = scopeOfName(info.namespace, info.name)
    const collection = store.find(key)
    return sendStatusObject(res, collection?.coveringScope(scope) ? notFound(info.resource, info.apiGroup, info.name) : unlisted(info, collection, scope))
  }
  const format = pickFormat(info, accept, object.format)
  if (typeof format !== 'string') return sendStatusObject(res, format)
  const body = encodeObject(object)
  sendBody(res, 200, contentTypeOf(format), filter ? filter.body(format, body) : body)
}

/** A scope's objects if the cache knows them whole, else the Status that says why not. */
async function selectWhole(store: CacheStore, info: RequestInfo, scope: ParsedScope): Promise<Selection | Status> {
  const selection = await store.list(resourceKeyOf(info), scope)
  if (!selection || !selection.complete) return unlisted(info, selection?.collection ?? store.find(resourceKeyOf(info)), scope)
  if (selection.lost.length > 0) return lostStatus(info, new LostObjectError(selection.lost))
  return selection
}

/** The format for a set of objects: what they are stored as, when the client accepts it. */
function formatFor(info: RequestInfo, accept: string | undefined, items: CachedObject[]): WireFormat | Status {
  const stored = new Set(items.map(o => o.format))
  if (stored.size > 1) return serviceUnavailable(`the apiserver is unreachable and ${info.resource} for ${info.component} are cached in both JSON and protobuf; the cache cannot answer one list in one format`)
  const only = [...stored][0]
  return only ? pickFormat(info, accept, only) : (acceptedFormats(accept)[0] ?? 'json')
}

interface Page {
  items: CachedObject[]
  continue: string
  remainingItemCount?: number
}

/** limit/continue as the apiserver pages (resourceVersion=0 reads the watch cache, which ignores limit). */
function paginate(info: RequestInfo, items: CachedObject[], resourceVersion: string, scope: ParsedScope): Page | Status {
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
  const last = page[page.length - 1]
  const next = encodeContinue({ rv: Number(resourceVersion) || 1, start: `${keyOf(last)}\u0000` })
  const selectors = scope.labels.requirements.length > 0 || scope.fields.requirements.length > 0
  return selectors ? { items: page, continue: next } : { items: page, continue: next, remainingItemCount: rest }
}

export async function serveList(store: CacheStore, info: RequestInfo, accept: string | undefined, res: ServerResponse, filter?: OutgoingFilter): Promise<void> {
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    return sendStatusObject(res, failure(400, (error as Error).message))
  }
  const selection = await selectWhole(store, info, scope)
  if ('code' in selection) return sendStatusObject(res, selection)
  const format = formatFor(info, accept, selection.items)
  if (typeof format !== 'string') return sendStatusObject(res, format)
  const { collection, resourceVersion } = selection
  const page = paginate(info, selection.items, resourceVersion, scope)
  if ('code' in page) return sendStatusObject(res, page)
  const listKind = `${collection.kind}List`
  if (format === 'protobuf') {
    const raw = assembleList({ resourceVersion, continue: page.continue, remainingItemCount: page.remainingItemCount, items: page.items.map(o => o.body) })
    const body = encodeUnknown({ apiVersion: collection.apiVersion, kind: listKind, raw })
    sendBody(res, 200, protobufType, filter ? filter.body('protobuf', body) : body)
    return
  }
  // Items are spliced in as stored: no parse and re-serialize per object.
  const meta: Record<string, unknown> = { resourceVersion }
  if (page.continue) meta.continue = page.continue
  if (page.remainingItemCount !== undefined) meta.remainingItemCount = page.remainingItemCount
  const head = `{"kind":${JSON.stringify(listKind)},"apiVersion":${JSON.stringify(collection.apiVersion)},"metadata":${JSON.stringify(meta)},"items":[`
  const parts: Buffer[] = [Buffer.from(head)]
  page.items.forEach((o, i) => {
    if (i > 0) parts.push(Buffer.from(','))
    parts.push(o.body)
  })
  parts.push(Buffer.from(']}'))
  const body = Buffer.concat(parts)
  sendBody(res, 200, 'application/json', filter ? filter.body('json', body) : body)
}

export interface OfflineWatch {
  /** ends the stream cleanly, so the client re-watches (against the cloud, once it is back) */
  end(): void
}

function addedFrame(format: WireFormat, object: CachedObject): Buffer {
  return format === 'json' ? Buffer.concat([Buffer.from('{"type":"ADDED","object":'), object.body, Buffer.from('}\n')]) : encodeWatchEvent('ADDED', encodeObject(object))
}

/**
 * An offline watch: 200 at once; from resourceVersion unset or 0 (or with sendInitialEvents) the
 * cached state as ADDED events first (WatchList's end with the annotated BOOKMARK); then only
 * BOOKMARKs (if asked for) at the version the client has, so its reflector neither relists nor
 * skips anything; ended when the cloud is back or timeoutSeconds runs out.
 */
export async function serveWatch(
  store: CacheStore,
  info: RequestInfo,
  accept: string | undefined,
  res: ServerResponse,
  bookmarkIntervalMs: number,
  filter?: OutgoingFilter,
): Promise<OfflineWatch | undefined> {
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    sendStatusObject(res, failure(400, (error as Error).message))
    return undefined
  }
  const selection = await selectWhole(store, info, scope)
  if ('code' in selection) {
    sendStatusObject(res, selection)
    return undefined
  }
  const { collection } = selection
  const format = formatFor(info, accept, selection.items)
  if (typeof format !== 'string') {
    sendStatusObject(res, format)
    return undefined
  }
  res.writeHead(200, {
    'content-type': format === 'json' ? 'application/json' : `${protobufType};stream=watch`,
    'cache-control': 'no-cache, private',
    'x-outpost-cache': 'hit',
  })
  res.flushHeaders()
  const fromNow = !info.resourceVersion || info.resourceVersion === '0'
  const initialEvents = info.query.get('sendInitialEvents') === 'true'
  const resourceVersion = fromNow || initialEvents ? selection.resourceVersion : info.resourceVersion
  const send = (frame: Buffer) => res.write(filter ? filter.frame(format, frame) : frame)
  if (fromNow || initialEvents) {
    // "state, then changes": the cached state as ADDED events, like the apiserver's initial events
    for (const object of selection.items) send(addedFrame(format, object))
  }
  if (initialEvents) res.write(bookmarkFrame(format, collection.kind, collection.apiVersion, resourceVersion, true))
  const timers: NodeJS.Timeout[] = []
  const end = () => {
    for (const timer of timers) clearTimeout(timer)
    if (!res.writableEnded && !res.destroyed) res.end()
  }
  if (info.query.get('allowWatchBookmarks') === 'true') {
    timers.push(setInterval(() => res.write(bookmarkFrame(format, collection.kind, collection.apiVersion, resourceVersion, false)), bookmarkIntervalMs))
  }
  const timeoutSeconds = Number(info.query.get('timeoutSeconds'))
  if (timeoutSeconds > 0) timers.push(setTimeout(end, timeoutSeconds * 1000))
  res.on('close', end)
  return { end }
}
