// Byte ranges inside JSON text, without building values: where a top-level member's value is, and
// where each element of an array is. The cache stores list items and watch objects as the
// apiserver's own bytes (JSON.parse then stringify would round integers above 2^53 and reorder
// nothing else, but it costs a serialization per object and changes what the client is shown).
// Only structure is read: strings are skipped with their escapes, numbers and literals as runs.

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

/** The ranges of the values of the named top-level members of the object in buf. */
export function memberRanges(buf: Buffer, names: readonly string[], start = 0, end = buf.length): Map<string, Range> {
  const found = new Map<string, Range>()
  let pos = skipSpace(buf, start, end)
  if (buf[pos] !== OPEN_BRACE) throw new JsonScanError('object expected', pos)
  pos = skipSpace(buf, pos + 1, end)
  if (buf[pos] === CLOSE_BRACE) return found
  for (;;) {
    if (buf[pos] !== QUOTE) throw new JsonScanError('member name expected', pos)
    const nameEnd = skipString(buf, pos, end)
    const raw = buf.toString('utf8', pos + 1, nameEnd - 1)
    pos = skipSpace(buf, nameEnd, end)
    if (buf[pos] !== COLON) throw new JsonScanError("':' expected", pos)
    const valueStart = skipSpace(buf, pos + 1, end)
    const valueEnd = skipValue(buf, valueStart, end)
    const name = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw
    if (names.includes(name)) found.set(name, { start: valueStart, end: valueEnd })
    pos = skipSpace(buf, valueEnd, end)
    if (buf[pos] === COMMA) {
      pos = skipSpace(buf, pos + 1, end)
      continue
    }
    if (buf[pos] === CLOSE_BRACE) return found
    throw new JsonScanError("',' or '}' expected", pos)
  }
}

/** The ranges of the elements of the array at `range`. */
export function elementRanges(buf: Buffer, range: Range): Range[] {
  const out: Range[] = []
  let pos = skipSpace(buf, range.start, range.end)
  if (buf[pos] !== OPEN_BRACKET) {
    if (buf.toString('latin1', pos, pos + 4) === 'null') return out
    throw new JsonScanError('array expected', pos)
  }
  pos = skipSpace(buf, pos + 1, range.end)
  if (buf[pos] === CLOSE_BRACKET) return out
  for (;;) {
    const start = skipSpace(buf, pos, range.end)
    const end = skipValue(buf, start, range.end)
    out.push({ start, end })
    pos = skipSpace(buf, end, range.end)
    if (buf[pos] === COMMA) {
      pos++
      continue
    }
    if (buf[pos] === CLOSE_BRACKET) return out
    throw new JsonScanError("',' or ']' expected", pos)
  }
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
  return Buffer.concat([Buffer.from(head), object.subarray(open + 1)])
}
