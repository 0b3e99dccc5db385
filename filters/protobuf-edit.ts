// Wire-level edits of protobuf object messages for the object filters: the output is a list of
// operations on the source buffer (copy a byte range, write new bytes, write a length header), so
// every untouched field is copied byte for byte and only the length headers on the path to a change
// are rebuilt. A filter reads the fields it needs as Spans, says per field occurrence what becomes of
// it (keep, drop, replace) and what to insert where a field is missing, and builds once.
//
// Every malformed input ends in a ProtobufError: FieldReader checks framing, and a field the
// filter descends into must be length-delimited.
import { FieldReader, ProtobufError, WIRE_LEN, WIRE_VARINT, lenFieldSize, varintSize, writeLenHeader, writeVarint } from '../lib/codec/wire.ts'

export { ProtobufError } from '../lib/codec/wire.ts'

const COPY = 0
const HEADER = 1
const LITERAL = 2

export class Edit {
  /** triples: (COPY, from, to), (LITERAL, index in literals, 0), (HEADER, field, payload length; while open: the size at opening) */
  private readonly ops: number[] = []
  private readonly literals: Buffer[] = []
  /** bytes the operations so far produce */
  size = 0

  copy(from: number, to: number): void {
    if (to <= from) return
    const ops = this.ops
    const n = ops.length
    if (n >= 3 && ops[n - 3] === COPY && ops[n - 1] === from) ops[n - 1] = to
    else ops.push(COPY, from, to)
    this.size += to - from
  }

  /** New bytes (a whole field, tag included). */
  literal(bytes: Buffer): void {
    if (bytes.length === 0) return
    this.ops.push(LITERAL, this.literals.length, 0)
    this.literals.push(bytes)
    this.size += bytes.length
  }

  /** Starts a length-delimited field whose payload is what is added until close(). */
  open(field: number): number {
    const at = this.ops.length
    this.ops.push(HEADER, field, this.size)
    return at
  }

  close(at: number): void {
    const ops = this.ops
    const payload = this.size - ops[at + 2]
    ops[at + 2] = payload
    this.size += varintSize(ops[at + 1] * 8 + WIRE_LEN) + varintSize(payload)
  }

  /** The output: one exact-size allocation, one pass of copies. */
  build(src: Buffer): Buffer {
    const out = Buffer.allocUnsafe(this.size)
    const ops = this.ops
    let pos = 0
    for (let i = 0; i < ops.length; i += 3) {
      if (ops[i] === COPY) pos += src.copy(out, pos, ops[i + 1], ops[i + 2])
      else if (ops[i] === LITERAL) pos += this.literals[ops[i + 1]].copy(out, pos)
      else pos = writeLenHeader(out, pos, ops[i + 1], ops[i + 2])
    }
    if (pos !== out.length) throw new Error(`protobuf edit wrote ${pos} of ${out.length} bytes`)
    return out
  }
}

/** One field occurrence: its number and wire type, where its tag starts, its value and the offset after it. */
export interface Span {
  field: number
  wire: number
  tagStart: number
  /** the payload for length-delimited fields, the raw value otherwise */
  start: number
  end: number
  next: number
}

/** The fields of the message src[start, end), in wire order. */
export function spansOf(src: Buffer, start = 0, end = src.length): Span[] {
  const out: Span[] = []
  const r = new FieldReader(src, start, end)
  while (r.next()) out.push({ field: r.field, wire: r.wire, tagStart: r.tagStart, start: r.start, end: r.end, next: r.pos })
  return out
}

/** The fields of an embedded message (the span must be length-delimited). */
export function inner(src: Buffer, span: Span): Span[] {
  expectLen(span)
  return spansOf(src, span.start, span.end)
}

export function expectLen(span: Span): void {
  if (span.wire !== WIRE_LEN) throw new ProtobufError(`field ${span.field} has wire type ${span.wire}, expected ${WIRE_LEN} (offset ${span.tagStart})`)
}

/** The string value of a field's last occurrence (the one that counts), '' when absent. */
export function lastString(src: Buffer, spans: Span[], field: number): string {
  let value = ''
  for (const s of spans) {
    if (s.field !== field) continue
    expectLen(s)
    value = src.toString('utf8', s.start, s.end)
  }
  return value
}

/** The bytes of a field's last occurrence, undefined when absent. */
export function lastBytes(src: Buffer, spans: Span[], field: number): Buffer | undefined {
  let value: Buffer | undefined
  for (const s of spans) {
    if (s.field !== field) continue
    expectLen(s)
    value = src.subarray(s.start, s.end)
  }
  return value
}

/**
 * The one occurrence of a singular embedded message the filter rewrites (undefined when absent). An
 * object that writes it more than once (merged by decoders; the apiserver never does) is refused.
 */
