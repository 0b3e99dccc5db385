// The records of the disk cache's journals and snapshots, as bytes: [u32 length][u32 crc32] then a
// JSON header line and the body. A put's header holds the object's metadata and its body is the
// object as the apiserver sent it; a remove names the object; a meta record holds the scopes listed
// whole; a batch record says that the next n records stand or fall together.
import { crc32 } from 'node:zlib'
import type { CachedObject } from './types.ts'

/** What a collection knows besides its objects: the scopes listed whole, and the newest list's version. */
export interface CollectionMeta {
  listResourceVersion: string
  /** kind and apiVersion of the collection's objects as the apiserver names them ('' or absent when unknown); old records lack them */
  kind?: string
  apiVersion?: string
  listed: { namespace: string; labelSelector: string; fieldSelector: string; resourceVersion: string }[]
}

export type PutHeader = Omit<CachedObject, 'body'> & { t: 'p'; size: number }
export type RemoveHeader = { t: 'r'; namespace: string; name: string }
export type MetaHeader = CollectionMeta & { t: 'm' }
export type BatchHeader = { t: 'b'; n: number }
export type Header = PutHeader | RemoveHeader | MetaHeader | BatchHeader

/**
 * The largest record (header line and body) the writer writes and the loader accepts: one limit for
 * both, so that whatever was written loads. etcd caps objects at ~1.5 MiB; this is far above it.
 */
export const defaultMaxRecordBytes = 64 * 1024 * 1024

/**
 * put/write of an object whose record would be over the limit: nothing of its batch is written.
 * `name` is the object's name (tell it apart by instanceof, not by Error's name).
 */
export class ObjectTooLargeError extends Error {
  constructor(
    readonly namespace: string,
    readonly objectName: string,
    /** the record's size: header line and body */
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`disk cache: ${namespace ? `${namespace}/` : ''}${objectName} makes a record of ${bytes} bytes, over the limit of ${limit}: not cached`)
    this.name = 'ObjectTooLargeError'
  }
}

export interface EncodedRecord {
  header: Header
  parts: Buffer[]
  /** bytes of the whole record: prefix, header line, body */
  bytes: number
}

export function putHeader(object: CachedObject): PutHeader {
  const header: PutHeader = {
    t: 'p',
    apiVersion: object.apiVersion,
    kind: object.kind,
    namespace: object.namespace,
    name: object.name,
    resourceVersion: object.resourceVersion,
    format: object.format,
    size: object.body.length,
  }
  if (object.fields) header.fields = object.fields
  if (object.scopes) header.scopes = object.scopes
  if (object.labels) header.labels = object.labels
  return header
}

/** The size the loader checks against the limit: header line (with its newline) and body. */
export function payloadBytes(header: Header, body?: Buffer): number {
  return Buffer.byteLength(JSON.stringify(header)) + 1 + (body?.length ?? 0)
}

function tooLarge(header: Header, bytes: number, limit: number): Error {
  if (header.t === 'p' || header.t === 'r') return new ObjectTooLargeError(header.namespace, header.name, bytes, limit)
  return new Error(`disk cache: a ${header.t === 'm' ? 'scope list' : 'batch'} record of ${bytes} bytes is over the limit of ${limit}`)
}

/**
 * Records' bytes: length, checksum, header line, body. The prefixes and header lines of a batch
 * share one buffer: a list's 10,000 records are one allocation, not 20,000 small ones. Throws
 * (before anything is allocated) when a record is over `limit`.
 */
export function encodeRecords(records: readonly { header: Header; body?: Buffer }[], limit: number): EncodedRecord[] {
  const lines = records.map(r => JSON.stringify(r.header))
  let total = 0
  for (let i = 0; i < lines.length; i++) {
    const lineBytes = Buffer.byteLength(lines[i]) + 1
    const payload = lineBytes + (records[i].body?.length ?? 0)
    if (payload > limit) throw tooLarge(records[i].header, payload, limit)
    total += 8 + lineBytes
  }
  const heads = Buffer.allocUnsafe(total)
  let at = 0
  return records.map(({ header, body }, i) => {
    const start = at
    const textLength = heads.write(lines[i], start + 8)
    heads[start + 8 + textLength] = 0x0a
    const lineLength = textLength + 1
    at = start + 8 + lineLength
    const line = heads.subarray(start + 8, at)
    const hasBody = body !== undefined && body.length > 0
    heads.writeUInt32BE(lineLength + (hasBody ? body.length : 0), start)
    heads.writeUInt32BE(hasBody ? crc32(body, crc32(line)) : crc32(line), start + 4)
    const head = heads.subarray(start, at)
    return { header, parts: hasBody ? [head, body] : [head], bytes: at - start + (hasBody ? body.length : 0) }
  })
}

/** One whole record found by the scan: where it lies, and where its body does. */
export interface ScannedRecord {
  header: Header
  recordAt: number
  recordBytes: number
  bodyAt: number
  size: number
}

export interface ScanResult {
  /** where the whole records (and whole batches) end */
  end: number
  /** whether what follows `end` is a torn tail (a last write cut short) rather than damage */
  torn: boolean
}

