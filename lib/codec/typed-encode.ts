// JSON -> protobuf for the kinds in schema.ts: writes an object message as gogo-protobuf does
// (field-number order, non-pointer fields always, pointers only when set, maps sorted by key), so
// the bytes equal the apiserver's. JSON the schema cannot carry exactly (an unknown field, a wrong
// type) is refused with a SchemaError naming its path, so callers can fall back instead of losing
// data. Public entry points are re-exported by typed.ts.
import { assembleList } from './protobuf.ts'
import type { ListParts } from './protobuf.ts'
import { type FieldSpec, type MessageSpec, kindSpec, listItemKind } from './schema.ts'
import { fromBase64, goJson, goSortedKeys, isQuantity, parseTime, zeroTimeSeconds } from './typed-values.ts'
import { WIRE_LEN, WIRE_VARINT, varintSize, writeVarint } from './wire.ts'

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

/**
 * The protobuf object message (what goes in runtime.Unknown.raw) for a JSON object of a known kind.
 * apiVersion and kind default to the object's own (list items have none); where the object has
 * them too they must agree, since protobuf keeps them only in the envelope.
 */
export function encodeObject(obj: unknown, apiVersion?: string, kind?: string): Buffer {
  if (!isObject(obj)) throw new SchemaError('', 'not a JSON object')
  const av = apiVersion ?? obj.apiVersion
  const k = kind ?? obj.kind
  if (typeof av !== 'string' || typeof k !== 'string') throw new SchemaError('', 'apiVersion and kind are needed')
  const spec = kindSpec(av, k)
  if (!spec) throw new SchemaError('', `${av} ${k} is not a kind the typed codec knows`)
  for (const key of ['apiVersion', 'kind'] as const) {
    const v = obj[key]
    const want = key === 'kind' ? k : av
    if (v !== undefined && v !== want) throw new SchemaError(key, `${String(v)} where ${want} was expected`)
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
    if (!isInteger(remaining, -(2 ** 63), 2 ** 63 - 1)) throw new SchemaError('metadata.remainingItemCount', 'expected an integer')
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
      if (!(f.repeated || f.map || f.pointer || f.type === 'bytes' || f.added)) writeValue(w, f, f.number, zeroJson(f), at)
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
export function zeroJson(f: FieldSpec): unknown {
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

  /** The bytes written, copied out so a stored object does not hold the whole growing buffer. */
  result(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.pos))
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

// ---------------------------------------------------------------- helpers

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** An integer in [min, max]; for int64 (max 2^63 - 1, which a double rounds up to 2^63) max is excluded. */
function isInteger(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && (max === 2 ** 63 ? v < max : v <= max)
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`
}

function checkKeys(obj: JsonObject, allowed: string[], path: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) throw new SchemaError(join(path, key), 'field not in the list schema')
  }
}

function stringOr(v: unknown, at: string): string {
  if (v === undefined || v === null) return ''
  if (typeof v !== 'string') throw new SchemaError(at, 'expected a string')
  return v
}
