// Object-level rules the apiserver applies on write: name (and RuntimeClass handler) validation (422 Invalid shaped like
// create-invalid.json), generateName, server-set metadata and a few defaults real clients rely on.

import { randomUUID } from 'node:crypto'
import { ApiError } from './errors.ts'
import type { ResourceEntry } from './resources.ts'

export function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z')
}

export function clone<T>(v: T): T {
  return v === undefined ? v : structuredClone(v)
}

const subdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const labelRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const dns1035Re = /^[a-z]([-a-z0-9]*[a-z0-9])?$/

const subdomainMsg =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
const labelMsg =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
const dns1035Msg =
  "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"

/** Why `name` is not a valid name for this resource, or undefined. */
function nameProblem(entry: ResourceEntry, name: string): string | undefined {
  if (entry.storageKey === '/namespaces') {
    if (name.length > 63) return 'must be no more than 63 characters'
    return labelRe.test(name) ? undefined : labelMsg
  }
  if (entry.storageKey === '/services') {
    if (name.length > 63) return 'must be no more than 63 characters'
    return dns1035Re.test(name) ? undefined : dns1035Msg
  }
  // ValidateRBACName: a path segment, so kubeadm's and the system's `system:…` names (colons) are valid
  if (entry.group === 'rbac.authorization.k8s.io') {
    if (name === '.' || name === '..') return `may not be '${name}'`
    const bad = ['/', '%'].find(c => name.includes(c))
    return bad === undefined ? undefined : `may not contain '${bad}'`
  }
  if (name.length > 253) return 'must be no more than 253 characters'
  return subdomainRe.test(name) ? undefined : subdomainMsg
}

/** Fields beyond the name that v1.24's create validation refuses (422) for the kinds the simulator checks. */
function validateFields(entry: ResourceEntry, obj: any): void {
  if (entry.storageKey === 'node.k8s.io/runtimeclasses') {
    // ValidateRuntimeClass: the handler names a CRI configuration, a DNS-1123 label
    const handler = typeof obj.handler === 'string' ? obj.handler : ''
    const problem = handler.length > 63 ? 'must be no more than 63 characters' : labelRe.test(handler) ? undefined : labelMsg
    if (problem) throw invalid(entry, obj.metadata.name, 'handler', 'FieldValueInvalid', `Invalid value: "${handler}": ${problem}`)
  }
}

export function invalid(entry: ResourceEntry, name: string, field: string, reason: string, detail: string): ApiError {
  const qualifiedKind = entry.group ? `${entry.kind}.${entry.group}` : entry.kind
  const causes = [{ reason, message: detail, field }]
  const details = entry.group ? { name, group: entry.group, kind: entry.kind, causes } : { name, kind: entry.kind, causes }
  return ApiError.of(422, `${qualifiedKind} "${name}" is invalid: ${field}: ${detail}`, 'Invalid', details)
}

export function validateName(entry: ResourceEntry, name: string): void {
  const problem = nameProblem(entry, name)
  if (problem) throw invalid(entry, name, 'metadata.name', 'FieldValueInvalid', `Invalid value: "${name}": ${problem}`)
}

const generateAlphabet = 'bcdfghjklmnpqrstvwxz2456789'

export function generateName(prefix: string): string {
  let suffix = ''
  for (let i = 0; i < 5; i++) suffix += generateAlphabet[Math.floor(Math.random() * generateAlphabet.length)]
  return prefix + suffix
}

/** Fields the apiserver owns are reset on create; then the name rules apply. */
export function prepareCreate(entry: ResourceEntry, obj: any, exists: (name: string) => boolean): any {
  const meta = { ...(obj.metadata ?? {}) }
  if (!meta.name && meta.generateName) {
    let name = generateName(meta.generateName)
    for (let i = 0; i < 10 && exists(name); i++) name = generateName(meta.generateName)
    meta.name = name
  }
  if (!meta.name) {
    throw invalid(entry, '', 'metadata.name', 'FieldValueRequired', 'Required value: name or generateName is required')
  }
  validateName(entry, meta.name)
  validateFields(entry, { ...obj, metadata: meta })
  if (!entry.namespaced) delete meta.namespace
  delete meta.resourceVersion
  delete meta.deletionTimestamp
  delete meta.deletionGracePeriodSeconds
  delete meta.selfLink
  meta.uid = randomUUID()
  meta.creationTimestamp = now()
  if (entry.generation) meta.generation = 1
  else delete meta.generation
  return applyDefaults(entry, { ...obj, metadata: meta })
}

let nextClusterIP = 100

function allocateClusterIP(): string {
  // 10.96.0.0/12; 10.96.0.1 is the kubernetes Service's
  const n = nextClusterIP++
  return `10.96.${(n >> 8) & 255}.${n & 255}`
}

