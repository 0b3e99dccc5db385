// Request targets as kube-apiserver reads them, and written back so that it reads them the same.
//
// kube-apiserver is a Go net/http server. Go parses the request target with url.ParseRequestURI:
// the query is everything after the first '?' (a '#' is an ordinary character), and the path is
// percent-decoded whole (url.unescape, path mode: '+' stays '+'; an escape that is not '%' and two
// hex digits fails the parse, and net/http answers 400 before any handler runs). Everything in the
// apiserver reads that decoded req.URL.Path: its RequestInfo (which splits it on '/', so an
// encoded '/' is a separator like any other), the director and go-restful's router. Queries are
// read with req.URL.Query() (url.ParseQuery: '&' separates, a pair holding ';' or an invalid escape
// is dropped, '+' is a space, the first value of a key counts).
//
// The hub reads targets the same way (decodeTarget, parseQuery), and what it sends upstream is
// written from what it read (escapePath, encodeQuery), never copied from the client: Go decodes the
// hub's path to exactly the hub's decoded path, and its query to exactly the hub's values.
import type { Status } from './status.ts'
import { failure } from './status.ts'

/** A request target read as Go's net/http reads it. */
export interface Target {
  /** percent-decoded, as Go's req.URL.Path */
  path: string
  /** after the first '?', undecoded, as Go's req.URL.RawQuery */
  rawQuery: string
  /** the apiserver would refuse the target itself, whoever asks */
  problem?: Status
}

const percent = 37 // '%'
const slash = 47 // '/'
const dot = 46 // '.'

function isHex(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)
}

/** ASCII characters Go's url.escape leaves alone: unreserved, and in paths also `$&+,/:;=@`. */
function table(chars: string): Uint8Array {
  const t = new Uint8Array(128)
  for (let c = 48; c <= 57; c++) t[c] = 1
  for (let c = 65; c <= 90; c++) t[c] = 1
  for (let c = 97; c <= 122; c++) t[c] = 1
  for (const c of '-_.~' + chars) t[c.charCodeAt(0)] = 1
  return t
}
const pathSafe = table('$&+,/:;=@')
const querySafe = table('')

/** The first invalid escape in s (as Go's url.EscapeError names it), or undefined. */
function invalidEscape(s: string, from: number): string | undefined {
  for (let i = from; i < s.length; i++) {
    if (s.charCodeAt(i) !== percent) continue
    if (!isHex(s.charCodeAt(i + 1)) || !isHex(s.charCodeAt(i + 2))) return s.slice(i, i + 3)
    i += 2
  }
  return undefined
}

/** Bytes that are not UTF-8 read as U+FFFD, which is then what the hub sends on: both sides read the same. */
function decodeBytes(s: string): string {
  const bytes: number[] = []
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === percent) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16))
      i += 2
    } else if (c < 0x80) {
      bytes.push(c)
    } else {
      bytes.push(...Buffer.from(s[i], 'utf8'))
    }
  }
  return Buffer.from(bytes).toString('utf8')
}

/** Go's url.unescape: undefined when an escape is invalid. In a query component '+' is a space. */
function unescape(s: string, queryComponent: boolean): string | undefined {
  const first = s.indexOf('%')
  const spaced = queryComponent && s.includes('+') ? s.replaceAll('+', ' ') : s
  if (first === -1) return spaced
  if (invalidEscape(s, first) !== undefined) return undefined
  try {
    return decodeURIComponent(spaced)
  } catch {
    return decodeBytes(spaced) // valid escapes of bytes that are not UTF-8
  }
}

