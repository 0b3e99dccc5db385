// Byte ranges inside JSON text, without building values: where a top-level member's value is, and
// where each element of an array is. The cache stores list items and watch objects as the
// apiserver's own bytes (JSON.parse then stringify would round integers above 2^53 and reorder
// nothing else, but it costs a serialization per object and changes what the client is shown).
// Only structure is read: strings are skipped with their escapes, numbers and literals as runs.

import { internedAscii } from './intern.ts'

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COLON = 0x3a
const COMMA = 0x2c

export class JsonScanError extends Error {
  constructor(message: string, at: number) {
    super(`${message} at byte ${at}`)
    this.name = 'JsonScanError'
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

function skipSpace(buf: Buffer, pos: number, end: number): number {
  while (pos < end && isSpace(buf[pos])) pos++
  return pos
}

/** The end (exclusive) of the string starting at pos (at its opening quote). */
function skipString(buf: Buffer, pos: number, end: number): number {
  for (let i = pos + 1; i < end; i++) {
    const c = buf[i]
    if (c === BACKSLASH) i++
    else if (c === QUOTE) return i + 1
  }
  throw new JsonScanError('unterminated string', pos)
}

/** The end (exclusive) of the value starting at pos. */
export function skipValue(buf: Buffer, pos: number, end = buf.length): number {
  pos = skipSpace(buf, pos, end)
  if (pos >= end) throw new JsonScanError('value expected', pos)
  const c = buf[pos]
  if (c === QUOTE) return skipString(buf, pos, end)
  if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
    let i = pos
    while (i < end && !isSpace(buf[i]) && buf[i] !== COMMA && buf[i] !== CLOSE_BRACE && buf[i] !== CLOSE_BRACKET) i++
    if (i === pos) throw new JsonScanError('value expected', pos)
    return i
  }
  let depth = 0
  for (let i = pos; i < end; i++) {
    const b = buf[i]
    if (b === QUOTE) i = skipString(buf, i, end) - 1
    else if (b === OPEN_BRACE || b === OPEN_BRACKET) depth++
    else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      depth--
      if (depth === 0) return i + 1
    }
  }
  throw new JsonScanError('unterminated object or array', pos)
}

export interface Range {
  start: number
  end: number
}

/** Member names as the scanner compares them, their UTF-8 bytes: per name, and per array for the callers' constant arrays. */
const nameBytes = new Map<string, Buffer>()
const namesBytes = new WeakMap<readonly string[], Buffer[]>()
function bytesOf(names: readonly string[]): Buffer[] {
  let b = namesBytes.get(names)
  if (!b) {
    b = names.map(n => {
      let bytes = nameBytes.get(n)
      if (!bytes) {
        bytes = Buffer.from(n)
        if (nameBytes.size < 1_000) nameBytes.set(n, bytes)
      }
      return bytes
    })
    namesBytes.set(names, b)
  }
  return b
}

/** Which of `wanted` the name between the quotes at start..end is (-1: none); no string is built unless the name has an escape. */
function whichName(buf: Buffer, start: number, end: number, wanted: readonly Buffer[], names: readonly string[]): number {
  const length = end - start
  let escaped = false
  for (let w = 0; w < wanted.length; w++) {
    const name = wanted[w]
    if (name.length !== length) continue
    let i = 0
    while (i < length && buf[start + i] === name[i]) i++
    if (i === length) return w
  }
  for (let i = start; i < end; i++) if (buf[i] === BACKSLASH) escaped = true
  if (!escaped) return -1
  return names.indexOf(JSON.parse(`"${buf.toString('utf8', start, end)}"`) as string)
}

/**
 * Walks the members of the object at `start`: for each whose name is one of `names`, calls
 * visit(index in names, value start), which either reads the value and returns its end, or returns
 * -1 to have it skipped. Returns the object's end (exclusive). One pass: a caller that descends into
 * the values it wants reads no byte twice.
 */
