// Turns apiserver response bytes (JSON or protobuf) into CachedObjects. Only plain objects are
// decoded: Tables and metadata-only answers (`;as=…` in the Content-Type) are views, not objects.
import type { CachedObject } from './types.ts'
import { eachElement, eachMember, internedStringAt, memberRanges, objectMembers, skipValue, watchEventRanges, withTypeMeta } from '../codec/json-scan.ts'
import { interned } from '../codec/intern.ts'
import type { Range } from '../codec/json-scan.ts'
import { decodeUnknown, decodeWatchEvent, isProtobuf, objectMeta, splitList } from '../codec/protobuf.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { initialEventsEndAnnotation } from '../api/watch-event-frames.ts'

export function formatOf(contentType: string | undefined): WireFormat | undefined {
  if (!contentType) return undefined
  const [type, ...params] = contentType
    .toLowerCase()
    .split(';')
    .map(p => p.trim())
  if (params.some(p => p.startsWith('as='))) return undefined
  if (type === 'application/json') return 'json'
  if (type === 'application/vnd.kubernetes.protobuf') return 'protobuf'
  return undefined
}

interface JsonMeta {
  name?: string
  namespace?: string
  resourceVersion?: string
  continue?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

const typeMembers = ['kind', 'apiVersion', 'metadata']
const listMembers = ['kind', 'apiVersion', 'metadata', 'items']

/**
 * One JSON object from its bytes (`start`..`end` of `buf`) and the ranges of its kind, apiVersion
 * and metadata (found by the caller, on its way through): only metadata is parsed; the body is the
 * apiserver's bytes (copied, so a list's buffer is not pinned), with kind and apiVersion put in
 * front when the object lacks them (list items do).
 */
function fromJsonMembers(buf: Buffer, start: number, end: number, members: ReadonlyMap<string, Range>, kind: string, apiVersion: string): CachedObject {
  const metaRange = members.get('metadata')
  const meta = (metaRange ? JSON.parse(buf.toString('utf8', metaRange.start, metaRange.end)) : {}) as JsonMeta
  if (!meta?.name) throw new Error(`${kind || 'object'} without metadata.name`)
  const raw = buf.subarray(start, end)
  const typed = members.has('kind') && members.has('apiVersion')
  return {
    apiVersion,
    kind,
    namespace: interned(meta.namespace ?? ''),
    name: meta.name,
    resourceVersion: meta.resourceVersion ?? '',
    format: 'json',
    body: typed ? Buffer.from(raw) : withTypeMeta(raw, kind, apiVersion),
    labels: internedValues(meta.labels),
  }
}

/** Labels as the index keeps them: JSON.parse shares their keys already, not their values. */
function internedValues(labels: Record<string, string> | undefined): Record<string, string> {
  if (!labels) return {}
  if (typeof labels !== 'object' || Array.isArray(labels)) return labels // not labels: as the apiserver sent them
  for (const key in labels) if (typeof labels[key] === 'string') labels[key] = interned(labels[key])
  return labels
}

/** A top-level string member's value ('' when absent or not a string). */
function stringMember(buf: Buffer, members: ReadonlyMap<string, Range>, name: string): string {
  const range = members.get(name)
  return (range && internedStringAt(buf, range.start, range.end)) ?? ''
}

function fromProtobufRaw(raw: Buffer, kind: string, apiVersion: string): CachedObject {
  const meta = objectMeta(raw)
  return {
    apiVersion,
    kind,
    namespace: meta.namespace,
    name: meta.name,
    resourceVersion: meta.resourceVersion,
    format: 'protobuf',
    body: raw,
    labels: meta.labels,
  }
}

export function decodeObject(format: WireFormat, body: Buffer): CachedObject {
  if (format === 'protobuf') {
    const unknown = decodeUnknown(body)
    return fromProtobufRaw(Buffer.from(unknown.raw), unknown.kind, unknown.apiVersion)
  }
  const members = memberRanges(body, typeMembers)
  return fromJsonMembers(body, 0, body.length, members, stringMember(body, members, 'kind'), stringMember(body, members, 'apiVersion'))
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
  // One pass: each item's own members are found on the way through the list. The items come
  // after kind and apiVersion (the apiserver writes them so); were they first, they are read again.
  const members = new Map<string, Range>()
  let items: Range | undefined
  let found: CachedObject[] = []
  const read =
    (kind: string, apiVersion: string) =>
    (at: number): number => {
      const item = objectMembers(body, typeMembers, at)
      found.push(fromJsonMembers(body, at, item.end, item.members, kind, apiVersion))
      return item.end
    }
  eachMember(body, listMembers, (which, at) => {
    const name = listMembers[which]
    if (name !== 'items' || !members.has('kind') || !members.has('apiVersion')) {
      const end = skipValue(body, at)
      members.set(name, { start: at, end })
      return end
    }
    found = []
    const end = eachElement(body, read(stringMember(body, members, 'kind').replace(/List$/, ''), stringMember(body, members, 'apiVersion')), at)
    items = { start: at, end }
    return end
  })
  const kind = stringMember(body, members, 'kind').replace(/List$/, '')
  const apiVersion = stringMember(body, members, 'apiVersion')
  const metaRange = members.get('metadata')
  const meta = (metaRange ? JSON.parse(body.toString('utf8', metaRange.start, metaRange.end)) : {}) as JsonMeta
  const itemsRange = items ?? members.get('items')
  if (itemsRange && !items) {
    found = []
    eachElement(body, read(kind, apiVersion), itemsRange.start, itemsRange.end)
  }
  return {
    kind,
    apiVersion,
    resourceVersion: meta?.resourceVersion ?? '',
    continue: meta?.continue ?? '',
    items: itemsRange ? found : [],
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
  const { type: typeRange, object, inner } = watchEventRanges(frame, typeMembers)
  const type = (typeRange && internedStringAt(frame, typeRange.start, typeRange.end)) ?? ''
  if (type === 'ERROR' || !object) return { type }
  if (type === 'BOOKMARK') {
    const metaRange = inner.get('metadata')
    const meta = (metaRange ? JSON.parse(frame.toString('utf8', metaRange.start, metaRange.end)) : {}) as JsonMeta
    return { type, resourceVersion: meta?.resourceVersion, initialEventsEnd: meta?.annotations?.[initialEventsEndAnnotation] === 'true' }
  }
  return { type, object: fromJsonMembers(frame, object.start, object.end, inner, stringMember(frame, inner, 'kind'), stringMember(frame, inner, 'apiVersion')) }
}