/** Go's url.ParseRequestURI on an origin-form ("/…") or absolute-form ("http://host/…") target. */
export function decodeTarget(url: string): Target {
  let start = 0
  if (url.charCodeAt(0) !== slash) {
    // absolute-form (Node passes nothing else but "*"): Go takes the path after the authority
    const scheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.exec(url)
    const pathStart = scheme ? url.slice(scheme[0].length).search(/[/?]/) : -1
    if (!scheme || pathStart === -1 || url.charCodeAt(scheme[0].length + pathStart) !== slash) {
      // "*" or an empty path: Go routes neither anywhere (OPTIONS * aside, which no Kubernetes client sends)
      return { path: url, rawQuery: '', problem: failure(404, 'the server could not find the requested resource', 'NotFound', {}) }
    }
    start = scheme[0].length + pathStart
  }
  const queryStart = url.indexOf('?', start)
  const rawPath = queryStart === -1 ? (start === 0 ? url : url.slice(start)) : url.slice(start, queryStart)
  const rawQuery = queryStart === -1 ? '' : url.slice(queryStart + 1)
  const path = unescape(rawPath, false)
  if (path === undefined) {
    // net/http answers text/plain "400 Bad Request" and closes; the hub says why, as a Status
    return { path: rawPath, rawQuery, problem: failure(400, `invalid URL escape ${JSON.stringify(invalidEscape(rawPath, 0))}`, 'BadRequest') }
  }
  return { path, rawQuery }
}

/** Go's url.ParseQuery, in the client's order. */
export function parseQuery(rawQuery: string): URLSearchParams {
  const query = new URLSearchParams()
  if (rawQuery === '') return query
  let from = 0
  while (from <= rawQuery.length) {
    let end = rawQuery.indexOf('&', from)
    if (end === -1) end = rawQuery.length
    const pair = rawQuery.slice(from, end)
    from = end + 1
    if (pair === '' || pair.includes(';')) continue // Go 1.17+: a ';' spoils the pair
    const eq = pair.indexOf('=')
    const key = unescape(eq === -1 ? pair : pair.slice(0, eq), true)
    const value = eq === -1 ? '' : unescape(pair.slice(eq + 1), true)
    if (key === undefined || value === undefined) continue
    query.append(key, value)
  }
  return query
}

const asciiEscapes = Array.from({ length: 128 }, (_, c) => `%${c.toString(16).toUpperCase().padStart(2, '0')}`)

function escapeWith(s: string, safe: Uint8Array, spaceAsPlus: boolean): string {
  let out = ''
  let run = 0 // where the current run of characters that stay as they are began
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 128 && safe[c] === 1) continue
    out += s.slice(run, i)
    if (c < 128) {
      out += c === 32 && spaceAsPlus ? '+' : asciiEscapes[c]
    } else {
      const next = s.charCodeAt(i + 1)
      const pair = c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff
      out += encodeURIComponent(pair ? s.slice(i, i + 2) : c >= 0xd800 && c <= 0xdfff ? '\ufffd' : s[i]) // a lone surrogate has no UTF-8
      if (pair) i++
    }
    run = i + 1
  }
  return run === 0 ? s : out + s.slice(run)
}

/**
 * A decoded path written so that Go decodes it back to exactly the same string: each segment
 * percent-encoded as Go's url.PathEscape would ('/' stays the separator), and segments that are
 * only dots as %2E so that nothing on the way resolves them.
 */
export function escapePath(path: string): string {
  const escaped = escapeWith(path, pathSafe, false)
  if (!escaped.includes('/.') && !escaped.startsWith('.')) return escaped
  return escaped
    .split('/')
    .map(segment => (segment === '.' || segment === '..' ? segment.replaceAll('.', '%2E') : segment))
    .join('/')
}

/** One path segment ('/' included in what is encoded). */
export function escapeSegment(segment: string): string {
  if (segment === '.' || segment === '..') return segment.replaceAll('.', '%2E')
  const escaped = escapeWith(segment, pathSafe, false)
  return escaped.includes('/') ? escaped.replaceAll('/', '%2F') : escaped
}

/** Go's url.QueryEscape. */
export function escapeQueryComponent(s: string): string {
  return escapeWith(s, querySafe, true)
}

/** The query as Go reads it back to the same values, in the same order; `set` replaces those keys (or adds them). */
export function encodeQuery(query: URLSearchParams, set?: Record<string, string>): string {
  let out = ''
  for (const [key, value] of query) {
    if (set && Object.hasOwn(set, key)) continue
    out += `${out === '' ? '' : '&'}${escapeQueryComponent(key)}=${escapeQueryComponent(value)}`
  }
  if (set) for (const key of Object.keys(set)) out += `${out === '' ? '' : '&'}${escapeQueryComponent(key)}=${escapeQueryComponent(set[key])}`
  return out
}

