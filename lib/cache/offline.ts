// Answers reads from the cache while the cloud is unreachable, in the wire format the client asked
// for, shaped like the apiserver's answers (lists, objects, watch streams with BOOKMARKs).
import type { ServerResponse } from 'node:http'
import type { RequestInfo } from '../requestinfo.ts'
import type { CachedObject, WireFormat } from './types.ts'
import type { CacheStore } from './store.ts'
import { resourceKeyOf, scopeOf } from './recorder.ts'
import { assembleList, encodeUnknown, encodeWatchEvent } from '../codec/protobuf.ts'
import { failure, notFound, serviceUnavailable } from '../status.ts'
import type { Status } from '../status.ts'

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

export async function serveGet(
  store: CacheStore,
  info: RequestInfo,
  accept: string | undefined,
  res: ServerResponse,
  filter?: OutgoingFilter,
): Promise<void> {
  const object = await store.get(resourceKeyOf(info), info.namespace, info.name)
  if (!object) {
    sendStatusObject(res, notFound(info.resource, info.apiGroup, info.name))
    return
  }
  const format = pickFormat(info, accept, object.format)
  if (typeof format !== 'string') return sendStatusObject(res, format)
  const body = encodeObject(object)
  sendBody(res, 200, contentTypeOf(format), filter ? filter.body(format, body) : body)
}

function unreachable(info: RequestInfo): Status {
  return serviceUnavailable(`the apiserver is unreachable and ${info.component || 'this client'} never listed ${info.resource} through this hub, so nothing is cached to answer with`)
}

export async function serveList(
  store: CacheStore,
  info: RequestInfo,
  accept: string | undefined,
  res: ServerResponse,
  filter?: OutgoingFilter,
): Promise<void> {
  let scope
  try {
    scope = scopeOf(info)
  } catch (error) {
    sendStatusObject(res, failure(400, (error as Error).message))
    return
  }
  const result = await store.list(resourceKeyOf(info), scope)
  if (!result) return sendStatusObject(res, unreachable(info))
  const stored = result.items[0]?.format ?? acceptedFormats(accept)[0] ?? 'json'
  const format = pickFormat(info, accept, stored)
  if (typeof format !== 'string') return sendStatusObject(res, format)
  const { collection, items, resourceVersion } = result
  const listKind = `${collection.kind}List`
  if (format === 'protobuf') {
    const raw = assembleList({ resourceVersion, continue: '', items: items.map(o => o.body) })
    const body = encodeUnknown({ apiVersion: collection.apiVersion, kind: listKind, raw })
    sendBody(res, 200, protobufType, filter ? filter.body('protobuf', body) : body)
    return
  }
  // Items are spliced in as stored: no parse and re-serialize per object.
  const head = `{"kind":${JSON.stringify(listKind)},"apiVersion":${JSON.stringify(collection.apiVersion)},"metadata":{"resourceVersion":${JSON.stringify(resourceVersion)}},"items":[`
  const parts: Buffer[] = [Buffer.from(head)]
  items.forEach((o, i) => {
    if (i > 0) parts.push(Buffer.from(','))
    parts.push(o.body)
  })
  parts.push(Buffer.from(']}'))
  const body = Buffer.concat(parts)
  sendBody(res, 200, 'application/json', filter ? filter.body('json', body) : body)
}

/** ObjectMeta{6: resourceVersion} inside an otherwise empty object: the protobuf BOOKMARK body. */
function protobufBookmarkObject(resourceVersion: string): Buffer {
  const rv = Buffer.from(resourceVersion)
  const meta = Buffer.concat([Buffer.from([0x32, rv.length]), rv])
  return Buffer.concat([Buffer.from([0x0a, meta.length]), meta])
}

export interface OfflineWatch {
  /** ends the stream cleanly, so the client re-watches (against the cloud, once it is back) */
  end(): void
}

/**
 * An offline watch: 200 at once, then only BOOKMARKs (if asked for) at the version the client
 * started from, so its reflector neither relists nor skips anything; ended when the cloud is back
 * or timeoutSeconds runs out, and the client re-watches from where it was.
 */
export async function serveWatch(
  store: CacheStore,
  info: RequestInfo,
  accept: string | undefined,
  res: ServerResponse,
  bookmarkIntervalMs: number,
  filter?: OutgoingFilter,
): Promise<OfflineWatch | undefined> {
  const collection = store.find(resourceKeyOf(info))
  if (!collection || (!collection.known && collection.entries.size === 0)) {
    sendStatusObject(res, unreachable(info))
    return undefined
  }
  const accepted = acceptedFormats(accept)
  const format: WireFormat = accepted[0] ?? 'json'
  res.writeHead(200, {
    'content-type': format === 'json' ? 'application/json' : `${protobufType};stream=watch`,
    'cache-control': 'no-cache, private',
    'x-outpost-cache': 'hit',
  })
  res.flushHeaders()
  const resourceVersion = info.resourceVersion && info.resourceVersion !== '0' ? info.resourceVersion : collection.maxResourceVersion()
  const bookmark = (): Buffer => {
    if (format === 'json') {
      const object = { kind: collection.kind, apiVersion: collection.apiVersion, metadata: { resourceVersion } }
      return Buffer.from(JSON.stringify({ type: 'BOOKMARK', object }) + '\n')
    }
    const object = encodeUnknown({ apiVersion: collection.apiVersion, kind: collection.kind, raw: protobufBookmarkObject(resourceVersion) })
    return encodeWatchEvent('BOOKMARK', object)
  }
  if (!info.resourceVersion || info.resourceVersion === '0') {
    // "state, then changes": the cached state as ADDED events, like the apiserver's initial events
    let scope
    try {
      scope = scopeOf(info)
    } catch {
      scope = undefined
    }
    for (const object of scope ? ((await store.list(resourceKeyOf(info), scope))?.items ?? []) : []) {
      if (object.format !== format) continue
      const frame =
        format === 'json'
          ? Buffer.concat([Buffer.from('{"type":"ADDED","object":'), object.body, Buffer.from('}\n')])
          : encodeWatchEvent('ADDED', encodeObject(object))
      res.write(filter ? filter.frame(format, frame) : frame)
    }
  }
  const timers: NodeJS.Timeout[] = []
  const end = () => {
    for (const timer of timers) clearTimeout(timer)
    if (!res.writableEnded && !res.destroyed) res.end()
  }
  if (info.query.get('allowWatchBookmarks') === 'true') {
    timers.push(setInterval(() => res.write(bookmark()), bookmarkIntervalMs))
  }
  const timeoutSeconds = Number(info.query.get('timeoutSeconds'))
  if (timeoutSeconds > 0) timers.push(setTimeout(end, timeoutSeconds * 1000))
  res.on('close', end)
  return { end }
}
