// Resource names as kubectl takes them, for the admin port's /debug/cache: the plural
// (`endpointslices`), plural.group (`endpointslices.discovery.k8s.io`), plural.version.group (the
// cache's own directory name), the singular kind (`endpointslice`), and short names (`eps`, `svc`,
// `po`, `no`, `ep`, …: kubectl's built-in ones, and those the cached discovery documents list).
// Pure: the caller passes what the cache holds.

export interface ResourceRef {
  group: string
  version: string
  resource: string
  /** the kind, lower-cased, when known (the singular name) */
  singular?: string
}

/** kubectl's short names for the built-in resources (as kube-apiserver's discovery lists them). */
export const builtinShortNames: Record<string, { resource: string; group: string }> = {
  po: { resource: 'pods', group: '' },
  svc: { resource: 'services', group: '' },
  no: { resource: 'nodes', group: '' },
  ep: { resource: 'endpoints', group: '' },
  eps: { resource: 'endpointslices', group: 'discovery.k8s.io' },
  cm: { resource: 'configmaps', group: '' },
  ns: { resource: 'namespaces', group: '' },
  sa: { resource: 'serviceaccounts', group: '' },
  ev: { resource: 'events', group: '' },
  pv: { resource: 'persistentvolumes', group: '' },
  pvc: { resource: 'persistentvolumeclaims', group: '' },
  rc: { resource: 'replicationcontrollers', group: '' },
  limits: { resource: 'limitranges', group: '' },
  quota: { resource: 'resourcequotas', group: '' },
  ds: { resource: 'daemonsets', group: 'apps' },
  deploy: { resource: 'deployments', group: 'apps' },
  rs: { resource: 'replicasets', group: 'apps' },
  sts: { resource: 'statefulsets', group: 'apps' },
  cj: { resource: 'cronjobs', group: 'batch' },
  hpa: { resource: 'horizontalpodautoscalers', group: 'autoscaling' },
  ing: { resource: 'ingresses', group: 'networking.k8s.io' },
  netpol: { resource: 'networkpolicies', group: 'networking.k8s.io' },
  pdb: { resource: 'poddisruptionbudgets', group: 'policy' },
  pc: { resource: 'priorityclasses', group: 'scheduling.k8s.io' },
  sc: { resource: 'storageclasses', group: 'storage.k8s.io' },
  csr: { resource: 'certificatesigningrequests', group: 'certificates.k8s.io' },
  crd: { resource: 'customresourcedefinitions', group: 'apiextensions.k8s.io' },
  crds: { resource: 'customresourcedefinitions', group: 'apiextensions.k8s.io' },
}

export type Resolution = { ref: ResourceRef; note?: string } | { error: string }

/** Kubernetes' version order: GA before beta before alpha, higher numbers first. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v)
    return m ? [m[2] === undefined ? 3 : m[2] === 'beta' ? 2 : 1, Number(m[1]), Number(m[3] ?? 0)] : [0, 0, 0]
  }
  const [x, y] = [parse(a), parse(b)]
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return y[i] - x[i]
  return a < b ? -1 : a > b ? 1 : 0
}

const describe = (r: ResourceRef) => `${r.resource}.${r.version}.${r.group || 'core'}`

/**
 * The cached resource a name means. Several matches (versions of one group, or groups) choose the
 * core group, then the preferred version, and say so in `note`.
 */
export function resolveResourceName(
  name: string,
  available: ResourceRef[],
  shortNames: Record<string, { resource: string; group: string }> = builtinShortNames,
): Resolution {
  const lower = name.toLowerCase()
  const full = available.filter(r => describe(r) === lower)
  if (full.length === 1) return { ref: full[0] }
  const dot = lower.indexOf('.')
  const [head, group] = dot === -1 ? [lower, undefined] : [lower.slice(0, dot), lower.slice(dot + 1)]
  const short = shortNames[lower]
  let matches = available.filter(r => (r.resource === head || r.singular === head) && (group === undefined || r.group === group))
  if (matches.length === 0 && short) matches = available.filter(r => r.resource === short.resource && r.group === short.group)
  if (matches.length === 0)
    return { error: `no cached resource is called ${JSON.stringify(name)}${available.length > 0 ? `; cached: ${available.map(describe).join(', ')}` : ''}` }
  const sorted = [...matches].sort((a, b) =>
    a.group === '' ? -1 : b.group === '' ? 1 : a.group < b.group ? -1 : a.group > b.group ? 1 : compareVersions(a.version, b.version),
  )
  const ref = sorted[0]
  return sorted.length === 1 ? { ref } : { ref, note: `${JSON.stringify(name)} could be ${sorted.map(describe).join(' or ')}: showing ${describe(ref)}` }
}
