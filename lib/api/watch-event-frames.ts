// Watch event frames the hub writes itself, as the apiserver writes them, one builder per format:
// JSON is `{"type":…,"object":…}` and a newline, protobuf a length-prefixed WatchEvent whose object
// is a runtime.Unknown. BOOKMARKs of the hub's own making carry only the kind and a resourceVersion,
// plus, at the end of WatchList's initial events, the annotation `k8s.io/initial-events-end: "true"`
// that tells a client-go reflector it is in sync.
import { encodeUnknown, encodeWatchEvent, k8sMagic } from '../codec/protobuf.ts'
import { encodeBody } from '../codec/typed.ts'
import { lenFieldSize, writeLenHeader, writeStringField } from '../codec/wire.ts'
import type { WireFormat } from './wire-format.ts'
import type { Status } from './status.ts'

const jsonEventEnd = Buffer.from('}\n')
const jsonEventStarts = new Map<string, Buffer>()

/** An event of `type` for an object (JSON text, or the raw protobuf message of its kind). */
export function eventFrame(format: WireFormat, type: string, apiVersion: string, kind: string, object: Buffer): Buffer {
  return Buffer.concat(eventFrameParts(format, type, apiVersion, kind, object))
}

/**
 * The same frame as parts to write in order, the object's bytes not copied: a watch's initial
 * state of 10,000 objects is written without making 10,000 frames (JSON: a shared head and end
 * around the object; protobuf: the headers of the frame, the WatchEvent, its RawExtension and the
 * Unknown in one small buffer, the object, and the Unknown's empty tail).
 */
export function eventFrameParts(format: WireFormat, type: string, apiVersion: string, kind: string, object: Buffer): Buffer[] {
  if (format === 'protobuf') return protobufEventParts(type, apiVersion, kind, object)
  let start = jsonEventStarts.get(type)
  if (!start) {
    start = Buffer.from(`{"type":${JSON.stringify(type)},"object":`)
    if (jsonEventStarts.size < 16) jsonEventStarts.set(type, start)
  }
  return [start, object, jsonEventEnd]
}

/** contentEncoding and contentType of an Unknown, both empty */
const unknownTail = Buffer.from([(3 << 3) | 2, 0, (4 << 3) | 2, 0])

function protobufEventParts(type: string, apiVersion: string, kind: string, raw: Buffer): Buffer[] {
  const typeField = protobufTypeField(type)
  const unknownStart = protobufUnknownStart(apiVersion, kind)
  const unknown = unknownStart.length + lenFieldSize(2, raw.length) + unknownTail.length
  const extension = lenFieldSize(1, unknown)
  const event = typeField.length + lenFieldSize(2, extension)
  // everything before the object's bytes: the constant fields copied, the lengths written
  const head = Buffer.allocUnsafe(4 + event - raw.length - unknownTail.length)
  head.writeUInt32BE(event, 0)
  let pos = 4 + typeField.copy(head, 4)
  pos = writeLenHeader(head, pos, 2, extension)
  pos = writeLenHeader(head, pos, 1, unknown)
  pos += unknownStart.copy(head, pos)
  writeLenHeader(head, pos, 2, raw.length)
  return [head, raw, unknownTail]
}

/** WatchEvent's type field, per type (a handful) */
const protobufTypeFields = new Map<string, Buffer>()

function protobufTypeField(type: string): Buffer {
  let field = protobufTypeFields.get(type)
  if (!field) {
    const length = Buffer.byteLength(type)
    field = Buffer.allocUnsafe(lenFieldSize(1, length))
    writeStringField(field, 0, 1, type, length)
    if (protobufTypeFields.size < 16) protobufTypeFields.set(type, field)
  }
  return field
}

/** An Unknown's magic and TypeMeta, per kind and apiVersion (what one watch cache sends is all one) */
const protobufUnknownStarts = new Map<string, Map<string, Buffer>>()

function protobufUnknownStart(apiVersion: string, kind: string): Buffer {
  let byVersion = protobufUnknownStarts.get(kind)
  let start = byVersion?.get(apiVersion)
  if (start) return start
  const avLen = Buffer.byteLength(apiVersion)
  const kindLen = Buffer.byteLength(kind)
  const typeMeta = lenFieldSize(1, avLen) + lenFieldSize(2, kindLen)
  start = Buffer.allocUnsafe(4 + lenFieldSize(1, typeMeta))
  k8sMagic.copy(start, 0)
  let pos = writeLenHeader(start, 4, 1, typeMeta)
  pos = writeStringField(start, pos, 1, apiVersion, avLen)
  writeStringField(start, pos, 2, kind, kindLen)
  if (protobufUnknownStarts.size < 256) {
    if (!byVersion) protobufUnknownStarts.set(kind, (byVersion = new Map()))
    if (byVersion.size < 16) byVersion.set(apiVersion, start)
  }
  return start
}

/** The ERROR event a watch ends with (410 Expired: the client lists again). */
export function errorFrame(format: WireFormat, status: Status): Buffer {
  return format === 'json' ? Buffer.from(JSON.stringify({ type: 'ERROR', object: status }) + '\n') : encodeWatchEvent('ERROR', encodeBody(status))
}

export const initialEventsEndAnnotation = 'k8s.io/initial-events-end'

export function bookmarkFrame(format: WireFormat, kind: string, apiVersion: string, resourceVersion: string, initialEventsEnd: boolean): Buffer {
  if (format === 'json') {
    const metadata: Record<string, unknown> = { resourceVersion, creationTimestamp: null }
    if (initialEventsEnd) metadata.annotations = { [initialEventsEndAnnotation]: 'true' }
    return Buffer.from(JSON.stringify({ type: 'BOOKMARK', object: { kind, apiVersion, metadata } }) + '\n')
  }
  return encodeWatchEvent('BOOKMARK', encodeUnknown({ apiVersion, kind, raw: protobufBookmarkObject(resourceVersion, initialEventsEnd) }))
}

/**
 * An object holding only ObjectMeta, written as the apiserver writes a bookmark's: every string
 * field present (empty), resourceVersion (6), generation 0 (7), an empty creationTimestamp (8),
 * the annotation map entry (12) when asked, and the empty clusterName (15).
 */
function protobufBookmarkObject(resourceVersion: string, initialEventsEnd: boolean): Buffer {
  const rvLength = Buffer.byteLength(resourceVersion)
  const key = Buffer.from(initialEventsEndAnnotation)
  const entry = initialEventsEnd ? lenFieldSize(1, key.length) + lenFieldSize(2, 4) : 0
  const meta = 5 * 2 + lenFieldSize(6, rvLength) + 2 + 2 + (initialEventsEnd ? lenFieldSize(12, entry) : 0) + 2
  const out = Buffer.alloc(lenFieldSize(1, meta))
  let pos = writeLenHeader(out, 0, 1, meta)
  for (const field of [1, 2, 3, 4, 5]) pos = writeLenHeader(out, pos, field, 0)
  pos = writeStringField(out, pos, 6, resourceVersion, rvLength)
  out[pos++] = 7 << 3 // generation, varint 0
  out[pos++] = 0
  pos = writeLenHeader(out, pos, 8, 0)
  if (initialEventsEnd) {
    pos = writeLenHeader(out, pos, 12, entry)
    pos = writeStringField(out, pos, 1, initialEventsEndAnnotation, key.length)
    pos = writeStringField(out, pos, 2, 'true', 4)
  }
  writeLenHeader(out, pos, 15, 0)
  return out
}
