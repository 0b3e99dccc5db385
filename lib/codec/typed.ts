// JSON <-> protobuf for the built-in kinds in schema.ts, field by field. The hub stores what the
// apiserver sent; when it must answer in the other format (JSON to a client while it only holds
// protobuf, or a simulator that speaks protobuf) this writes what the apiserver would have written:
// protobuf as gogo-protobuf marshals it (field-number order, non-pointer fields always, pointers when
// set, maps sorted by key) and JSON as Go's encoding/json does (omitempty, null for nil slices, maps
// and zero times, keys in Go struct order — so key order matches the apiserver's too, except that a
// JavaScript object lists integer-like keys such as "80" first).
//
// The encoder refuses (SchemaError, naming the path) any JSON field the schema does not know, so a
// caller can fall back instead of losing data. The decoder skips protobuf fields it does not know
// (as Go does) and reports malformed bytes as ProtobufError. Integers beyond 2^53 lose precision.
import { assembleList, decodeUnknown, decodeWatchEvent, encodeUnknown, encodeWatchEvent, splitList } from './protobuf.ts'
import type { ListParts } from './protobuf.ts'
import { type FieldSpec, type MessageSpec, kindSpec } from './schema.ts'
import { compareGoStrings, formatTime, fromBase64, goJson, goSortedKeys, isQuantity, parseTime, setKey, zeroTimeSeconds } from './typed-values.ts'
import { FieldReader, ProtobufError, WIRE_LEN, WIRE_VARINT, varintSize, writeVarint } from './wire.ts'

export { ProtobufError } from './wire.ts'

export type JsonObject = Record<string, unknown>

