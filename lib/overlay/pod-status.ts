// kubelet's write of a pod's status (PATCH or PUT of pods/<name>/status), applied to the cloud's copy of
// the pod as kube-apiserver would apply it, and what the pod's endpoints show afterwards. Pure: the
// overlay (learn.ts) calls it for writes that are still refused. Any local process can send such a
// write, so every input is bounded and nothing throws: a write the apiserver would refuse, or one past
// the bounds, comes back as { invalid } and the hub learns nothing from it.
import { isIP } from 'node:net'
import { decodeBody } from '../codec/typed.ts'
import type { LocalPod } from '../../filters/local-pod.ts'
import { applyJsonPatch, fail, has, Invalid, isObject, maxDepth, mergePatch, quote, strategicMap } from './json-patches.ts'
export { maxDepth } from './json-patches.ts'
import type { Json, Schema } from './json-patches.ts'

/** A status write as it reached the hub: PATCH or PUT of pods/<name>/status. */
export interface StatusWrite {
  verb: 'patch' | 'update'
  contentType: string | undefined
  body: Buffer
}

/** The pod as the cloud last said it (the cached object, decoded to JSON). */
export type PodJson = {
  metadata?: { namespace?: string; name?: string; uid?: string; deletionTimestamp?: string | null }
  spec?: { nodeName?: string }
  status?: Record<string, unknown>
}

/** the apiserver's (and the router's) largest request body */
export const maxWriteBytes = 3 * 1024 * 1024
/** a pod has a handful of conditions (readiness gates add some) */
export const maxConditions = 64
/** one address per family: the apiserver refuses more */
export const maxPodIPs = 2

const strategic = 'application/strategic-merge-patch+json'
const merge = 'application/merge-patch+json'
const jsonPatchType = 'application/json-patch+json'
const protobuf = 'application/vnd.kubernetes.protobuf'

/** The pod's status after the write, applied to the cloud's pod; or why the write cannot be applied (the hub then ignores it). */
export function statusAfterWrite(base: PodJson, write: StatusWrite): { status: Record<string, unknown> } | { invalid: string } {
  try {
    if (write.body.length > maxWriteBytes) fail(`the body is ${write.body.length} bytes, more than the apiserver takes (${maxWriteBytes})`)
    const type = (write.contentType ?? '').split(';')[0].trim().toLowerCase()
    const status = write.verb === 'update' ? statusOfUpdate(base, type, write.body) : statusOfPatch(base, type, write.body)
    checkStatus(status)
    return { status }
  } catch (error) {
    if (error instanceof Invalid) return { invalid: error.message }
    return { invalid: `the write cannot be applied: ${error instanceof Error ? error.message : String(error)}` }
  }
}

/** What an endpoint of the pod shows, from a pod (its status maybe the one statusAfterWrite made). */
export function localPodOf(pod: PodJson): LocalPod {
  const meta: Json = isObject(pod?.metadata) ? pod.metadata : {}
  const status: Json = isObject(pod?.status) ? pod.status : {}
  const text = (v: unknown): string => (typeof v === 'string' ? v : '')
  const ips: string[] = []
  const families = new Set<number>()
  for (const ip of podAddresses(status)) {
    const family = isIP(ip)
    if (family !== 0 && !families.has(family)) (families.add(family), ips.push(ip))
  }
  const conditions = Array.isArray(status.conditions) ? status.conditions.slice(0, maxConditions) : []
  const readyCondition = conditions.find(c => isObject(c) && c.type === 'Ready') as Json | undefined
  const serving = readyCondition?.status === 'True'
  const terminating = meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null && meta.deletionTimestamp !== ''
  return {
    namespace: text(meta.namespace),
    name: text(meta.name),
    uid: text(meta.uid),
    ips,
    ready: serving && !terminating,
    serving,
    gone: status.phase === 'Succeeded' || status.phase === 'Failed',
    terminating,
  }
}

/**
 * The pod's addresses as the apiserver reads a v1 status: podIPs, unless podIP is set and differs from
 * podIPs[0] (or podIPs is empty), when podIP alone counts (older kubelets write only podIP).
 */
function podAddresses(status: Json): string[] {
  const listed = Array.isArray(status.podIPs) ? status.podIPs.slice(0, maxPodIPs).map(e => (isObject(e) && typeof e.ip === 'string' ? e.ip : '')) : []
  const single = typeof status.podIP === 'string' ? status.podIP : ''
  return single !== '' && listed[0] !== single ? [single] : listed
}

