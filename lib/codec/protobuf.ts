// Kubernetes protobuf at the wire level, without a schema compiler: the `k8s\0` + runtime.Unknown
// envelope, Lists, ObjectMeta and watch frames. Encoders reproduce the apiserver's bytes exactly
// (gogo-protobuf always writes non-pointer string fields, even when empty, in field-number order).
import {
  FieldReader,
  ProtobufError,
  WIRE_LEN,
  WIRE_VARINT,
  lenFieldSize,
  varintSize,
  writeBytesField,
  writeLenHeader,
  writeStringField,
  writeVarint,
} from './wire.ts'

export { ProtobufError } from './wire.ts'

export const k8sMagic: Buffer = Buffer.from([0x6b, 0x38, 0x73, 0x00])

export function isProtobuf(body: Buffer): boolean {
  return body.length >= 4 && body[0] === 0x6b && body[1] === 0x38 && body[2] === 0x73 && body[3] === 0x00
}

export interface Unknown {
  apiVersion: string
  kind: string
  raw: Buffer
  contentEncoding: string
  contentType: string
}

/** Decodes `k8s\0` + runtime.Unknown; `raw` is a subarray of body. */
export function decodeUnknown(body: Buffer): Unknown {
  if (!isProtobuf(body)) throw new ProtobufError('body does not start with the k8s protobuf magic')
  const u: Unknown = { apiVersion: '', kind: '', raw: emptyBuffer, contentEncoding: '', contentType: '' }
  const r = new FieldReader(body, 4)
  while (r.next()) {
    switch (r.field) {
      case 1: {
        r.expect(WIRE_LEN)
        const t = new FieldReader(body, r.start, r.end)
        while (t.next()) {
          if (t.field === 1) u.apiVersion = t.internedString()
          else if (t.field === 2) u.kind = t.internedString()
        }
        break
      }
      case 2:
        u.raw = r.bytes()
        break
      case 3:
        u.contentEncoding = r.string()
        break
      case 4:
        u.contentType = r.string()
        break
    }
  }
  return u
}

/** `k8s\0` + runtime.Unknown, byte-identical to the apiserver's (it writes empty contentEncoding/contentType). */
export function encodeUnknown(u: { apiVersion: string; kind: string; raw: Buffer; contentEncoding?: string; contentType?: string }): Buffer {
  const contentEncoding = u.contentEncoding ?? ''
  const contentType = u.contentType ?? ''
  const avLen = Buffer.byteLength(u.apiVersion)
  const kindLen = Buffer.byteLength(u.kind)
  const ceLen = Buffer.byteLength(contentEncoding)
  const ctLen = Buffer.byteLength(contentType)
  const typeMeta = lenFieldSize(1, avLen) + lenFieldSize(2, kindLen)
  const size = 4 + lenFieldSize(1, typeMeta) + lenFieldSize(2, u.raw.length) + lenFieldSize(3, ceLen) + lenFieldSize(4, ctLen)
  const out = Buffer.allocUnsafe(size)
  k8sMagic.copy(out, 0)
  let pos = writeLenHeader(out, 4, 1, typeMeta)
  pos = writeStringField(out, pos, 1, u.apiVersion, avLen)
  pos = writeStringField(out, pos, 2, u.kind, kindLen)
  pos = writeBytesField(out, pos, 2, u.raw)
  pos = writeStringField(out, pos, 3, contentEncoding, ceLen)
  pos = writeStringField(out, pos, 4, contentType, ctLen)
  return out
}

export interface ListParts {
  resourceVersion: string
  continue: string
  remainingItemCount?: number
  items: Buffer[]
}

/**
 * Splits a *List message (Unknown.raw) into its ListMeta and its items (subarrays, no copy).
 * ListMeta.selfLink (always empty since v1.20) and unknown List fields are not kept.
 */
export function splitList(raw: Buffer): ListParts {
  const parts: ListParts = { resourceVersion: '', continue: '', items: [] }
  const r = new FieldReader(raw)
  while (r.next()) {
    if (r.field === 1) {
      r.expect(WIRE_LEN)
      const m = new FieldReader(raw, r.start, r.end)
      while (m.next()) {
        if (m.field === 2) parts.resourceVersion = m.string()
        else if (m.field === 3) parts.continue = m.string()
        else if (m.field === 4) parts.remainingItemCount = m.int64()
      }
    } else if (r.field === 2) {
      parts.items.push(r.bytes())
    }
  }
  return parts
}