/** A JSON object the schema cannot represent exactly; `path` names the field (e.g. `spec.ports[0].foo`). */
export class SchemaError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path === '' ? 'object' : path}: ${reason}`)
    this.name = 'SchemaError'
  }
}

/** True when the codec knows this kind (or the list of a kind it knows) field by field. */
export function isTypedKind(apiVersion: string, kind: string): boolean {
  return kindSpec(apiVersion, kind) !== undefined || listItemKind(apiVersion, kind) !== undefined
}

function listItemKind(apiVersion: string, kind: string): string | undefined {
  if (!kind.endsWith('List')) return undefined
  const item = kind.slice(0, -4)
  return item !== 'Status' && kindSpec(apiVersion, item) ? item : undefined
}

// ---------------------------------------------------------------- JSON -> protobuf

/** The protobuf object message (what goes in runtime.Unknown.raw) for a JSON object of a known kind. */
export function encodeObject(obj: unknown, apiVersion?: string, kind?: string): Buffer {
  if (!isObject(obj)) throw new SchemaError('', 'not a JSON object')
  const av = apiVersion ?? obj.apiVersion
  const k = kind ?? obj.kind
  if (typeof av !== 'string' || typeof k !== 'string') throw new SchemaError('', 'apiVersion and kind are needed')
  const spec = kindSpec(av, k)
  if (!spec) throw new SchemaError('', `${av} ${k} is not a kind the typed codec knows`)
  for (const key of ['apiVersion', 'kind'] as const) {
    const v = obj[key]
    if (v !== undefined && v !== (key === 'kind' ? k : av)) throw new SchemaError(key, `${String(v)} where ${key === 'kind' ? k : av} was expected`)
  }
  const w = new Writer()
  encodeMessage(w, spec.message, obj, '', true)
  return w.result()
}

/** A *List message for a JSON list of a known kind (ListMeta as the apiserver writes it). */
export function encodeList(list: unknown): Buffer {
  if (!isObject(list)) throw new SchemaError('', 'not a JSON object')
  const { apiVersion, kind } = list
  const item = typeof apiVersion === 'string' && typeof kind === 'string' ? listItemKind(apiVersion, kind) : undefined
  if (item === undefined) throw new SchemaError('', `${String(apiVersion)} ${String(kind)} is not a list the typed codec knows`)
  checkKeys(list, ['kind', 'apiVersion', 'metadata', 'items'], '')
  const meta = list.metadata ?? {}
  if (!isObject(meta)) throw new SchemaError('metadata', 'expected an object')
  checkKeys(meta, ['selfLink', 'resourceVersion', 'continue', 'remainingItemCount'], 'metadata')
  if ((meta.selfLink ?? '') !== '') throw new SchemaError('metadata.selfLink', 'a list selfLink is not kept')
  const parts: ListParts = {
    resourceVersion: stringOr(meta.resourceVersion, 'metadata.resourceVersion'),
    continue: stringOr(meta.continue, 'metadata.continue'),
    items: [],
  }
  const remaining = meta.remainingItemCount
  if (remaining !== undefined && remaining !== null) {
    if (!isInteger(remaining, -(2 ** 63), 2 ** 63)) throw new SchemaError('metadata.remainingItemCount', 'expected an integer')
    parts.remainingItemCount = remaining
  }
  const items = list.items ?? []
  if (!Array.isArray(items)) throw new SchemaError('items', 'expected an array')
  items.forEach((obj, i) => {
    try {
      parts.items.push(encodeObject(obj, apiVersion as string, item))
    } catch (err) {
      if (err instanceof SchemaError) throw new SchemaError(`items[${i}]${err.path === '' ? '' : '.'}${err.path}`, err.reason)
      throw err
    }
  })
  return assembleList(parts)
}

/** `k8s\0` + runtime.Unknown for a JSON object or list of a known kind: the apiserver's protobuf body. */
export function encodeBody(obj: unknown): Buffer {
  if (!isObject(obj) || typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') {
    throw new SchemaError('', 'a JSON object with apiVersion and kind is needed')
  }
  const { apiVersion, kind } = obj
  const raw = kindSpec(apiVersion, kind) ? encodeObject(obj) : encodeList(obj)
  return encodeUnknown({ apiVersion, kind, raw })
}

/** A protobuf watch frame (length prefix included) for a JSON watch event `{type, object}`. */
export function encodeWatchFrame(event: { type: string; object: unknown }): Buffer {
  return encodeWatchEvent(event.type, encodeBody(event.object))
}

function encodeMessage(w: Writer, msg: MessageSpec, obj: JsonObject, path: string, root = false): void {
  for (const key of Object.keys(obj)) {
    if (!msg.jsonKeys.has(key) && !(root && (key === 'kind' || key === 'apiVersion'))) {
      throw new SchemaError(join(path, key), `field not in the schema of ${msg.name}`)
    }
  }
  writeFields(w, msg, obj, path)
}

function writeFields(w: Writer, msg: MessageSpec, obj: JsonObject, path: string): void {
  for (const f of msg.wireOrder) {
    if (f.inline) {
      const mark = w.begin(f.number)
      writeFields(w, f.message!, obj, path)
      w.end(mark)
      continue
    }
    const at = join(path, f.json)
    const v = Object.hasOwn(obj, f.json) ? obj[f.json] : undefined
    if (v === undefined || v === null) {
      // unset: Go leaves nil pointers, slices, maps and []byte out, and writes every other field's zero
      if (!(f.repeated || f.map || f.pointer || f.type === 'bytes')) writeValue(w, f, f.number, zeroJson(f), at)
    } else if (f.repeated) {
      if (!Array.isArray(v)) throw new SchemaError(at, 'expected an array')
      for (let i = 0; i < v.length; i++) writeValue(w, f, f.number, v[i] ?? zeroJson(f), `${at}[${i}]`)
    } else if (f.map) {
      if (!isObject(v)) throw new SchemaError(at, 'expected an object')
      for (const key of goSortedKeys(v)) {
        const mark = w.begin(f.number)
        w.stringField(1, key)
        const value = v[key]
        // a null []byte value stays unwritten (gogo writes map bytes only when non-nil)
        if (value !== null || f.type !== 'bytes') writeValue(w, f, 2, value ?? zeroJson(f), `${at}[${JSON.stringify(key)}]`)
        w.end(mark)
      }
    } else {
      writeValue(w, f, f.number, v, at)
    }
  }
}

function writeValue(w: Writer, f: FieldSpec, num: number, v: unknown, at: string): void {
  switch (f.type) {
    case 'string':
      if (typeof v !== 'string') throw new SchemaError(at, 'expected a string')
      return w.stringField(num, v)
    case 'bool':
      if (typeof v !== 'boolean') throw new SchemaError(at, 'expected true or false')
      return w.varintField(num, v ? 1 : 0)
    case 'int32':
      if (!isInteger(v, -(2 ** 31), 2 ** 31 - 1)) throw new SchemaError(at, 'expected a 32-bit integer')
      return w.varintField(num, v)
    case 'int64':
      if (!isInteger(v, -(2 ** 63), 2 ** 63 - 1)) throw new SchemaError(at, 'expected a 64-bit integer')
      return w.varintField(num, v)
    case 'bytes': {
      const bytes = typeof v === 'string' ? fromBase64(v) : undefined
      if (!bytes) throw new SchemaError(at, 'expected base64 text')
      return w.bytesField(num, bytes)
    }
    case 'Time':
    case 'MicroTime': {
      const t = typeof v === 'string' ? parseTime(v) : undefined
      if (v !== null && t === undefined) throw new SchemaError(at, 'expected an RFC 3339 time or null')
      const mark = w.begin(num)
      // the zero time is an empty message; Time keeps whole seconds only, MicroTime also the nanoseconds
      if (t && !(t.seconds === zeroTimeSeconds && t.nanos === 0)) {
        w.varintField(1, t.seconds)
        w.varintField(2, f.type === 'Time' ? 0 : t.nanos)
      }
      return w.end(mark)
    }
    case 'Quantity': {
      if (typeof v !== 'string' || !isQuantity(v)) throw new SchemaError(at, 'expected a quantity string')
      const mark = w.begin(num)
      w.stringField(1, v)
      return w.end(mark)
    }
    case 'IntOrString': {
      const isInt = isInteger(v, -(2 ** 31), 2 ** 31 - 1)
      if (!isInt && typeof v !== 'string') throw new SchemaError(at, 'expected a 32-bit integer or a string')
      const mark = w.begin(num)
      w.varintField(1, isInt ? 0 : 1)
      w.varintField(2, isInt ? v : 0)
      w.stringField(3, isInt ? '' : (v as string))
      return w.end(mark)
    }
    case 'FieldsV1': {
      const mark = w.begin(num)
      w.stringField(1, goJson(v))
      return w.end(mark)
    }
    case 'message': {
      if (!isObject(v)) throw new SchemaError(at, 'expected an object')
      const mark = w.begin(num)
      encodeMessage(w, f.message!, v, at)
      return w.end(mark)
    }
  }
}

/** The JSON a Go zero value of this (non-pointer) field marshals to. */
function zeroJson(f: FieldSpec): unknown {
  switch (f.type) {
    case 'string':
    case 'bytes':
      return ''
    case 'bool':
      return false
    case 'int32':
    case 'int64':
    case 'IntOrString':
      return 0
    case 'Quantity':
      return '0'
    case 'Time':
    case 'MicroTime':
    case 'FieldsV1':
      return null
    case 'message':
      return {}
  }
}

/** A growing buffer; nested messages reserve 5 bytes for their length and close the gap at the end. */
class Writer {
  private buf = Buffer.allocUnsafe(1024)
  private pos = 0

  result(): Buffer {
    return this.buf.subarray(0, this.pos)
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < this.pos + n) size *= 2
    const next = Buffer.allocUnsafe(size)
    this.buf.copy(next, 0, 0, this.pos)
    this.buf = next
  }

  private varint(n: number): void {
    this.room(10)
    this.pos = writeVarint(this.buf, this.pos, n)
  }

  varintField(num: number, n: number): void {
    this.varint(num * 8 + WIRE_VARINT)
    this.varint(n)
  }

  bytesField(num: number, bytes: Uint8Array): void {
    this.varint(num * 8 + WIRE_LEN)
    this.varint(bytes.length)
    this.room(bytes.length)
    this.buf.set(bytes, this.pos)
    this.pos += bytes.length
  }

  stringField(num: number, s: string): void {
    const len = Buffer.byteLength(s)
    this.varint(num * 8 + WIRE_LEN)
    this.varint(len)
    this.room(len)
    this.pos += this.buf.write(s, this.pos, len, 'utf8')
  }

  /** Starts a length-delimited field; returns the mark end() needs. */
  begin(num: number): number {
    this.varint(num * 8 + WIRE_LEN)
    this.room(5)
    const mark = this.pos
    this.pos += 5
    return mark
  }

  end(mark: number): void {
    const start = mark + 5
    const len = this.pos - start
    const size = varintSize(len)
    writeVarint(this.buf, mark, len)
    if (size < 5) this.buf.copyWithin(mark + size, start, this.pos)
    this.pos = mark + size + len
  }
}

// ---------------------------------------------------------------- protobuf -> JSON

/**
 * The JSON object for an object message of a known kind (runtime.Unknown.raw), as the apiserver
 * writes it; kind and apiVersion lead unless typeMeta is false (list items carry none).
 */
export function decodeObject(raw: Buffer, apiVersion: string, kind: string, typeMeta = true): JsonObject {
  const spec = kindSpec(apiVersion, kind)
  if (!spec) throw new SchemaError('', `${apiVersion} ${kind} is not a kind the typed codec knows`)
  const out: JsonObject = {}
  if (typeMeta && kind !== '') out.kind = kind
  if (typeMeta && apiVersion !== '') out.apiVersion = apiVersion
  writeJson(spec.message, readMessage(spec.message, raw, 0, raw.length, []), out)
  return out
}

/** The JSON list for a *List message of a known kind. */
export function decodeList(raw: Buffer, apiVersion: string, kind: string): JsonObject {
  const item = listItemKind(apiVersion, kind)
  if (item === undefined) throw new SchemaError('', `${apiVersion} ${kind} is not a list the typed codec knows`)
  const typedItems = kindSpec(apiVersion, item)!.typedItems
  const parts = splitList(raw)
  const metadata: JsonObject = {}
  if (parts.resourceVersion !== '') metadata.resourceVersion = parts.resourceVersion
  if (parts.continue !== '') metadata.continue = parts.continue
  if (parts.remainingItemCount !== undefined) metadata.remainingItemCount = parts.remainingItemCount
  const items = parts.items.map(raw => decodeObject(raw, apiVersion, item, typedItems))
  return { kind, apiVersion, metadata, items }
}

/** The JSON for a protobuf body (`k8s\0` + runtime.Unknown) holding an object or list of a known kind. */
export function decodeBody(body: Buffer): JsonObject {
  const u = decodeUnknown(body)
  if (u.contentEncoding !== '') throw new ProtobufError(`unsupported runtime.Unknown contentEncoding ${u.contentEncoding}`)
  return kindSpec(u.apiVersion, u.kind) ? decodeObject(u.raw, u.apiVersion, u.kind) : decodeList(u.raw, u.apiVersion, u.kind)
}

/** The JSON watch event `{type, object}` for one protobuf watch frame (length prefix included). */
export function decodeWatchFrame(frame: Buffer): { type: string; object: JsonObject } {
  const event = decodeWatchEvent(frame)
  return { type: event.type, object: decodeBody(event.object) }
}

/** Decoded fields of one message, by FieldSpec.index; messages nest as Slots, lists as arrays, maps as Maps. */
type Slots = unknown[]

function readMessage(msg: MessageSpec, buf: Buffer, start: number, end: number, slots: Slots): Slots {
  const r = new FieldReader(buf, start, end)
  while (r.next()) {
    const f = msg.byNumber[r.field]
    if (f === undefined) continue // a field this schema does not know: skipped, as Go does
    if (f.map) {
      r.expect(WIRE_LEN)
      let entries = slots[f.index] as Map<string, unknown> | undefined
      if (!entries) slots[f.index] = entries = new Map()
      readMapEntry(f, buf, r.start, r.end, entries)
    } else if (f.repeated) {
      let list = slots[f.index] as unknown[] | undefined
      if (!list) slots[f.index] = list = []
      if (r.wire === WIRE_LEN && (f.type === 'int32' || f.type === 'int64' || f.type === 'bool')) readPacked(f, buf, r.start, r.end, list)
      else list.push(readValue(f, r))
    } else if (f.type === 'message') {
      // a repeated occurrence of a singular message merges into the first, as in protobuf
      r.expect(WIRE_LEN)
      slots[f.index] = readMessage(f.message!, buf, r.start, r.end, (slots[f.index] as Slots | undefined) ?? [])
    } else {
      slots[f.index] = readValue(f, r)
    }
  }
  return slots
}

function readValue(f: FieldSpec, r: FieldReader): unknown {
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
      return readMessage(f.message!, r.buf, r.start, r.end, [])
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

function readMapEntry(f: FieldSpec, buf: Buffer, start: number, end: number, into: Map<string, unknown>): void {
  let key = ''
  let value: unknown
  const r = new FieldReader(buf, start, end)
  while (r.next()) {
    if (r.field === 1) key = r.string()
    else if (r.field === 2) value = readValue(f, r)
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
      if (list && list.length > 0) out[f.json] = f.type === 'message' ? list.map(e => writeJson(f.message!, e as Slots, {})) : list
      else if (!f.omitempty) out[f.json] = null // a nil slice
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
      else if (!f.pointer) out[f.json] = writeJson(f.message!, [], {}) // omitempty never omits a struct
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

// ---------------------------------------------------------------- helpers

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function isInteger(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`
}

function checkKeys(obj: JsonObject, allowed: string[], path: string): void {
  for (const key of Object.keys(obj)) if (!allowed.includes(key)) throw new SchemaError(join(path, key), 'field not in the list schema')
}

function stringOr(v: unknown, at: string): string {
  if (v === undefined || v === null) return ''
  if (typeof v !== 'string') throw new SchemaError(at, 'expected a string')
  return v
}
