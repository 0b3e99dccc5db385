// Protocol-buffers wire primitives: a bounds-checked field reader and exact-size varint writers.
// Decoding never reads past its window and never allocates per byte; every malformed input ends in
// a ProtobufError (never a RangeError, never a loop that does not advance).

import { internedAscii } from './intern.ts'

export class ProtobufError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ProtobufError'
  }
}

export const WIRE_VARINT = 0
export const WIRE_FIXED64 = 1
export const WIRE_LEN = 2
export const WIRE_FIXED32 = 5

const two32 = 0x100000000

/**
 * Walks the fields of one message in buf[start, end). After next() returns true:
 * `field` and `wire` describe the field, `tagStart` is the offset of its tag, `start`/`end`
 * bound its value (the payload for length-delimited fields, the raw bytes otherwise) and
 * `pos` is the offset after it. For varints the value is in `lo`/`hi` (two unsigned 32-bit halves).
 */
export class FieldReader {
  pos: number
  field = 0
  wire = 0
  tagStart = 0
  start = 0
  end = 0
  lo = 0
  hi = 0

  constructor(
    readonly buf: Buffer,
    readonly from = 0,
    readonly limit = buf.length,
  ) {
    if (!(from >= 0 && limit <= buf.length && from <= limit)) throw new ProtobufError('message window outside the buffer')
    this.pos = from
  }

  next(): boolean {
    if (this.pos >= this.limit) return false
    this.tagStart = this.pos
    this.varint()
    const tag = this.lo
    if (this.hi !== 0 || tag >>> 3 === 0) throw new ProtobufError(`invalid tag at offset ${this.tagStart}`)
    this.field = tag >>> 3
    this.wire = tag & 7
    const begin = this.pos
    switch (this.wire) {
      case WIRE_VARINT:
        this.varint()
        break
      case WIRE_FIXED64:
        if (this.limit - begin < 8) throw truncated(begin)
        this.pos = begin + 8
        break
      case WIRE_LEN: {
        this.varint()
        const len = this.lo
        if (this.hi !== 0 || len > this.limit - this.pos) throw truncated(this.pos)
        this.start = this.pos
        this.pos += len
        this.end = this.pos
        return true
      }
      case WIRE_FIXED32:
        if (this.limit - begin < 4) throw truncated(begin)
        this.pos = begin + 4
        break
      default:
        throw new ProtobufError(`unsupported wire type ${this.wire} for field ${this.field} at offset ${this.tagStart}`)
    }
    this.start = begin
    this.end = this.pos
    return true
  }

  /** Throws unless the current field has the given wire type. */
  expect(wire: number): void {
    if (this.wire !== wire) {
      throw new ProtobufError(`field ${this.field} has wire type ${this.wire}, expected ${wire} (offset ${this.tagStart})`)
    }
  }

  string(): string {
    this.expect(WIRE_LEN)
    return this.start === this.end ? '' : this.buf.toString('utf8', this.start, this.end)
  }

  /** string() for values that recur across objects (kinds, namespaces, labels): one string per value (./intern.ts). */
  internedString(): string {
    this.expect(WIRE_LEN)
    return internedAscii(this.buf, this.start, this.end) ?? this.buf.toString('utf8', this.start, this.end)
  }

  /** The payload of a length-delimited field, as a subarray (no copy). */
  bytes(): Buffer {
    this.expect(WIRE_LEN)
    return this.buf.subarray(this.start, this.end)
  }

  /** A varint as an unsigned number (exact up to 2^53). */
  uint(): number {
    this.expect(WIRE_VARINT)
    return this.hi * two32 + this.lo
  }

  /** A varint as a signed 64-bit integer (int64 two's complement; exact while |value| < 2^53). */
  int64(): number {
    this.expect(WIRE_VARINT)
    if (this.hi & 0x80000000) return -((~this.hi >>> 0) * two32 + (~this.lo >>> 0) + 1)
    return this.hi * two32 + this.lo
  }

