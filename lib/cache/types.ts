// What the cache holds, shared by the recorder (fills it), the store (indexes it), the disk layer
// (persists it) and the offline server (answers from it).
import type { RequestInfo } from '../api/requestinfo.ts'
import type { WireFormat } from '../api/wire-format.ts'

/** Which cached collection an object belongs to: one component's view of one resource. */
export interface ResourceKey {
  /** the User-Agent's component, e.g. kubelet, kube-proxy */
  component: string
  /** '' for the core group */
  group: string
  version: string
  /** plural resource name, e.g. pods, endpointslices */
  resource: string
}

export interface CachedObject {
  apiVersion: string
  kind: string
  /** '' for cluster-scoped objects */
  namespace: string
  name: string
  resourceVersion: string
  format: WireFormat
  /**
   * json: the object's JSON text, with kind and apiVersion set.
   * protobuf: the raw object message (what runtime.Unknown's `raw` field holds, without the
   * `k8s\0` envelope), so it can be put back into a list or a watch event byte for byte.
   */
  body: Buffer
  /**
   * Field values the apiserver vouched for: the equality terms of the field selector of the scope
   * the object arrived through (e.g. spec.nodeName for kubelet's pods). Lets offline lists evaluate
   * field selectors on protobuf objects, which the hub does not decode beyond ObjectMeta.
   */
  fields?: Record<string, string>
  /**
   * Ids of the list and watch scopes the object arrived through (ParsedScope.id). A DELETED or a
   * relist of one scope takes the object out of that scope; it leaves the cache when no scope holds
   * it. Absent for objects only fetched by name, or cached before scopes were kept.
   */
  scopes?: readonly string[]
  /** metadata.labels: from the decoder, which has read them already (saves the index a parse); written in the record's header, so a cold start need not parse bodies */
  labels?: Record<string, string>
}

/** The directory name of a resource on disk: `<resource>.<version>.<group>`, core group as `core`. */
export function resourceDirName(key: Pick<ResourceKey, 'group' | 'version' | 'resource'>): string {
  return `${key.resource}.${key.version}.${key.group || 'core'}`
}

/** The inverse of resourceDirName; undefined for a name that is not one. */
export function parseResourceDir(dir: string): Pick<ResourceKey, 'group' | 'version' | 'resource'> | undefined {
  const first = dir.indexOf('.')
  const second = first === -1 ? -1 : dir.indexOf('.', first + 1)
  if (first <= 0 || second <= first + 1 || second === dir.length - 1) return undefined
  const group = dir.slice(second + 1)
  return { resource: dir.slice(0, first), version: dir.slice(first + 1, second), group: group === 'core' ? '' : group }
}

/** Cluster-scoped objects live under this namespace directory (no namespace name can start with '_'). */
export const clusterScopeDir = '_cluster'

/**
 * `namespace/name`, the key of an object in the cache's maps. Built by join, which makes a flat
 * string: a template literal makes a tree of concatenations that a Map key keeps alive as it is,
 * and with three maps of every cached object that was about 5 MiB of 15,000 objects' keys.
 */
export function objectKey(namespace: string, name: string): string {
  return [namespace, name].join('/')
}

export function resourceKeyOf(info: RequestInfo): ResourceKey {
  return { component: info.component, group: info.apiGroup, version: info.apiVersion, resource: info.resource }
}
