// Request classification, after k8s.io/apiserver's RequestInfoFactory (v1.24): the same reading of
// the same decoded path, so the hub decides what to cache, filter or refuse exactly where the
// apiserver sees the same resource. A pure function over (method, url, User-Agent), table-tested.
//
// How kube-apiserver reads a path (lib/api/paths.ts has Go's part): RequestInfo splits Go's decoded
// req.URL.Path on '/' after trimming the slashes at both ends, so `%2F` separates segments, inner
// empty segments stay (`namespaces//pods` is namespace ""), and `.`/`..` are ordinary segments
// (nothing resolves them). Authorization and the storage read that RequestInfo; routing
// (go-restful) matches the same decoded segments. Where the two can disagree (a leading `//`, an
// empty segment, segments beyond a route) or a segment cannot name anything the apiserver stores
// (see `wellFormedProblem`), the hub does not treat the request as a resource at all: it is relayed,
// re-encoded from what the hub read, and nothing of it is recorded or answered from a cache.
import type { Status } from './status.ts'
import { failure } from './status.ts'
import { decodeTarget, isDNS1035Label, isDNS1123Label, isDNS1123Subdomain, isWellFormedName, parseQuery, pathSegmentNameProblems } from './paths.ts'

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'proxy' | 'connect'

export interface RequestInfo {
  /** false for /healthz, /version, /openapi/v2, discovery roots like /apis … and for resource paths that are not well-formed (`malformed`) */
  isResourceRequest: boolean
  /** resource verb, or the lower-cased HTTP method for non-resource requests */
  verb: Verb | string
  /** the percent-decoded path, as the apiserver's req.URL.Path */
  path: string
  /** '' for the core group */
  apiGroup: string
  apiVersion: string
  namespace: string
  resource: string
  subresource: string
  name: string
  labelSelector: string
  fieldSelector: string
  resourceVersion: string
  /** the User-Agent up to its first '/', lower-cased: `kube-proxy/v1.24.0 (linux/amd64) …` → `kube-proxy` */
  component: string
  /** the query as the apiserver reads it (Go's url.ParseQuery) */
  query: URLSearchParams
  /** the query as the client sent it: what a proxied backend gets (lib/api/paths.ts upstreamPath) */
  rawQuery: string
  /** the apiserver's answer whoever asks and whatever it stores: the hub gives it itself, online or not */
  problem?: Status
  /** why a path the apiserver reads as a resource request is not one to the hub (relayed, never cached) */
  malformed?: string
}

// Subresources whose REST storage is a "connecter" in the apiserver: they stream or upgrade.
const connectSubresources = new Set(['exec', 'attach', 'portforward'])
// A namespace's own subresources, so /api/v1/namespaces/x/status is not read as resource "status".
const namespaceSubresources = new Set(['status', 'finalize'])
// responsewriters' sanitizer, on the text of its plain-text errors
const htmlEscapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' }

const verbByMethod: Record<string, Verb> = {
  GET: 'get',
  HEAD: 'get',
  POST: 'create',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
}

/** The longest component name kept: a DNS label's length, plenty for any real client's product token. */
export const maxComponentLength = 63

/**
 * The component a request counts as: its User-Agent's product token (up to the first `/`),
 * lower-cased, in a fixed character set (anything else a `-`) and at most 63 characters. It names
 * cache directories and metric labels, so a client may not choose bytes for them.
 */
export function componentOf(userAgent: string | undefined): string {
  if (!userAgent) return ''
  const slash = userAgent.indexOf('/')
  const token = (slash === -1 ? userAgent : userAgent.slice(0, slash)).slice(0, 4 * maxComponentLength).toLowerCase()
  return token
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(0, maxComponentLength)
    .replace(/[-.]+$/, '')
}

/** RequestInfo's splitPath: the slashes at both ends trimmed, inner empty segments kept. */
function splitPath(path: string): string[] {
  let start = 0
  let end = path.length
  while (start < end && path.charCodeAt(start) === 47) start++
  while (end > start && path.charCodeAt(end - 1) === 47) end--
  return start === end ? [] : path.slice(start, end).split('/')
}

