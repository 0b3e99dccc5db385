// Value conversions the typed codec needs to match Go byte for byte: metav1.Time and MicroTime
// (RFC 3339 text <-> seconds and nanoseconds, zero time = null), Quantity's text form, base64 for
// bytes, Go's map-key order (UTF-8 byte order) and Go's JSON escaping for FieldsV1. Kept apart from
// typed.ts so that file holds only the walk over the schema.

/** Seconds from 1970 to 0001-01-01T00:00:00Z: Go's zero time.Time, which JSON writes as null. */
export const zeroTimeSeconds = -62135596800

export interface Instant {
  seconds: number
  nanos: number
}

const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):(\d{2}))$/

/** Parses RFC 3339 text as Go's time.Parse(time.RFC3339, …) does; undefined when it does not parse. */
export function parseTime(text: string): Instant | undefined {
  const m = rfc3339.exec(text)
  if (!m) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number)
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  let offset = 0
  if (m[8] === undefined) {
    const oh = Number(m[10])
    const om = Number(m[11])
    if (oh > 23 || om > 59) return undefined
    offset = (m[9] === '-' ? -1 : 1) * (oh * 3600 + om * 60)
  }
  const seconds = daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
  const nanos = m[7] === undefined ? 0 : Number(m[7].padEnd(9, '0'))
  return { seconds, nanos }
}

/** Go's `t.UTC().Format(RFC3339)` (fractionDigits 0) or RFC3339Micro (6); undefined outside years 0..9999. */
export function formatTime(seconds: number, nanos: number, fractionDigits: 0 | 6): string | undefined {
  if (!Number.isFinite(seconds)) return undefined
  seconds += Math.floor(nanos / 1e9)
  nanos = ((nanos % 1e9) + 1e9) % 1e9
  const days = Math.floor(seconds / 86400)
  const rest = seconds - days * 86400
  const [year, month, day] = civilFromDays(days)
  if (year < 0 || year > 9999) return undefined
  const hms = `${pad(Math.floor(rest / 3600), 2)}:${pad(Math.floor(rest / 60) % 60, 2)}:${pad(rest % 60, 2)}`
  const fraction = fractionDigits === 6 ? `.${pad(Math.floor(nanos / 1000), 6)}` : ''
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T${hms}${fraction}Z`
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0')
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28
  return [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
}

// Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's civil-date algorithms).
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year
  const era = Math.floor(y / 400)
  const yoe = y - era * 400
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
}

function civilFromDays(days: number): [number, number, number] {
  const z = days + 719468
  const era = Math.floor(z / 146097)
  const doe = z - era * 146097
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365)
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100))
  const mp = Math.floor((5 * doy + 2) / 153)
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1
  const month = mp < 10 ? mp + 3 : mp - 9
  return [yoe + era * 400 + (month <= 2 ? 1 : 0), month, day]
}

// resource.Quantity's grammar: a signed decimal number and a suffix (binary SI, decimal SI or an
// exponent). The codec passes the text through unchanged: the apiserver writes the same canonical
// text in JSON and protobuf, so only malformed values are refused.
const quantity = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/

export function isQuantity(text: string): boolean {
  return quantity.test(text)
}

const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard padded base64 (Go's encoding for []byte in JSON); undefined when malformed. */
export function fromBase64(text: string): Buffer | undefined {
  return base64.test(text) ? Buffer.from(text, 'base64') : undefined
}

/** Go's string order (UTF-8 bytes), which is code point order, not JavaScript's UTF-16 order. */
export function compareGoStrings(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x !== y) return codePointRank(x) - codePointRank(y)
  }
  return a.length - b.length
}

// Surrogates (U+D800..DFFF) stand for code points above U+FFFF: move them above U+E000..FFFF.
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800
}

/** Keys in Go's map order (encoding/json and gogo-protobuf both sort map keys). */
export function goSortedKeys(o: object): string[] {
  return Object.keys(o).sort(compareGoStrings)
}

const htmlUnsafe = /[<>&\u2028\u2029]/g

/** Compact JSON escaped as Go's encoding/json escapes it (<, >, &, U+2028, U+2029 as \u00XX). */
export function goJson(value: unknown): string {
  return JSON.stringify(value).replace(htmlUnsafe, c => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** Sets an own enumerable property, also for the key `__proto__`. */
export function setKey(into: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(into, key, { value, enumerable: true, writable: true, configurable: true })
  else into[key] = value
}