/** The few defaults a real apiserver adds that clients read: Service IPs, Secret data, Pod phase, CSIDriver spec. */
export function applyDefaults(entry: ResourceEntry, obj: any): any {
  switch (entry.storageKey) {
    case '/services': {
      const spec = { ...(obj.spec ?? {}) }
      spec.type ??= 'ClusterIP'
      if (spec.type !== 'ExternalName') {
        if (!spec.clusterIP) spec.clusterIP = obj.metadata.name === 'kubernetes' && obj.metadata.namespace === 'default' ? '10.96.0.1' : allocateClusterIP()
        spec.clusterIPs ??= [spec.clusterIP]
        spec.ipFamilies ??= ['IPv4']
        spec.ipFamilyPolicy ??= 'SingleStack'
        spec.internalTrafficPolicy ??= 'Cluster'
      }
      spec.sessionAffinity ??= 'None'
      if (Array.isArray(spec.ports)) {
        spec.ports = spec.ports.map((p: any) => ({ protocol: 'TCP', ...p, targetPort: p.targetPort ?? p.port }))
      }
      return { ...obj, spec, status: obj.status ?? { loadBalancer: {} } }
    }
    case '/secrets': {
      const { stringData, ...rest } = obj
      const data = { ...(obj.data ?? {}) }
      for (const [k, v] of Object.entries(stringData ?? {})) data[k] = Buffer.from(String(v)).toString('base64')
      const out: any = { ...rest, type: obj.type ?? 'Opaque' }
      if (Object.keys(data).length > 0) out.data = data
      return out
    }
    case '/pods':
      return { ...obj, status: obj.status ?? { phase: 'Pending' } }
    case '/namespaces':
      return {
        ...obj,
        metadata: { ...obj.metadata, labels: { 'kubernetes.io/metadata.name': obj.metadata.name, ...(obj.metadata.labels ?? {}) } },
        spec: obj.spec ?? { finalizers: ['kubernetes'] },
        status: obj.status ?? { phase: 'Active' },
      }
    case 'storage.k8s.io/csidrivers':
      return { ...obj, spec: defaultCsiDriverSpec(obj.spec ?? {}) }
    case 'storage.k8s.io/csinodes':
      // `json:"drivers"` without omitempty: Go writes null for none
      return { ...obj, spec: { ...(obj.spec ?? {}), drivers: obj.spec?.drivers ?? null } }
    default:
      return obj
  }
}

/** SetDefaults_CSIDriver (storage/v1 with v1.24's feature gates), keyed in Go struct order: the apiserver's JSON order. */
const csiDriverSpecDefaults: Record<string, unknown> = {
  attachRequired: true,
  podInfoOnMount: false,
  volumeLifecycleModes: ['Persistent'],
  storageCapacity: false,
  fsGroupPolicy: 'ReadWriteOnceWithFSType',
  tokenRequests: undefined,
  requiresRepublish: false,
}

function defaultCsiDriverSpec(spec: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, fallback] of Object.entries(csiDriverSpecDefaults)) {
    const given = spec[key]
    const unset = given === undefined || given === null || (Array.isArray(given) && given.length === 0)
    const value = unset ? structuredClone(fallback) : given
    if (value !== undefined) out[key] = value
  }
  for (const [key, value] of Object.entries(spec)) if (!(key in csiDriverSpecDefaults)) out[key] = value
  return out
}

/** Whether anything outside metadata and status changed (generation is bumped then). */
export function specChanged(before: any, after: any): boolean {
  const strip = (o: any) => {
    const { metadata: _m, status: _s, ...rest } = o ?? {}
    return rest
  }
  return JSON.stringify(sortKeys(strip(before))) !== JSON.stringify(sortKeys(strip(after)))
}

/** Recursively sorted object keys: how custom resources (unstructured JSON) come out of the apiserver. */
export function sortKeys(v: any): any {
  if (Array.isArray(v)) return v.map(sortKeys)
  if (v === null || typeof v !== 'object') return v
  const out: any = {}
  for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k])
  return out
}

/** Object key in etcd order: `<namespace>/<name>` or `<name>`. */
export function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name
}

const metaOrder = [
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
]

function ordered(obj: Record<string, any>, first: string[]): Record<string, any> {
  const out: Record<string, any> = {}
  for (const k of first) if (obj[k] !== undefined) out[k] = obj[k]
  for (const [k, v] of Object.entries(obj)) if (!(k in out) && v !== undefined) out[k] = v
  return out
}

/** Field order as the apiserver encodes built-in objects: kind, apiVersion, metadata (name, namespace, uid, …), the rest. */
export function canonical(obj: any): any {
  const out = ordered(obj, ['kind', 'apiVersion', 'metadata'])
  if (out.metadata) {
    out.metadata = ordered(out.metadata, metaOrder)
    // empty maps are omitted, as Go's encoder does for omitempty fields
    for (const k of ['labels', 'annotations']) {
      const v = out.metadata[k]
      if (v && typeof v === 'object' && Object.keys(v).length === 0) delete out.metadata[k]
    }
  }
  return out
}