/** The hub's RequestInfo: the apiserver's, but for resource paths the hub does not take for resources (`malformed`). */
export function classify(method: string, url: string, userAgent?: string): RequestInfo {
  return resolve(method, url, userAgent, true)
}

/** The RequestInfo kube-apiserver itself builds (the apiserver simulator reads requests with it). */
export function apiserverRequestInfo(method: string, url: string, userAgent?: string): RequestInfo {
  return resolve(method, url, userAgent, false)
}

function resolve(method: string, url: string, userAgent: string | undefined, asHub: boolean): RequestInfo {
  const target = decodeTarget(url)
  const query = parseQuery(target.rawQuery)
  const info: RequestInfo = {
    isResourceRequest: false,
    verb: method.toLowerCase(),
    path: target.path,
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    labelSelector: query.get('labelSelector') ?? '',
    fieldSelector: query.get('fieldSelector') ?? '',
    resourceVersion: query.get('resourceVersion') ?? '',
    component: componentOf(userAgent),
    query,
    rawQuery: target.rawQuery,
  }
  if (target.problem) {
    info.problem = target.problem
    return info
  }

  const segments = splitPath(target.path)
  // /api/<version>/… (core) or /apis/<group>/<version>/…; anything shorter is discovery or non-resource.
  let parts: string[]
  if (segments[0] === 'api' && segments.length >= 3) {
    info.apiVersion = segments[1]
    parts = segments.slice(2)
  } else if (segments[0] === 'apis' && segments.length >= 4) {
    info.apiGroup = segments[1]
    info.apiVersion = segments[2]
    parts = segments.slice(3)
  } else {
    return info
  }
  info.isResourceRequest = true

  let verb: Verb | undefined = verbByMethod[method.toUpperCase()]
  const special = parts[0] === 'watch' || parts[0] === 'proxy' ? parts[0] : undefined
  if (special) {
    if (parts.length < 2) {
      // the RequestInfo resolver fails: WithRequestInfo answers 500 (in plain text) before authentication
      const message = `Internal Server Error: ${JSON.stringify(url)}: failed to create RequestInfo: unable to determine kind and namespace from url, ${url.startsWith('/') ? url : target.path}`
      return {
        ...info,
        isResourceRequest: false,
        problem: failure(
          500,
          message.replace(/[&<>]/g, c => htmlEscapes[c]),
          'InternalError',
        ),
      }
    }
    // /watch/… and the long-deprecated /proxy/namespaces/<ns>/<resource>/<name>/… forms
    verb = special
    parts = parts.slice(1)
  }
  let namespaced = false
  if (parts[0] === 'namespaces' && parts.length > 1) {
    info.namespace = parts[1]
    namespaced = true
    if (parts.length > 2 && !namespaceSubresources.has(parts[2])) parts = parts.slice(2)
  }
  info.resource = parts[0]
  if (parts.length >= 2) info.name = parts[1]
  // the proxy verb's trailing path is the proxied service's, not a subresource
  if (parts.length >= 3 && verb !== 'proxy') info.subresource = parts[2]

  if (verb === undefined) {
    info.verb = method.toLowerCase()
  } else {
    if (verb !== 'proxy' && verb !== 'watch') {
      if (connectSubresources.has(info.subresource)) verb = 'connect'
      else if (info.subresource === 'proxy') verb = 'proxy'
    }
    if (info.name === '') {
      if (verb === 'get') verb = isTrue(query.get('watch')) ? 'watch' : 'list'
      else if (verb === 'delete') verb = 'deletecollection'
    }
    info.verb = verb
  }

  const malformed = asHub ? wellFormedProblem(info, segments, parts, namespaced, special) : undefined
  if (malformed) return demote(info, method, malformed)
  // the apiserver names a list or watch by `fieldSelector=metadata.name=…` only if that is a path segment
  if ((info.verb === 'list' || info.verb === 'watch') && info.name === '') {
    const name = nameFromFieldSelector(info.fieldSelector)
    if (name !== '' && pathSegmentNameProblems(name).length === 0 && (!asHub || isWellFormedName(name))) info.name = name
  }
  return info
}

