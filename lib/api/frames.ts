// Watch streams are forwarded one whole event at a time: a client never receives half an event,
// and later stages (cache, filters) see exactly one frame per chunk. JSON watches are one object
// per line; protobuf watches are a 4-byte big-endian length followed by a WatchEvent.
import { Transform } from 'node:stream'
import type { TransformCallback } from 'node:stream'
import type { WireFormat } from './wire-format.ts'

const newline = 0x0a
/** A single event larger than this is a broken stream, not an object (the apiserver caps objects at ~1.5 MiB in etcd). */
export const maxFrameBytes = 64 * 1024 * 1024

export class FrameTooLargeError extends Error {
  constructor(size: number) {
    super(`watch frame of ${size} bytes exceeds the ${maxFrameBytes}-byte limit`)
    this.name = 'FrameTooLargeError'
  }
}

export function framingOf(contentType: string | undefined): WireFormat | undefined {
  if (!contentType) return undefined
  const type = contentType.toLowerCase()
  if (type.startsWith('application/vnd.kubernetes.protobuf')) return 'protobuf'
  if (type.startsWith('application/json')) return 'json'
  return undefined
}

/** Splits a watch body into frames; each output chunk is exactly one complete frame (with its delimiter or length prefix). */
export class WatchFrameSplitter extends Transform {
  private pending: Buffer[] = []
  private pendingBytes = 0

  constructor(private readonly framing: WireFormat) {
    // object mode on the readable side keeps frames apart instead of letting reads coalesce them
    super({ readableObjectMode: true, readableHighWaterMark: 16 })
  }

  /** Bytes held back because they do not yet form a whole frame. */
  get partialBytes(): number {
    return this.pendingBytes
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    let data = chunk
    if (this.pendingBytes > 0 && !this.completesFrame(chunk)) {
      // Still inside one large frame: hold the chunk without copying everything held so far.
      this.pending.push(chunk)
      this.pendingBytes += chunk.length
      callback(this.pendingBytes > maxFrameBytes + 4 ? new FrameTooLargeError(this.pendingBytes) : null)
      return
    }
    if (this.pendingBytes > 0) {
      this.pending.push(chunk)
      data = Buffer.concat(this.pending, this.pendingBytes + chunk.length)
      this.pending = []
      this.pendingBytes = 0
    }
    let offset: number
    try {
      offset = this.framing === 'json' ? this.splitLines(data) : this.splitLengthPrefixed(data)
    } catch (error) {
      callback(error as Error)
      return
    }
    if (offset < data.length) {
      const rest = data.subarray(offset)
      this.pending.push(rest)
      this.pendingBytes = rest.length
    }
    callback()
  }

  private completesFrame(chunk: Buffer): boolean {
    if (this.framing === 'json') return chunk.includes(newline)
    const head = this.pending[0]
    if (head.length < 4) return true // the length prefix itself is split: let the general path read it
    return this.pendingBytes + chunk.length >= 4 + head.readUInt32BE(0)
  }

  private splitLines(data: Buffer): number {
    let start = 0
    for (let end = data.indexOf(newline); end !== -1; end = data.indexOf(newline, start)) {
      if (end > start) this.push(data.subarray(start, end + 1))
      start = end + 1
    }
    if (data.length - start > maxFrameBytes) throw new FrameTooLargeError(data.length - start)
    return start
  }

  private splitLengthPrefixed(data: Buffer): number {
    let start = 0
    while (data.length - start >= 4) {
      const size = data.readUInt32BE(start)
      if (size > maxFrameBytes) throw new FrameTooLargeError(size)
      if (data.length - start - 4 < size) break
      this.push(data.subarray(start, start + 4 + size))
      start += 4 + size
    }
    return start
  }

  // A trailing partial frame means the upstream broke mid-event: it is dropped, never forwarded.
  override _flush(callback: TransformCallback): void {
    this.pending = []
    this.pendingBytes = 0
    callback()
  }
}

const jsonBookmarkPrefix = Buffer.from('{"type":"BOOKMARK"')
const jsonTypePrefix = Buffer.from('{"type":"')
const protobufBookmarkType = Buffer.from('BOOKMARK')

/**
 * Whether a frame is a BOOKMARK. The apiserver writes the event type first (JSON's "type" member,
 * protobuf's field 1), so a look at the first bytes answers; other JSON layouts are parsed.
 */
export function isBookmark(framing: WireFormat, frame: Buffer): boolean {
  if (framing === 'protobuf') return frame[4] === 0x0a && frame[5] === protobufBookmarkType.length && frame.subarray(6, 14).equals(protobufBookmarkType)
  if (frame.subarray(0, jsonBookmarkPrefix.length).equals(jsonBookmarkPrefix)) return true
  if (frame.subarray(0, jsonTypePrefix.length).equals(jsonTypePrefix)) return false
  try {
    return (JSON.parse(frame.toString()) as { type?: unknown }).type === 'BOOKMARK'
  } catch {
    return false
  }
}
