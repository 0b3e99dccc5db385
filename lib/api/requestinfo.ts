// Request classification, after k8s.io/apiserver's RequestInfoFactory: the same path grammar, so
// the hub decides what to cache, filter or refuse exactly where the apiserver would see the
// same resource. A pure function over (method, url, headers) so a table test can pin it down.

export type Verb =
  | 'get'
  | 'list'
  | 'watch'
  | 'create'
  | 'update'
  | 'patch'
  | 'delete'
  | 'deletecollection'
  | 'proxy'
  | 'connect'

export interface RequestInfo {
  /** false for /healthz, /version, /openapi/v2, discovery roots like /apis … */
  isResourceRequest: boolean
  /** resource verb, or the lower-cased HTTP method for non-resource requests */
  verb: Verb | string
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
  query: URLSearchParams
}

// Subresources whose REST storage is a "connecter" in the apiserver: they stream or upgrade.
const connectSubresources = new Set(['exec', 'attach', 'portforward'])
// A namespace's own subresources, so /api/v1/namespaces/x/status is not read as resource "status".
const namespaceSubresources = new Set(['status', 'finalize'])

const verbByMethod: Record<string, Verb> = {
  GET: 'get',
  HEAD: 'get',
  POST: 'create',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
}

export function componentOf(userAgent: string | undefined): string {
  if (!userAgent) return ''
  const slash = userAgent.indexOf('/')
  return (slash === -1 ? userAgent : userAgent.slice(0, slash)).trim().toLowerCase()
}

function splitPath(path: string): string[] {
  return path.split('/').filter(part => part !== '')
}

export function classify(method: string, url: string, userAgent?: string): RequestInfo {
  const queryStart = url.indexOf('?')
  const path = queryStart === -1 ? url : url.slice(0, queryStart)
  const query = new URLSearchParams(queryStart === -1 ? '' : url.slice(queryStart + 1))
  const info: RequestInfo = {
    isResourceRequest: false,
    verb: method.toLowerCase(),
    path,
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
  }

  let parts: string[]
  try {
    parts = splitPath(path).map(decodeURIComponent)
  } catch {
    return info // undecodable path: not a resource the hub can reason about; it is forwarded as is
  }

  // /api/v1/… (core) or /apis/<group>/<version>/…; anything shorter is discovery or non-resource.
  if (parts[0] === 'api' && parts.length >= 3) {
    info.apiVersion = parts[1]
    parts = parts.slice(2)
  } else if (parts[0] === 'apis' && parts.length >= 4) {
    info.apiGroup = parts[1]
    info.apiVersion = parts[2]
    parts = parts.slice(3)
  } else {
    return info
  }

  info.isResourceRequest = true
  let verb: Verb | undefined = verbByMethod[method.toUpperCase()]
  if (parts[0] === 'watch') {
    verb = 'watch'
    parts = parts.slice(1)
  } else if (parts[0] === 'proxy') {
    // the long-deprecated /api/v1/proxy/namespaces/<ns>/<resource>/<name>/… form
    verb = 'proxy'
    parts = parts.slice(1)
  }
  if (parts.length === 0) {
    info.isResourceRequest = false
    info.verb = method.toLowerCase()
    return info
  }

  if (parts[0] === 'namespaces') {
    if (parts.length > 1) {
      info.namespace = parts[1]
      if (parts.length > 2 && !namespaceSubresources.has(parts[2])) parts = parts.slice(2)
    }
  }

  info.resource = parts[0]
  if (parts.length >= 2) info.name = parts[1]
  // the proxy verb's trailing path is the proxied service's, not a subresource
  if (parts.length >= 3 && verb !== 'proxy') info.subresource = parts[2]

  if (verb === undefined) {
    info.verb = method.toLowerCase()
    return info
  }
  if (verb !== 'proxy' && verb !== 'watch') {
    if (connectSubresources.has(info.subresource)) verb = 'connect'
    else if (info.subresource === 'proxy') verb = 'proxy'
  }
  if (info.name === '') {
    if (verb === 'get') verb = 'list'
    else if (verb === 'delete') verb = 'deletecollection'
  }
  if (verb === 'list' && isTrue(query.get('watch'))) verb = 'watch'
  if ((verb === 'list' || verb === 'watch') && info.name === '') info.name = nameFromFieldSelector(info.fieldSelector)
  info.verb = verb
  return info
}

// The apiserver's query-to-bool conversion: present and not "false"/"0" (any case) is true,
// so `?watch` and `?watch=True` are watches too.
function isTrue(value: string | null): boolean {
  return value !== null && value !== '0' && value.toLowerCase() !== 'false'
}

// `fieldSelector=metadata.name=x` names one object (kubelet watches its own Node this way).
function nameFromFieldSelector(fieldSelector: string): string {
  for (const term of fieldSelector.split(',')) {
    const match = /^\s*metadata\.name\s*==?\s*(.*?)\s*$/.exec(term)
    if (match) return match[1]
  }
  return ''
}

/** Whether the response is a long-lived stream whose headers must be flushed before any event. */
/** `pods`, `endpointslices.discovery.k8s.io`, `pods/exec`; '' for a non-resource path. */
export function qualifiedResource(info: RequestInfo): string {
  if (!info.isResourceRequest) return ''
  const gr = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource
  return info.subresource ? `${gr}/${info.subresource}` : gr
}

export function isWatch(info: RequestInfo): boolean {
  return info.verb === 'watch'
}
