// Watch event frames the hub writes itself, as the apiserver writes them, one builder per format:
// JSON is `{"type":…,"object":…}` and a newline, protobuf a length-prefixed WatchEvent whose object
// is a runtime.Unknown. BOOKMARKs of the hub's own making carry only the kind and a resourceVersion,
// plus, at the end of WatchList's initial events, the annotation `k8s.io/initial-events-end: "true"`
// that tells a client-go reflector it is in sync.
import { encodeUnknown, encodeWatchEvent } from '../codec/protobuf.ts'
import { encodeBody } from '../codec/typed.ts'
import { lenFieldSize, writeLenHeader, writeStringField } from '../codec/wire.ts'
import type { WireFormat } from './wire-format.ts'
import type { Status } from './status.ts'

const jsonEventEnd = Buffer.from('}\n')
const jsonEventStarts = new Map<string, Buffer>()

/** An event of `type` for an object (JSON text, or the raw protobuf message of its kind). */
export function eventFrame(format: WireFormat, type: string, apiVersion: string, kind: string, object: Buffer): Buffer {
  if (format === 'protobuf') return encodeWatchEvent(type, encodeUnknown({ apiVersion, kind, raw: object }))
  let start = jsonEventStarts.get(type)
  if (!start) {
    start = Buffer.from(`{"type":${JSON.stringify(type)},"object":`)
    if (jsonEventStarts.size < 16) jsonEventStarts.set(type, start)
  }
  return Buffer.concat([start, object, jsonEventEnd])
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