export function eachMember(buf: Buffer, names: readonly string[], visit: (which: number, valueStart: number) => number, start = 0, end = buf.length): number {
  const wanted = bytesOf(names)
  let pos = skipSpace(buf, start, end)
  if (buf[pos] !== OPEN_BRACE) throw new JsonScanError('object expected', pos)
  pos = skipSpace(buf, pos + 1, end)
  if (buf[pos] === CLOSE_BRACE) return pos + 1
  for (;;) {
    if (buf[pos] !== QUOTE) throw new JsonScanError('member name expected', pos)
    const nameEnd = skipString(buf, pos, end)
    const which = whichName(buf, pos + 1, nameEnd - 1, wanted, names)
    pos = skipSpace(buf, nameEnd, end)
    if (buf[pos] !== COLON) throw new JsonScanError("':' expected", pos)
    const valueStart = skipSpace(buf, pos + 1, end)
    let valueEnd = which === -1 ? -1 : visit(which, valueStart)
    if (valueEnd === -1) valueEnd = skipValue(buf, valueStart, end)
    pos = skipSpace(buf, valueEnd, end)
    if (buf[pos] === COMMA) {
      pos = skipSpace(buf, pos + 1, end)
      continue
    }
    if (buf[pos] === CLOSE_BRACE) return pos + 1
    throw new JsonScanError("',' or '}' expected", pos)
  }
}

/**
 * Walks the elements of the array at `start` ("null" is an empty array): calls visit(element start),
 * which reads the element and returns its end, or returns -1 to have it skipped. Returns the
 * array's end (exclusive).
 */
export function eachElement(buf: Buffer, visit: (elementStart: number) => number, start = 0, end = buf.length): number {
  let pos = skipSpace(buf, start, end)
  if (buf[pos] !== OPEN_BRACKET) {
    if (buf.toString('latin1', pos, pos + 4) === 'null') return pos + 4
    throw new JsonScanError('array expected', pos)
  }
  pos = skipSpace(buf, pos + 1, end)
  if (buf[pos] === CLOSE_BRACKET) return pos + 1
  for (;;) {
    const elementStart = skipSpace(buf, pos, end)
    let elementEnd = visit(elementStart)
    if (elementEnd === -1) elementEnd = skipValue(buf, elementStart, end)
    pos = skipSpace(buf, elementEnd, end)
    if (buf[pos] === COMMA) {
      pos++
      continue
    }
    if (buf[pos] === CLOSE_BRACKET) return pos + 1
    throw new JsonScanError("',' or ']' expected", pos)
  }
}

/**
 * The ranges of the values of the named top-level members of the object at `start` (a repeated
 * name: the last, as JSON.parse), and where the object ends.
 */
export function objectMembers(buf: Buffer, names: readonly string[], start = 0, end = buf.length): { members: Map<string, Range>; end: number } {
  const members = new Map<string, Range>()
  const objectEnd = eachMember(
    buf,
    names,
    (which, valueStart) => {
      const valueEnd = skipValue(buf, valueStart, end)
      members.set(names[which], { start: valueStart, end: valueEnd })
      return valueEnd
    },
    start,
    end,
  )
  return { members, end: objectEnd }
}

/** objectMembers' ranges alone. */
export const memberRanges = (buf: Buffer, names: readonly string[], start = 0, end = buf.length): Map<string, Range> =>
  objectMembers(buf, names, start, end).members

const eventMemberNames = ['type', 'object']
const noMembers: ReadonlyMap<string, Range> = new Map()

/**
 * A JSON watch event's members in one pass: the ranges of `type` and `object`, and of the object's
 * own members named `objectMembers` (found on the way through it, not in a second scan). `object`
 * must be an object; a repeated member: the last, as JSON.parse.
 */
