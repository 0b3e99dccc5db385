// protobuf -> JSON for the kinds in schema.ts: reads an object message (skipping field numbers the
// schema does not know, as Go does) and writes the JSON Go's encoding/json would: omitempty, null for
// nil slices, maps, pointers without omitempty and zero times, keys in Go struct order. Malformed
// bytes end in a ProtobufError. Public entry points are re-exported by typed.ts.
import { splitList } from './protobuf.ts'
import { type FieldSpec, type MessageSpec, kindSpec, listItemKind } from './schema.ts'
import { type JsonObject, SchemaError, zeroJson } from './typed-encode.ts'
import { compareGoStrings, formatTime, isQuantity, setKey, zeroTimeSeconds } from './typed-values.ts'
import { FieldReader, ProtobufError, WIRE_LEN, WIRE_VARINT } from './wire.ts'

export interface DecodeOptions {
  /** Write kind and apiVersion first (default true; the items of most lists carry none). */
  typeMeta?: boolean
  /**
   * Told of each protobuf field the schema does not know (message name, field number), which the
   * JSON then lacks: an object from a newer apiserver. Without it such fields are skipped silently.
   */
  onUnknownField?: (message: string, field: number) => void
}

type UnknownHook = DecodeOptions['onUnknownField']

/** The JSON object for an object message of a known kind (runtime.Unknown.raw), as the apiserver writes it. */
export function decodeObject(raw: Buffer, apiVersion: string, kind: string, options: DecodeOptions = {}): JsonObject {
  const spec = kindSpec(apiVersion, kind)
  if (!spec) throw new SchemaError('', `${apiVersion} ${kind} is not a kind the typed codec knows`)
  const out: JsonObject = {}
  if (options.typeMeta !== false) {
    if (kind !== '') out.kind = kind
    if (apiVersion !== '') out.apiVersion = apiVersion
  }
  writeJson(spec.message, readMessage(spec.message, raw, 0, raw.length, [], options.onUnknownField), out)
  return out
}

/** The JSON list for a *List message of a known kind. */
export function decodeList(raw: Buffer, apiVersion: string, kind: string, options: DecodeOptions = {}): JsonObject {
  const item = listItemKind(apiVersion, kind)
  if (item === undefined) throw new SchemaError('', `${apiVersion} ${kind} is not a list the typed codec knows`)
  const typedItems = kindSpec(apiVersion, item)!.typedItems
  const parts = splitList(raw)
  const metadata: JsonObject = {}
  if (parts.resourceVersion !== '') metadata.resourceVersion = parts.resourceVersion
  if (parts.continue !== '') metadata.continue = parts.continue
  if (parts.remainingItemCount !== undefined) metadata.remainingItemCount = parts.remainingItemCount
  const items = parts.items.map(raw => decodeObject(raw, apiVersion, item, { ...options, typeMeta: typedItems }))
  return { kind, apiVersion, metadata, items }
}

/** Decoded fields of one message, by FieldSpec.index; messages nest as Slots, lists as arrays, maps as Maps. */
type Slots = unknown[]

function readMessage(msg: MessageSpec, buf: Buffer, start: number, end: number, slots: Slots, hook: UnknownHook): Slots {
  const r = new FieldReader(buf, start, end)
  while (r.next()) {
    const f = msg.byNumber[r.field]
    if (f === undefined) {
      hook?.(msg.name, r.field) // a field this schema does not know: skipped, as Go does
      continue
    }
    if (f.map) {
      r.expect(WIRE_LEN)
      let entries = slots[f.index] as Map<string, unknown> | undefined
      if (!entries) slots[f.index] = entries = new Map()
      readMapEntry(f, buf, r.start, r.end, entries, hook)
    } else if (f.repeated) {
      let list = slots[f.index] as unknown[] | undefined
      if (!list) slots[f.index] = list = []
      const packed = r.wire === WIRE_LEN && (f.type === 'int32' || f.type === 'int64' || f.type === 'bool')
      if (packed) readPacked(f, buf, r.start, r.end, list)
      else list.push(readValue(f, r, hook))
    } else if (f.type === 'message') {
      // a repeated occurrence of a singular message merges into the first, as in protobuf
      r.expect(WIRE_LEN)
      slots[f.index] = readMessage(f.message!, buf, r.start, r.end, (slots[f.index] as Slots | undefined) ?? [], hook)
    } else {
      slots[f.index] = readValue(f, r, hook)
    }
  }
  return slots
}

