// Service topology as a pure decision over plain data, in the manner of kube-proxy's
// CategorizeEndpoints: which endpoints of a Service this node may use, given the Service's
// `openyurt.io/topologyKeys` annotation and what the hub knows about nodes. The JSON and protobuf
// adapters only extract (nodeName, zone) per endpoint and apply the answer.

export const topologyAnnotation = 'openyurt.io/topologyKeys'
export const nodePoolLabel = 'apps.openyurt.io/nodepool'
export const hostnameKey = 'kubernetes.io/hostname'
export const zoneLabel = 'topology.kubernetes.io/zone'
/** OpenYurt's keys for "this node pool": a pool is the zone in OpenYurt, and clusters use both. */
const poolKeys = new Set(['openyurt.io/nodepool', 'kubernetes.io/zone'])

export interface TopologyContext {
  nodeName: string
  /** this node's labels */
  nodeLabels: Readonly<Record<string, string>>
  /** names of the nodes in this node's pool (this node included), empty when the pool is unknown */
  poolNodes: ReadonlySet<string>
  /** labels of every node the hub knows, for label-key topology (zone, region, any label) */
  nodeLabelsByName: ReadonlyMap<string, Readonly<Record<string, string>>>
}

export interface EndpointPlace {
  nodeName?: string
  /** the endpoint's own zone field (EndpointSlice v1), used for the zone label when its node is unknown */
  zone?: string
}

export type TopologyDecision =
  /** pass the object as it is; `invalid` says why when the annotation could not be used */
  | { kind: 'unchanged'; invalid?: string }
  /** keep[i] says whether endpoint i stays */
  | { kind: 'filter'; key: string; keep: boolean[] }

// A label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
const labelName = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

function isLabelKey(key: string): boolean {
  const slash = key.indexOf('/')
  if (slash === -1) return labelName.test(key)
  const prefix = key.slice(0, slash)
  return prefix.length <= 253 && dnsSubdomain.test(prefix) && labelName.test(key.slice(slash + 1))
}

const parsedKeys = new Map<string, string[] | { invalid: string }>()

/** The annotation's keys in order, or why it cannot be used (remembered: a cluster has few distinct annotations, and every object of a Service asks). */
export function parseTopologyKeys(annotation: string): string[] | { invalid: string } {
  let keys = parsedKeys.get(annotation)
  if (keys === undefined) {
    keys = parseKeys(annotation)
    if (parsedKeys.size >= 256) parsedKeys.clear()
    parsedKeys.set(annotation, keys)
  }
  return keys
}

function parseKeys(annotation: string): string[] | { invalid: string } {
  const keys = annotation.split(',').map(k => k.trim())
  if (keys.some(k => k === '')) return { invalid: `empty key in ${JSON.stringify(annotation)}` }
  const star = keys.indexOf('*')
  if (star !== -1 && star !== keys.length - 1) return { invalid: `"*" must be the last key, in ${JSON.stringify(annotation)}` }
  const bad = keys.find(k => k !== '*' && !isLabelKey(k))
  if (bad) return { invalid: `${JSON.stringify(bad)} is not a label key` }
  if (new Set(keys).size !== keys.length) return { invalid: `a key repeats in ${JSON.stringify(annotation)}` }
  return keys
}

function keeps(key: string, endpoint: EndpointPlace, ctx: TopologyContext): boolean {
  if (key === '*') return true
  const node = endpoint.nodeName
  if (key === hostnameKey) return node !== undefined && node === ctx.nodeName
  if (poolKeys.has(key)) return node !== undefined && ctx.poolNodes.has(node)
  const mine = ctx.nodeLabels[key]
  if (mine === undefined) return false // this node has no value for the key: nothing is "the same"
  const theirs = node === undefined ? undefined : ctx.nodeLabelsByName.get(node)
  if (theirs) return theirs[key] === mine
  // Kubernetes' topology semantics: an endpoint's own zone stands in for its unknown node's label.
  return key === zoneLabel && endpoint.zone !== undefined && endpoint.zone === mine
}

/**
 * The decision for one Service's endpoints. No annotation: unchanged. An ordered list: the first key
 * that keeps at least one endpoint wins; `*` (last only) keeps all. A single key, or a list none of
 * whose keys matches, keeps nothing: Kubernetes' topologyKeys semantics, `*` is how to ask for
 * fallback.
 */
export function decideTopology(annotation: string | undefined, endpoints: readonly EndpointPlace[], ctx: TopologyContext): TopologyDecision {
  if (annotation === undefined) return { kind: 'unchanged' }
  const keys = parseTopologyKeys(annotation)
  if (!Array.isArray(keys)) return { kind: 'unchanged', invalid: keys.invalid }
  for (const key of keys) {
    const keep = endpoints.map(endpoint => keeps(key, endpoint, ctx))
    if (keep.some(Boolean)) return { kind: 'filter', key, keep }
  }
  return { kind: 'filter', key: keys[keys.length - 1], keep: endpoints.map(() => false) }
}
