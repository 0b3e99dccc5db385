// Turns apiserver response bytes (JSON or protobuf) into CachedObjects. Only plain objects are
// decoded: Tables and metadata-only answers (`;as=…` in the Content-Type) are views, not objects.
import type { CachedObject, WireFormat } from './types.ts'
import { initialEventsEndAnnotation } from './bookmark.ts'
import { decodeUnknown, decodeWatchEvent, isProtobuf, objectMeta, splitList } from '../codec/protobuf.ts'

export function formatOf(contentType: string | undefined): WireFormat | undefined {
  if (!contentType) return undefined
  const [type, ...params] = contentType.toLowerCase().split(';').map(p => p.trim())
  if (params.some(p => p.startsWith('as='))) return undefined
  if (type === 'application/json') return 'json'
  if (type === 'application/vnd.kubernetes.protobuf') return 'protobuf'
  return undefined
}

interface JsonObject {
  kind?: string
  apiVersion?: string
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; continue?: string }
  items?: JsonObject[]
}

function fromJson(document: JsonObject, kind: string, apiVersion: string, body?: Buffer): CachedObject {
  const meta = document.metadata ?? {}
  if (!meta.name) throw new Error(`${kind} without metadata.name`)
  const complete = document.kind && document.apiVersion ? document : { kind, apiVersion, ...document }
  return {
    apiVersion,
    kind,
    namespace: meta.namespace ?? '',
    name: meta.name,
    resourceVersion: meta.resourceVersion ?? '',
    format: 'json',
    body: body && complete === document ? body : Buffer.from(JSON.stringify(complete)),
  }
}

function fromProtobufRaw(raw: Buffer, kind: string, apiVersion: string): CachedObject {
  const meta = objectMeta(raw)
  return { apiVersion, kind, namespace: meta.namespace, name: meta.name, resourceVersion: meta.resourceVersion, format: 'protobuf', body: raw }
}

export function decodeObject(format: WireFormat, body: Buffer): CachedObject {
  if (format === 'protobuf') {
    const unknown = decodeUnknown(body)
    return fromProtobufRaw(Buffer.from(unknown.raw), unknown.kind, unknown.apiVersion)
  }
  const document = JSON.parse(body.toString()) as JsonObject
  return fromJson(document, document.kind ?? '', document.apiVersion ?? '', body)
}

export interface DecodedList {
  /** the item kind (the list's kind without "List") */
  kind: string
  apiVersion: string
  resourceVersion: string
  continue: string
  items: CachedObject[]
}

export function decodeList(format: WireFormat, body: Buffer): DecodedList {
  if (format === 'protobuf') {
    const unknown = decodeUnknown(body)
    const kind = unknown.kind.replace(/List$/, '')
    const parts = splitList(unknown.raw)
    return {
      kind,
      apiVersion: unknown.apiVersion,
      resourceVersion: parts.resourceVersion,
      continue: parts.continue,
      // items are subarrays of the response; copy so the cache does not pin the whole body
      items: parts.items.map(item => fromProtobufRaw(Buffer.from(item), kind, unknown.apiVersion)),
    }
  }
  const document = JSON.parse(body.toString()) as JsonObject
  const kind = (document.kind ?? '').replace(/List$/, '')
  const apiVersion = document.apiVersion ?? ''
  return {
    kind,
    apiVersion,
    resourceVersion: document.metadata?.resourceVersion ?? '',
    continue: document.metadata?.continue ?? '',
    items: (document.items ?? []).map(item => fromJson(item, kind, apiVersion)),
  }
}

export interface DecodedEvent {
  type: string
  /** absent for BOOKMARK and ERROR */
  object?: CachedObject
  /** a BOOKMARK's version */
  resourceVersion?: string
  /** a BOOKMARK that ends WatchList's initial events (annotation k8s.io/initial-events-end) */
  initialEventsEnd?: boolean
}

export function decodeEvent(format: WireFormat, frame: Buffer): DecodedEvent {
  if (format === 'protobuf') {
    const event = decodeWatchEvent(frame)
    if (event.type === 'ERROR' || !isProtobuf(event.object)) return { type: event.type }
    if (event.type === 'BOOKMARK') {
      const meta = objectMeta(Buffer.from(decodeUnknown(event.object).raw))
      return { type: event.type, resourceVersion: meta.resourceVersion, initialEventsEnd: meta.annotations[initialEventsEndAnnotation] === 'true' }
    }
    return { type: event.type, object: decodeObject('protobuf', event.object) }
  }
  const event = JSON.parse(frame.toString()) as { type: string; object: JsonObject & { metadata?: { annotations?: Record<string, string> } } }
  if (event.type === 'ERROR') return { type: event.type }
  if (event.type === 'BOOKMARK') {
    const meta = event.object?.metadata
    return { type: event.type, resourceVersion: meta?.resourceVersion, initialEventsEnd: meta?.annotations?.[initialEventsEndAnnotation] === 'true' }
  }
  return { type: event.type, object: fromJson(event.object, event.object.kind ?? '', event.object.apiVersion ?? '') }
}