function parseHeader(line: Buffer): Header | undefined {
  let header: Header
  try {
    header = JSON.parse(line.toString('utf8')) as Header
  } catch {
    return undefined
  }
  if (typeof header !== 'object' || header === null) return undefined
  switch (header.t) {
    case 'p':
      return Number.isInteger(header.size) && header.size >= 0 && typeof header.name === 'string' && typeof header.namespace === 'string' ? header : undefined
    case 'r':
      return typeof header.name === 'string' && typeof header.namespace === 'string' ? header : undefined
    case 'm':
      return Array.isArray(header.listed) ? header : undefined
    case 'b':
      return Number.isInteger(header.n) && header.n >= 1 ? header : undefined
    default:
      return undefined
  }
}

/** The length a record with this header line must have: the line, and a put's body. */
function lengthFor(header: Header, lineBytes: number): number {
  return lineBytes + (header.t === 'p' ? header.size : 0)
}

function zeroFilled(bytes: Buffer, from: number): boolean {
  for (let i = from; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}

/**
 * The record at `offset`, or why there is none: 'torn' when the file ends inside it (a write cut
 * short: a kill, a power cut that left zeros), 'damage' when its bytes contradict themselves.
 */
function readRecord(bytes: Buffer, offset: number, limit: number): ScannedRecord | 'torn' | 'damage' {
  if (offset + 8 > bytes.length) return 'torn'
  const length = bytes.readUInt32BE(offset)
  if (length === 0) return zeroFilled(bytes, offset) ? 'torn' : 'damage'
  if (length > limit) return 'damage'
  const next = offset + 8 + length
  const payload = bytes.subarray(offset + 8, Math.min(next, bytes.length))
  const newline = payload.indexOf(0x0a)
  if (next > bytes.length) {
    // the file ends inside this record: a cut write, unless its header line says another length
    // (a length field damaged mid-file would otherwise pass for a tail and silently cut the rest)
    if (newline === -1) return 'torn'
    const header = parseHeader(payload.subarray(0, newline))
    return header && lengthFor(header, newline + 1) === length ? 'torn' : 'damage'
  }
  if (crc32(payload) !== bytes.readUInt32BE(offset + 4)) return next === bytes.length ? 'torn' : 'damage'
  const header = newline === -1 ? undefined : parseHeader(payload.subarray(0, newline))
  if (!header || lengthFor(header, newline + 1) !== length) return 'damage'
  return { header, recordAt: offset, recordBytes: 8 + length, bodyAt: offset + 8 + newline + 1, size: length - newline - 1 }
}

/**
 * Hands the whole records of a file to `onRecord` in order; a batch's records only once every one
 * of them is whole. Stops at the first record that is not: the rest is a torn tail or damage.
 */
export function scanRecords(bytes: Buffer, limit: number, onRecord: (record: ScannedRecord) => void): ScanResult {
  let offset = 0
  while (offset < bytes.length) {
    const first = readRecord(bytes, offset, limit)
    if (typeof first === 'string') return { end: offset, torn: first === 'torn' }
    if (first.header.t !== 'b') {
      onRecord(first)
      offset += first.recordBytes
      continue
    }
    const members: ScannedRecord[] = []
    let at = offset + first.recordBytes
    for (let i = 0; i < first.header.n; i++) {
      // a batch the file ends inside was never acknowledged: cut like a torn record
      if (at >= bytes.length) return { end: offset, torn: true }
      const member = readRecord(bytes, at, limit)
      if (member === 'torn') return { end: offset, torn: true }
      // damage inside a batch (not a torn tail): its whole records before the damage are still the
      // apiserver's objects, checksummed one by one, and load; no scope is believed whole after damage
      if (typeof member === 'string' || member.header.t === 'b') {
        for (const whole of members) onRecord(whole)
        return { end: at, torn: false }
      }
      members.push(member)
      at += member.recordBytes
    }
    for (const member of members) onRecord(member)
    offset = at
  }
  return { end: offset, torn: false }
}

/** One change to a collection, as DiskCache.write takes it. */
export type DiskOp = { t: 'put'; object: CachedObject } | { t: 'remove'; namespace: string; name: string } | { t: 'meta'; meta: CollectionMeta }

function checkObject(object: CachedObject): void {
  if (object.format !== 'json' && object.format !== 'protobuf') throw new Error(`disk cache: invalid format ${JSON.stringify(object.format)}`)
  if (!Buffer.isBuffer(object.body)) throw new Error('disk cache: body must be a Buffer')
  if (typeof object.namespace !== 'string' || typeof object.name !== 'string' || object.name === '') throw new Error('disk cache: an object needs a name')
}

/** The record an op makes (throws for an object that cannot be written). */
export function recordOf(op: DiskOp): { header: Header; body?: Buffer } {
  switch (op.t) {
    case 'put':
      checkObject(op.object)
      return { header: putHeader(op.object), body: op.object.body }
    case 'remove':
      return { header: { t: 'r', namespace: op.namespace, name: op.name } }
    case 'meta':
      return { header: { t: 'm', ...op.meta } }
  }
}