/** What the apiserver's validation (and the hub's bounds) would refuse in a written status. */
function checkStatus(status: Json): void {
  const { conditions, podIPs, podIP } = status
  if (conditions !== undefined && conditions !== null) {
    if (!Array.isArray(conditions) || !conditions.every(isObject)) fail('status.conditions is not a list of objects')
    if (conditions.length > maxConditions) fail(`status.conditions has ${conditions.length} entries, more than ${maxConditions}`)
  }
  if (podIPs !== undefined && podIPs !== null) {
    if (!Array.isArray(podIPs) || !podIPs.every(e => isObject(e) && typeof e.ip === 'string')) fail('status.podIPs is not a list of {ip}')
    if (podIPs.length > maxPodIPs) fail(`status.podIPs has ${podIPs.length} addresses, more than one per family`)
  }
  if (podIP !== undefined && podIP !== null && typeof podIP !== 'string') fail('status.podIP is not a string')
  const families = new Set<number>()
  for (const ip of podAddresses(status)) {
    const family = isIP(ip)
    if (family === 0) fail(`status.podIPs: ${quote(ip)} is not an IP address`)
    if (families.has(family)) fail(`status.podIPs has two IPv${family} addresses`)
    families.add(family)
  }
}

function statusOf(v: unknown): Json {
  if (v === undefined || v === null) return {}
  return isObject(v) ? v : fail('status is not an object')
}

/** kubelet sends metadata.uid as a precondition: a write for another pod of the same name is refused. */
function checkUid(base: PodJson, uid: unknown): void {
  if (uid === undefined || uid === null || uid === base.metadata?.uid) return
  fail(`the write is for uid ${quote(uid)}, the pod's uid is ${quote(base.metadata?.uid)}`)
}

function statusOfUpdate(base: PodJson, type: string, body: Buffer): Json {
  let pod: unknown
  // the apiserver reads a PUT without a content type as JSON
  if (type === 'application/json' || type === '') pod = parseJson(body)
  else if (type === protobuf) {
    try {
      pod = decodeBody(body)
    } catch (error) {
      fail(`the protobuf body cannot be read: ${(error as Error).message}`)
    }
  } else fail(`a status update sent as ${quote(type)} (the hub reads application/json and ${protobuf})`)
  if (!isObject(pod)) return fail('the body is not a Pod object')
  if ((pod.kind !== undefined && pod.kind !== 'Pod') || (pod.apiVersion !== undefined && pod.apiVersion !== 'v1'))
    fail(`the body is a ${quote(pod.apiVersion)} ${quote(pod.kind)}, not a v1 Pod`)
  const meta = pod.metadata ?? {}
  if (!isObject(meta)) return fail('the body’s metadata is not an object')
  if (meta.name !== base.metadata?.name) fail(`the body names pod ${quote(meta.name)}, the URL ${quote(base.metadata?.name)}`)
  if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== base.metadata?.namespace)
    fail(`the body is in namespace ${quote(meta.namespace)}, the URL in ${quote(base.metadata?.namespace)}`)
  checkUid(base, meta.uid)
  return statusOf(pod.status)
}

function statusOfPatch(base: PodJson, type: string, body: Buffer): Json {
  if (type !== strategic && type !== merge && type !== jsonPatchType) {
    return fail(`a patch of type ${quote(type)} (the hub applies strategic merge, merge and JSON patches)`)
  }
  const patch = parseJson(body)
  if (type === jsonPatchType) {
    const pod = applyJsonPatch(structuredClone(base), patch)
    if (!isObject(pod)) return fail('the patch leaves no pod object')
    if (isObject(pod.metadata)) checkUid(base, pod.metadata.uid)
    const status = statusOf(pod.status)
    checkDepth(status, 0)
    return status
  }
  if (!isObject(patch)) return fail('the patch is not a JSON object')
  if (isObject(patch.metadata)) checkUid(base, patch.metadata.uid)
  if (type === merge) return has(patch, 'status') ? statusOf(mergePatch(base.status, patch.status)) : statusOf(base.status)
  return statusOf(strategicMap({ ...base }, patch, podSchema).status)
}

/** JSON.parse, after refusing nesting deeper than maxDepth (counted on the bytes, strings skipped). */
function parseJson(body: Buffer): unknown {
  let depth = 0
  for (let i = 0, inString = false; i < body.length; i++) {
    const c = body[i]
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) fail(`the body nests deeper than ${maxDepth}`)
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  try {
    return JSON.parse(body.toString('utf8'))
  } catch (error) {
    return fail(`the body is not JSON (${(error as Error).message})`)
  }
}

function checkDepth(v: unknown, depth: number): void {
  if (typeof v !== 'object' || v === null) return
  if (depth >= maxDepth) fail(`the result nests deeper than ${maxDepth}`)
  for (const child of Array.isArray(v) ? v : Object.values(v)) checkDepth(child, depth + 1)
}

/** The patch strategy of the fields a status write reaches (k8s.io/api core/v1 tags); other lists are replaced. */
const podSchema: Schema = {
  fields: {
    status: {
      // containerStatuses & co. carry no patch strategy in k8s.io/api: the apiserver replaces them whole
      fields: { conditions: { mergeKey: 'type' }, podIPs: { mergeKey: 'ip' }, hostIPs: { mergeKey: 'ip' }, resourceClaimStatuses: { mergeKey: 'name' } },
    },
  },
}