/**
 * The path and query the hub sends upstream for a client's request: written from what the hub read,
 * so that the apiserver reads the same path and values (`set` replaces or adds parameters, e.g. the
 * hub's allowWatchBookmarks=true). A proxied request keeps the client's query as sent: the apiserver
 * hands it to the pod, service or node untouched, and reads it just as the hub did.
 */
export function upstreamPath(info: { path: string; verb: string; query: URLSearchParams; rawQuery: string }, set?: Record<string, string>): string {
  const path = escapePath(info.path)
  const query = info.verb === 'proxy' && set === undefined ? info.rawQuery : info.query.size === 0 && set === undefined ? '' : encodeQuery(info.query, set)
  return query === '' ? path : `${path}?${query}`
}

/** What a resource's path is made of; '' leaves a part out. */
export interface ResourcePathParts {
  group: string
  version: string
  namespace?: string
  resource: string
  name?: string
  subresource?: string
}

/** `/api/v1/namespaces/<ns>/<resource>/<name>/<subresource>` or `/apis/<group>/<version>/…`, each segment escaped. */
export function resourcePath(parts: ResourcePathParts): string {
  let path = parts.group ? `/apis/${escapeSegment(parts.group)}/${escapeSegment(parts.version)}` : `/api/${escapeSegment(parts.version)}`
  if (parts.namespace) path += `/namespaces/${escapeSegment(parts.namespace)}`
  path += `/${escapeSegment(parts.resource)}`
  if (parts.name) path += `/${escapeSegment(parts.name)}`
  if (parts.subresource) path += `/${escapeSegment(parts.subresource)}`
  return path
}

// ---- names as the apiserver validates them -----------------------------------------------------

/**
 * apimachinery's path.IsValidPathSegmentName: why a name cannot be a storage key's last segment
 * (genericregistry's NamespaceKeyFunc / NoNamespaceKeyFunc refuse it: 400 "Name parameter invalid").
 */
export function pathSegmentNameProblems(name: string): string[] {
  if (name === '.' || name === '..') return [`may not be '${name}'`]
  const problems: string[] = []
  if (name.includes('/')) problems.push("may not contain '/'")
  if (name.includes('%')) problems.push("may not contain '%'")
  return problems
}

function isLowerAlphanumeric(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 48 && c <= 57)
}

/** RFC 1123 label: what a namespace must be (validation.IsDNS1123Label). */
export function isDNS1123Label(s: string): boolean {
  if (s.length === 0 || s.length > 63) return false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (isLowerAlphanumeric(c)) continue
    if (c !== 45 || i === 0 || i === s.length - 1) return false // '-' inside only
  }
  return true
}

/** RFC 1123 subdomain: what an API group, and most objects' names, must be (validation.IsDNS1123Subdomain). */
export function isDNS1123Subdomain(s: string): boolean {
  if (s.length === 0 || s.length > 253) return false
  let labelStart = true
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (isLowerAlphanumeric(c)) {
      labelStart = false
      continue
    }
    if (labelStart || i === s.length - 1 || (c !== 45 && c !== dot)) return false
    if (c === dot) {
      if (s.charCodeAt(i - 1) === 45) return false // a label ends with an alphanumeric
      labelStart = true
    }
  }
  return true
}

/** RFC 1035 label: what an API version must be (v1, v1beta1; validation.IsDNS1035Label). */
export function isDNS1035Label(s: string): boolean {
  const first = s.charCodeAt(0)
  return first >= 97 && first <= 122 && isDNS1123Label(s)
}

/**
 * A name the hub may key a cached object by: one the apiserver takes as a path segment, no longer
 * than any built-in kind allows (253, a DNS subdomain), and without control characters.
 */
export function isWellFormedName(name: string): boolean {
  if (name.length === 0 || name.length > 253 || name === '.' || name === '..') return false
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i)
    if (c < 32 || c === 127 || c === percent || c === slash) return false
  }
  return true
}