export function single(spans: Span[], field: number): Span | undefined {
  let found: Span | undefined
  for (const s of spans) {
    if (s.field !== field) continue
    if (found) throw new ProtobufError(`message field ${field} occurs more than once (offset ${s.tagStart}); not filtered`)
    expectLen(s)
    found = s
  }
  return found
}

export type Emit = (edit: Edit) => void
/** What becomes of one field occurrence: undefined keeps its bytes, null drops it, an Emit writes its replacement. */
export type Patch = Emit | null | undefined
/** A field written where it is missing: before the first field of a higher number (gogo writes in number order). */
export interface Insert {
  field: number
  emit: Emit
}

export class Patches {
  readonly byIndex: Patch[]
  readonly inserts: Insert[] = []
  constructor(readonly spans: Span[]) {
    this.byIndex = new Array<Patch>(spans.length).fill(undefined)
  }

  get changed(): boolean {
    return this.inserts.length > 0 || this.byIndex.some(p => p !== undefined)
  }

  /**
   * A scalar field set to `bytes` (a whole field, tag included): its first occurrence replaced, later
   * ones dropped, inserted in field order when absent. Nothing changes when it is already exactly that.
   */
  set(src: Buffer, field: number, bytes: Buffer): void {
    const at: number[] = []
    this.spans.forEach((s, i) => s.field === field && at.push(i))
    if (at.length === 1) {
      const s = this.spans[at[0]]
      if (bytes.equals(src.subarray(s.tagStart, s.next))) return
    }
    if (at.length === 0) this.inserts.push({ field, emit: edit => edit.literal(bytes) })
    at.forEach((i, n) => (this.byIndex[i] = n === 0 ? edit => edit.literal(bytes) : null))
  }

  /** Every occurrence of a repeated field replaced by the given whole fields, at the first one's place. */
  replaceAll(src: Buffer, field: number, fields: Buffer[]): void {
    const at: number[] = []
    this.spans.forEach((s, i) => s.field === field && at.push(i))
    const same = at.length === fields.length && at.every((i, n) => fields[n].equals(src.subarray(this.spans[i].tagStart, this.spans[i].next)))
    if (same) return
    const emit: Emit = edit => fields.forEach(f => edit.literal(f))
    if (at.length === 0) this.inserts.push({ field, emit })
    at.forEach((i, n) => (this.byIndex[i] = n === 0 ? emit : null))
  }

  /** An embedded message rewritten by its own patches (nothing when they change nothing). */
  nest(src: Buffer, index: number, patches: Patches): void {
    if (!patches.changed) return
    const span = this.spans[index]
    this.byIndex[index] = edit => {
      const h = edit.open(span.field)
      patches.emit(src, span.start, span.end)(edit)
      edit.close(h)
    }
  }

  /** The message src[start, end) with the patches applied. */
  emit(src: Buffer, start: number, end: number): Emit {
    const inserts = [...this.inserts].sort((a, b) => a.field - b.field)
    return edit => {
      let cursor = start
      let k = 0
      this.spans.forEach((s, i) => {
        while (k < inserts.length && inserts[k].field < s.field) {
          edit.copy(cursor, s.tagStart)
          cursor = s.tagStart
          inserts[k++].emit(edit)
        }
        const p = this.byIndex[i]
        if (p === undefined) return
        edit.copy(cursor, s.tagStart)
        cursor = s.next
        if (p !== null) p(edit)
      })
      edit.copy(cursor, end)
      while (k < inserts.length) inserts[k++].emit(edit)
    }
  }
}

/** The object message raw with the top-level patches applied: raw itself when they change nothing. */
export function applyPatches(raw: Buffer, patches: Patches): Buffer {
  if (!patches.changed) return raw
  const edit = new Edit()
  patches.emit(raw, 0, raw.length)(edit)
  const out = edit.build(raw)
  return out.equals(raw) ? raw : out
}

/** A whole string field (tag, length, UTF-8 bytes; a Buffer is written as it is). */
export function stringField(field: number, value: string | Buffer): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value
  const out = Buffer.allocUnsafe(lenFieldSize(field, bytes.length))
  bytes.copy(out, writeLenHeader(out, 0, field, bytes.length))
  return out
}

/** A whole length-delimited field holding the given fields. */
export function messageField(field: number, ...fields: Buffer[]): Buffer {
  const payload = Buffer.concat(fields)
  return stringField(field, payload)
}

/** A whole varint field (non-negative integers). */
export function varintField(field: number, n: number): Buffer {
  const tag = field * 8 + WIRE_VARINT
  const out = Buffer.allocUnsafe(varintSize(tag) + varintSize(n))
  writeVarint(out, writeVarint(out, 0, tag), n)
  return out
}