/**
 * Why a path the apiserver reads as a resource request is not one the hub may cache or filter: its
 * routing could read it otherwise than its RequestInfo, or a segment cannot name anything it stores
 * (a group is an RFC 1123 subdomain, a version an RFC 1035 label, a namespace, resource and
 * subresource RFC 1123 labels, a name a path segment the storage takes). The apiserver still gets
 * it, and answers its own 404, 400 or empty list.
 */
function wellFormedProblem(info: RequestInfo, segments: string[], parts: string[], namespaced: boolean, special: string | undefined): string | undefined {
  // RequestInfo trims a leading '//', the director's prefix match on /api/v1 (or /apis/<g>/<v>) does not: no route
  if (info.path.charCodeAt(1) === 47) return 'the path starts with more than one /'
  if (segments.includes('')) return 'an empty path segment'
  if (info.apiGroup !== '' && !isDNS1123Subdomain(info.apiGroup)) return `group ${JSON.stringify(info.apiGroup)} is not a DNS subdomain`
  if (!isDNS1035Label(info.apiVersion)) return `version ${JSON.stringify(info.apiVersion)} is not a DNS label`
  if (namespaced && !isDNS1123Label(info.namespace)) return `namespace ${JSON.stringify(info.namespace)} is not a DNS label`
  if (!isDNS1123Label(info.resource)) return `resource ${JSON.stringify(info.resource)} is not a DNS label`
  if (parts.length >= 2 && !isWellFormedName(info.name)) return `name ${JSON.stringify(info.name)} is not one the apiserver stores`
  if (info.subresource !== '' && !isDNS1123Label(info.subresource)) return `subresource ${JSON.stringify(info.subresource)} is not a DNS label`
  // routes end at the subresource, but for what a proxy passes on; /watch/ has no subresources
  if (parts.length > 3 && info.verb !== 'proxy') return 'segments after the subresource'
  if (special === 'watch' && info.subresource !== '') return 'a subresource in the /watch/ form'
  return undefined
}

/** A malformed resource path, as the hub treats it: a non-resource request that keeps its path and query. */
function demote(info: RequestInfo, method: string, malformed: string): RequestInfo {
  return {
    ...info,
    isResourceRequest: false,
    verb: method.toLowerCase(),
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    malformed,
  }
}

// The apiserver's query-to-bool conversion: present and not "false"/"0" (any case) is true,
// so `?watch` and `?watch=True` are watches too.
function isTrue(value: string | null): boolean {
  return value !== null && value !== '0' && value.toLowerCase() !== 'false'
}

/** A boolean query parameter as the apiserver reads it (`allowWatchBookmarks=1` asks for BOOKMARKs too). */
export function queryFlag(info: RequestInfo, name: string): boolean {
  return isTrue(info.query.get(name))
}

// `fieldSelector=metadata.name=x` names one object (kubelet watches its own Node this way).
function nameFromFieldSelector(fieldSelector: string): string {
  if (!fieldSelector.includes('metadata.name')) return ''
  for (const term of fieldSelector.split(',')) {
    const match = /^\s*metadata\.name\s*==?\s*(.*?)\s*$/.exec(term)
    if (match) return match[1]
  }
  return ''
}

/** `pods`, `endpointslices.discovery.k8s.io`, `pods/exec`; '' for a non-resource path. */
export function qualifiedResource(info: RequestInfo): string {
  if (!info.isResourceRequest) return ''
  const gr = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource
  return info.subresource ? `${gr}/${info.subresource}` : gr
}

export function isWatch(info: RequestInfo): boolean {
  return info.verb === 'watch'
}

/**
 * Whether a list states the present, so its answer may stand for its scope. kube-apiserver reads
 * the present for resourceVersion unset (etcd), `0` and `NotOlderThan` (the watch cache, never
 * older than asked); `Exact`, and a legacy `resourceVersion=N` with `limit` (etcd at exactly N),
 * read the past. A continued list is what its first page was.
 */
export function listStatesPresent(info: RequestInfo): boolean {
  const rv = info.resourceVersion
  const match = info.query.get('resourceVersionMatch') ?? ''
  if (match === 'Exact') return false
  if (match === 'NotOlderThan' || rv === '' || rv === '0') return true
  return !(Number(info.query.get('limit')) > 0)
}