/** ListMeta + items, as the apiserver writes them (empty selfLink and continue included). */
export function assembleList(parts: ListParts): Buffer {
  return Buffer.concat(listRawParts(parts).parts)
}

/**
 * The list message as parts to write in order, its items not copied: the ListMeta field, then per
 * item its field header (all headers in one allocation) and the item's own bytes.
 */
function listRawParts(parts: ListParts): { parts: Buffer[]; length: number } {
  const rvLen = Buffer.byteLength(parts.resourceVersion)
  const contLen = Buffer.byteLength(parts.continue)
  const remaining = parts.remainingItemCount
  let meta = lenFieldSize(1, 0) + lenFieldSize(2, rvLen) + lenFieldSize(3, contLen)
  if (remaining !== undefined) meta += 1 + varintSize(remaining)
  const head = Buffer.allocUnsafe(lenFieldSize(1, meta))
  let pos = writeLenHeader(head, 0, 1, meta)
  pos = writeLenHeader(head, pos, 1, 0)
  pos = writeStringField(head, pos, 2, parts.resourceVersion, rvLen)
  pos = writeStringField(head, pos, 3, parts.continue, contLen)
  if (remaining !== undefined) {
    head[pos++] = (4 << 3) | WIRE_VARINT
    writeVarint(head, pos, remaining)
  }
  let headerBytes = 0
  for (const item of parts.items) headerBytes += lenFieldSize(2, item.length) - item.length
  const headers = Buffer.allocUnsafe(headerBytes)
  const out: Buffer[] = [head]
  let at = 0
  for (const item of parts.items) {
    const next = writeLenHeader(headers, at, 2, item.length)
    out.push(headers.subarray(at, next), item)
    at = next
  }
  let length = head.length + headerBytes
  for (const item of parts.items) length += item.length
  return { parts: out, length }
}

/**
 * A list in its Unknown envelope as parts to write in order (what encodeUnknown of assembleList
 * gives, byte for byte), the items' bytes not copied: a list of 10,000 objects is never joined.
 */
export function listWireParts(apiVersion: string, kind: string, parts: ListParts): Buffer[] {
  const raw = listRawParts(parts)
  const avLen = Buffer.byteLength(apiVersion)
  const kindLen = Buffer.byteLength(kind)
  const typeMeta = lenFieldSize(1, avLen) + lenFieldSize(2, kindLen)
  const head = Buffer.allocUnsafe(4 + lenFieldSize(1, typeMeta) + varintSize(2 * 8 + WIRE_LEN) + varintSize(raw.length))
  k8sMagic.copy(head, 0)
  let pos = writeLenHeader(head, 4, 1, typeMeta)
  pos = writeStringField(head, pos, 1, apiVersion, avLen)
  pos = writeStringField(head, pos, 2, kind, kindLen)
  writeLenHeader(head, pos, 2, raw.length)
  return [head, ...raw.parts, unknownTail]
}

/** contentEncoding and contentType of an Unknown, both empty */
const unknownTail = Buffer.from([(3 << 3) | WIRE_LEN, 0, (4 << 3) | WIRE_LEN, 0])

export interface ObjectMetaSummary {
  name: string
  namespace: string
  uid: string
  resourceVersion: string
  /** Absent when 0, as in JSON (the apiserver's protobuf always writes it). */
  generation?: number
  labels: Record<string, string>
  annotations: Record<string, string>
}

/** Reads ObjectMeta (field 1) of an object message. Repeated occurrences merge, as in protobuf. */
export function objectMeta(raw: Buffer): ObjectMetaSummary {
  const s: ObjectMetaSummary = { name: '', namespace: '', uid: '', resourceVersion: '', labels: {}, annotations: {} }
  const r = new FieldReader(raw)
  while (r.next()) {
    if (r.field !== 1) continue
    r.expect(WIRE_LEN)
    const m = new FieldReader(raw, r.start, r.end)
    while (m.next()) {
      switch (m.field) {
        case 1:
          s.name = m.string()
          break
        case 3:
          s.namespace = m.internedString()
          break
        case 5:
          s.uid = m.string()
          break
        case 6:
          s.resourceVersion = m.string()
          break
        case 7: {
          const g = m.int64()
          if (g === 0) delete s.generation
          else s.generation = g
          break
        }
        case 11:
          readMapEntry(m, s.labels)
          break
        case 12:
          readMapEntry(m, s.annotations)
          break
      }
    }
  }
  return s
}