  /** Reads a varint at pos into lo/hi; at most 10 bytes, never past the window. */
  private varint(): void {
    const buf = this.buf
    const limit = this.limit
    let pos = this.pos
    if (pos >= limit) throw truncated(pos)
    let b = buf[pos++]
    if (b < 0x80) {
      this.lo = b
      this.hi = 0
      this.pos = pos
      return
    }
    let lo = b & 0x7f
    let hi = 0
    for (let shift = 7; shift < 28; shift += 7) {
      if (pos >= limit) throw truncated(pos)
      b = buf[pos++]
      lo |= (b & 0x7f) << shift
      if (b < 0x80) return this.setVarint(lo, 0, pos)
    }
    if (pos >= limit) throw truncated(pos)
    b = buf[pos++]
    lo |= (b & 0x0f) << 28
    hi = (b & 0x7f) >>> 4
    if (b < 0x80) return this.setVarint(lo, hi, pos)
    for (let shift = 3; shift < 31; shift += 7) {
      if (pos >= limit) throw truncated(pos)
      b = buf[pos++]
      hi |= (b & 0x7f) << shift
      if (b < 0x80) return this.setVarint(lo, hi, pos)
    }
    if (pos >= limit) throw truncated(pos)
    b = buf[pos++]
    if (b > 1) throw new ProtobufError(`varint longer than 64 bits at offset ${this.pos}`)
    this.setVarint(lo, hi | (b << 31), pos)
  }

  private setVarint(lo: number, hi: number, pos: number): void {
    this.lo = lo >>> 0
    this.hi = hi >>> 0
    this.pos = pos
  }
}

function truncated(at: number): ProtobufError {
  return new ProtobufError(`truncated message at offset ${at}`)
}

/** Encoded size of a varint; negative numbers are int64 two's complement (10 bytes). */
export function varintSize(n: number): number {
  if (n < 0) return 10
  if (n < 0x80) return 1
  if (n < 0x4000) return 2
  if (n < 0x200000) return 3
  if (n < 0x10000000) return 4
  let size = 5
  for (let v = Math.floor(n / 0x800000000); v > 0; v = Math.floor(v / 0x80)) size++
  return size
}

/** Writes a varint (non-negative integers up to 2^53, or negative int64) at pos; returns the offset after it. */
export function writeVarint(buf: Buffer, pos: number, n: number): number {
  if (n < 0) {
    let v = BigInt.asUintN(64, BigInt(n))
    while (v >= 0x80n) {
      buf[pos++] = Number(v & 0x7fn) | 0x80
      v >>= 7n
    }
    buf[pos++] = Number(v)
    return pos
  }
  while (n >= 0x80000000) {
    buf[pos++] = (n % 0x80) | 0x80
    n = Math.floor(n / 0x80)
  }
  while (n >= 0x80) {
    buf[pos++] = (n & 0x7f) | 0x80
    n >>>= 7
  }
  buf[pos++] = n
  return pos
}

/** Size of a length-delimited field of the given payload size (tag for fields 1..15 is one byte). */
export function lenFieldSize(field: number, payload: number): number {
  return varintSize(field * 8 + WIRE_LEN) + varintSize(payload) + payload
}

/** Writes the tag and length of a length-delimited field; returns the offset of its payload. */
export function writeLenHeader(buf: Buffer, pos: number, field: number, payload: number): number {
  return writeVarint(buf, writeVarint(buf, pos, field * 8 + WIRE_LEN), payload)
}

/** Writes a string field (always, even when empty); `bytes` is its precomputed UTF-8 length. */
export function writeStringField(buf: Buffer, pos: number, field: number, value: string, bytes: number): number {
  pos = writeLenHeader(buf, pos, field, bytes)
  return bytes === 0 ? pos : pos + buf.write(value, pos, bytes, 'utf8')
}

/** Writes a bytes field (always, even when empty). */
export function writeBytesField(buf: Buffer, pos: number, field: number, value: Uint8Array): number {
  pos = writeLenHeader(buf, pos, field, value.length)
  buf.set(value, pos)
  return pos + value.length
}