export function watchEventRanges(frame: Buffer, objectMembers: readonly string[]): { type?: Range; object?: Range; inner: ReadonlyMap<string, Range> } {
  const out: { type?: Range; object?: Range; inner: ReadonlyMap<string, Range> } = { inner: noMembers }
  eachMember(frame, eventMemberNames, (which, at) => {
    if (which === 0) {
      const end = skipValue(frame, at)
      out.type = { start: at, end }
      return end
    }
    const inner = new Map<string, Range>()
    const end = eachMember(
      frame,
      objectMembers,
      (member, valueStart) => {
        const valueEnd = skipValue(frame, valueStart)
        inner.set(objectMembers[member], { start: valueStart, end: valueEnd })
        return valueEnd
      },
      at,
    )
    out.object = { start: at, end }
    out.inner = inner
    return end
  })
  return out
}

/** The string at `range`, or undefined when the value there is not a string. */
export function stringAt(buf: Buffer, range: Range | undefined): string | undefined {
  if (!range || buf[range.start] !== QUOTE) return undefined
  let ascii = true
  for (let i = range.start + 1; i < range.end - 1; i++) {
    const c = buf[i]
    if (c === BACKSLASH) return JSON.parse(buf.toString('utf8', range.start, range.end)) as string
    if (c > 0x7f) ascii = false
  }
  // ASCII, as names almost always are: latin1 is the same characters, and cheaper to decode
  return buf.toString(ascii ? 'latin1' : 'utf8', range.start + 1, range.end - 1)
}

/**
 * stringAt for values that repeat across many objects (kinds, namespaces, label values, node names
 * and zones of a cluster's endpoints): a plain ASCII string seen before is the same string, not
 * decoded again (./intern.ts). The value is at valueStart..valueEnd, quotes included (positions,
 * not a Range: no object per read).
 */
export function internedStringAt(buf: Buffer, valueStart: number, valueEnd: number): string | undefined {
  if (buf[valueStart] !== QUOTE) return undefined
  return internedAscii(buf, valueStart + 1, valueEnd - 1) ?? stringAt(buf, { start: valueStart, end: valueEnd })
}

/** Whether the value at `range` is an object ({…}). */
export const isObjectAt = (buf: Buffer, range: Range | undefined): range is Range => range !== undefined && buf[range.start] === OPEN_BRACE

const comma = Buffer.from(',')
const openBracket = Buffer.from('[')
const closeBracket = Buffer.from(']')

/** buf with the array at `array` replaced by one of these elements (the bytes of each as given); every other byte is buf's. */
export function spliceArray(buf: Buffer, array: Range, elements: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [buf.subarray(0, array.start), openBracket]
  elements.forEach((e, i) => {
    if (i > 0) parts.push(comma)
    parts.push(e)
  })
  parts.push(closeBracket, buf.subarray(array.end))
  return Buffer.concat(parts)
}

/** The ranges of the elements of the array at `range`. */
export function elementRanges(buf: Buffer, range: Range): Range[] {
  const out: Range[] = []
  eachElement(
    buf,
    elementStart => {
      const elementEnd = skipValue(buf, elementStart, range.end)
      out.push({ start: elementStart, end: elementEnd })
      return elementEnd
    },
    range.start,
    range.end,
  )
  return out
}

/**
 * An object's bytes with `kind` and `apiVersion` put in front, as a list item needs to stand alone
 * (list items carry neither); every other byte is the apiserver's.
 */
export function withTypeMeta(object: Buffer, kind: string, apiVersion: string): Buffer {
  const open = skipSpace(object, 0, object.length)
  if (object[open] !== OPEN_BRACE) throw new JsonScanError('object expected', open)
  const rest = skipSpace(object, open + 1, object.length)
  const head = `{"kind":${JSON.stringify(kind)},"apiVersion":${JSON.stringify(apiVersion)}${object[rest] === CLOSE_BRACE ? '' : ','}`
  // one allocation, the head written straight into it (not a Buffer of its own, then a concat)
  const headLength = Buffer.byteLength(head)
  const out = Buffer.allocUnsafe(headLength + object.length - open - 1)
  out.write(head, 0, headLength)
  object.copy(out, headLength, open + 1)
  return out
}