function readMapEntry(m: FieldReader, into: Record<string, string>): void {
  m.expect(WIRE_LEN)
  const e = new FieldReader(m.buf, m.start, m.end)
  let key = ''
  let value = ''
  while (e.next()) {
    if (e.field === 1) key = e.internedString()
    else if (e.field === 2) value = e.internedString()
  }
  if (key === '__proto__') Object.defineProperty(into, key, { value, enumerable: true, writable: true, configurable: true })
  else into[key] = value
}

/**
 * The object message with ObjectMeta.resourceVersion replaced (the last occurrence, which is the one
 * that counts) or inserted in field order; every other byte is kept. An object without ObjectMeta
 * gets one, holding only the resourceVersion, in front.
 */
export function withResourceVersion(raw: Buffer, resourceVersion: string): Buffer {
  const rvLen = Buffer.byteLength(resourceVersion)
  const rvField = lenFieldSize(6, rvLen)
  // the last ObjectMeta occurrence
  let metaTag = -1
  let metaStart = 0
  let metaEnd = 0
  const r = new FieldReader(raw)
  while (r.next()) {
    if (r.field !== 1) continue
    r.expect(WIRE_LEN)
    metaTag = r.tagStart
    metaStart = r.start
    metaEnd = r.end
  }
  if (metaTag < 0) {
    const out = Buffer.allocUnsafe(lenFieldSize(1, rvField) + raw.length)
    let pos = writeLenHeader(out, 0, 1, rvField)
    pos = writeStringField(out, pos, 6, resourceVersion, rvLen)
    raw.copy(out, pos)
    return out
  }
  // the span [cutStart, cutEnd) inside ObjectMeta that the new field replaces
  let cutStart = -1
  let cutEnd = -1
  let insertAt = -1
  const m = new FieldReader(raw, metaStart, metaEnd)
  while (m.next()) {
    if (m.field === 6) {
      m.expect(WIRE_LEN)
      cutStart = m.tagStart
      cutEnd = m.pos
    } else if (m.field > 6 && insertAt < 0) {
      insertAt = m.tagStart
    }
  }
  if (cutStart < 0) cutStart = cutEnd = insertAt < 0 ? metaEnd : insertAt
  const newMeta = metaEnd - metaStart - (cutEnd - cutStart) + rvField
  const out = Buffer.allocUnsafe(metaTag + lenFieldSize(1, newMeta) + (raw.length - metaEnd))
  raw.copy(out, 0, 0, metaTag)
  let pos = writeLenHeader(out, metaTag, 1, newMeta)
  pos += raw.copy(out, pos, metaStart, cutStart)
  pos = writeStringField(out, pos, 6, resourceVersion, rvLen)
  pos += raw.copy(out, pos, cutEnd, metaEnd)
  raw.copy(out, pos, metaEnd)
  return out
}

export interface WatchEventParts {
  type: string
  /** The RawExtension bytes: `k8s\0` + Unknown (a subarray of the frame). */
  object: Buffer
}

/** Decodes one protobuf watch frame, including its 4-byte big-endian length prefix. */
export function decodeWatchEvent(frame: Buffer): WatchEventParts {
  if (frame.length < 4) throw new ProtobufError('watch frame shorter than its length prefix')
  const length = frame.readUInt32BE(0)
  if (length !== frame.length - 4) {
    throw new ProtobufError(`watch frame length prefix ${length} does not match its ${frame.length - 4} bytes`)
  }
  const event: WatchEventParts = { type: '', object: emptyBuffer }
  const r = new FieldReader(frame, 4)
  while (r.next()) {
    if (r.field === 1) event.type = r.internedString()
    else if (r.field === 2) {
      r.expect(WIRE_LEN)
      const x = new FieldReader(frame, r.start, r.end)
      while (x.next()) if (x.field === 1) event.object = x.bytes()
    }
  }
  return event
}

/** A watch frame with its 4-byte length prefix, byte-identical to the apiserver's. */
export function encodeWatchEvent(type: string, object: Buffer): Buffer {
  const typeLen = Buffer.byteLength(type)
  const ext = lenFieldSize(1, object.length)
  const length = lenFieldSize(1, typeLen) + lenFieldSize(2, ext)
  const out = Buffer.allocUnsafe(4 + length)
  out.writeUInt32BE(length, 0)
  let pos = writeStringField(out, 4, 1, type, typeLen)
  pos = writeLenHeader(out, pos, 2, ext)
  writeBytesField(out, pos, 1, object)
  return out
}

const emptyBuffer = Buffer.alloc(0)