function readValue(f: FieldSpec, r: FieldReader, hook: UnknownHook): unknown {
  switch (f.type) {
    case 'string':
      return r.string()
    case 'bool':
      r.expect(WIRE_VARINT)
      return r.lo !== 0 || r.hi !== 0
    case 'int32':
      r.expect(WIRE_VARINT)
      return r.lo | 0
    case 'int64':
      return r.int64()
    case 'bytes':
      return r.bytes().toString('base64')
    case 'Time':
    case 'MicroTime':
      r.expect(WIRE_LEN)
      return readTime(r.buf, r.start, r.end, f.type === 'MicroTime')
    case 'Quantity': {
      r.expect(WIRE_LEN)
      let text = '0'
      const q = new FieldReader(r.buf, r.start, r.end)
      while (q.next()) if (q.field === 1) text = q.string()
      if (!isQuantity(text)) throw new ProtobufError(`malformed quantity ${JSON.stringify(text)} at offset ${r.tagStart}`)
      return text
    }
    case 'IntOrString': {
      r.expect(WIRE_LEN)
      let type = 0
      let intVal = 0
      let strVal = ''
      const x = new FieldReader(r.buf, r.start, r.end)
      while (x.next()) {
        if (x.field === 1) type = x.int64()
        else if (x.field === 2) intVal = (x.expect(WIRE_VARINT), x.lo | 0)
        else if (x.field === 3) strVal = x.string()
      }
      if (type !== 0 && type !== 1) throw new ProtobufError(`IntOrString type ${type} at offset ${r.tagStart}`)
      return type === 0 ? intVal : strVal
    }
    case 'FieldsV1': {
      r.expect(WIRE_LEN)
      let raw: string | undefined
      const x = new FieldReader(r.buf, r.start, r.end)
      while (x.next()) if (x.field === 1) raw = x.string()
      if (raw === undefined) return null
      try {
        return JSON.parse(raw)
      } catch {
        throw new ProtobufError(`fieldsV1 at offset ${r.tagStart} is not JSON`)
      }
    }
    case 'message':
      r.expect(WIRE_LEN)
      return readMessage(f.message!, r.buf, r.start, r.end, [], hook)
  }
}

/** A metav1.Timestamp as Go's JSON: null for the zero time; Time drops the nanoseconds (as Go does). */
function readTime(buf: Buffer, start: number, end: number, micro: boolean): string | null {
  if (start === end) return null
  let seconds = 0
  let nanos = 0
  const r = new FieldReader(buf, start, end)
  while (r.next()) {
    if (r.field === 1) seconds = r.int64()
    else if (r.field === 2) nanos = (r.expect(WIRE_VARINT), r.lo | 0)
  }
  if (!micro) nanos = 0
  if (seconds === zeroTimeSeconds && nanos === 0) return null
  const text = formatTime(seconds, nanos, micro ? 6 : 0)
  if (text === undefined) throw new ProtobufError(`time ${seconds}s outside the years 0 to 9999 at offset ${start}`)
  return text
}

function readMapEntry(f: FieldSpec, buf: Buffer, start: number, end: number, into: Map<string, unknown>, hook: UnknownHook): void {
  let key = ''
  let value: unknown
  const r = new FieldReader(buf, start, end)
  while (r.next()) {
    if (r.field === 1) key = r.string()
    else if (r.field === 2) value = readValue(f, r, hook)
  }
  into.set(key, value === undefined ? (f.type === 'message' ? [] : zeroJson(f)) : value)
}

/** Packed repeated varints (gogo writes these fields unpacked, but protobuf readers accept both). */
function readPacked(f: FieldSpec, buf: Buffer, start: number, end: number, list: unknown[]): void {
  let pos = start
  while (pos < end) {
    let lo = 0
    let hi = 0
    for (let i = 0; ; i++) {
      if (pos >= end || i === 10) throw new ProtobufError(`malformed packed varint at offset ${pos}`)
      const b = buf[pos++]
      const bits = b & 0x7f
      if (i < 4) lo |= bits << (7 * i)
      else if (i === 4) {
        lo |= bits << 28
        hi |= bits >>> 4
      } else hi |= bits << (7 * i - 32)
      if (b < 0x80) break
    }
    lo >>>= 0
    hi >>>= 0
    if (f.type === 'bool') list.push(lo !== 0 || hi !== 0)
    else if (f.type === 'int32') list.push(lo | 0)
    else list.push(hi & 0x80000000 ? -((~hi >>> 0) * 2 ** 32 + (~lo >>> 0) + 1) : hi * 2 ** 32 + lo)
  }
}

/** Go's encoding/json rules, in struct order. */
function writeJson(msg: MessageSpec, slots: Slots, out: JsonObject): JsonObject {
  for (const f of msg.fields) {
    const v = slots[f.index]
    if (f.inline) {
      writeJson(f.message!, (v as Slots | undefined) ?? [], out)
    } else if (f.repeated) {
      const list = v as unknown[] | undefined
      if (list && list.length > 0) {
        out[f.json] = f.type === 'message' ? list.map(e => writeJson(f.message!, e as Slots, {})) : list
      } else if (!f.omitempty) out[f.json] = null // a nil slice
    } else if (f.map) {
      const entries = v as Map<string, unknown> | undefined
      if (entries && entries.size > 0) {
        const o: JsonObject = {}
        for (const key of [...entries.keys()].sort(compareGoStrings)) {
          const e = entries.get(key)
          setKey(o, key, f.type === 'message' ? writeJson(f.message!, e as Slots, {}) : e)
        }
        out[f.json] = o
      } else if (!f.omitempty) out[f.json] = null // a nil map
    } else if (f.type === 'message') {
      if (v !== undefined) out[f.json] = writeJson(f.message!, v as Slots, {})
      else if (!f.pointer)
        out[f.json] = writeJson(f.message!, [], {}) // omitempty never omits a struct
      else if (!f.omitempty) out[f.json] = null
    } else if (v === undefined) {
      if (f.pointer) {
        if (!f.omitempty) out[f.json] = null
      } else if (!(f.omitempty && isEmptyScalar(f.type))) out[f.json] = zeroJson(f)
    } else if (f.pointer || !(f.omitempty && v === zeroJson(f) && isEmptyScalar(f.type))) {
      out[f.json] = v
    }
  }
  return out
}

/** The types whose zero value omitempty leaves out (structs such as Time and Quantity it never does). */
function isEmptyScalar(type: FieldSpec['type']): boolean {
  return type === 'string' || type === 'bool' || type === 'int32' || type === 'int64' || type === 'bytes'
}
