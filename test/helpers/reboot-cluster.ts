// A node's pods with addresses in EndpointSlices, for the offline-reboot tests: three pods of this
// node (one dual-stack), one of another node, and the slices the EndpointSlice controller would
// have written for them; and kubelet's status patches, shaped as a real kubelet's
// (test/fixtures/apiserver-v1.24/kubelet-writes/06, 07): a two-way strategic merge patch of the
// status the apiserver has against the new one.
import { request } from 'undici'
import type { ApiServerSimulator } from '../simulator/server.ts'

export const thisNode = 'kind-worker2'
export const namespace = 'shop'

export interface PodSpec {
  name: string
  node: string
  ips: string[]
}

export const pods: PodSpec[] = [
  { name: 'web-1', node: thisNode, ips: ['10.244.1.5'] },
  { name: 'web-2', node: thisNode, ips: ['10.244.1.6', 'fd00::6'] },
  { name: 'web-3', node: thisNode, ips: ['10.244.1.7'] },
  { name: 'db-1', node: 'edge-9', ips: ['10.244.2.7'] },
]

/** the uids the simulator gave the pods (loadCluster fills it in) */
const uids = new Map<string, string>()
export const uidOf = (name: string): string => uids.get(name) ?? `uid-${name}`

const condition = (type: string, status: string) => ({ type, status, lastProbeTime: null, lastTransitionTime: '2026-11-25T13:19:08Z' })

function pod(p: PodSpec): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: p.name, namespace, labels: { app: 'web' } },
    spec: { nodeName: p.node, containers: [{ name: 'app', image: 'k8s.gcr.io/pause:3.7' }] },
    status: {
      phase: 'Running',
      conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(type => condition(type, 'True')),
      hostIP: p.node === thisNode ? '192.0.2.2' : '192.0.2.9',
      podIP: p.ips[0],
      podIPs: p.ips.map(ip => ({ ip })),
    },
  }
}

export function endpoint(p: PodSpec, ip: string, ready = true): any {
  return {
    addresses: [ip],
    conditions: { ready, serving: ready, terminating: false },
    nodeName: p.node,
    targetRef: { kind: 'Pod', namespace, name: p.name, uid: uidOf(p.name) },
  }
}

const family = (ip: string) => (ip.includes(':') ? 'IPv6' : 'IPv4')

export function slice(name: string, addressType: 'IPv4' | 'IPv6', endpoints: any[]): any {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace, labels: { 'kubernetes.io/service-name': 'web' } },
    addressType,
    endpoints,
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  }
}

/** The slices as the controller wrote them for `specs`. */
export function slicesFor(specs: PodSpec[]): any[] {
  const of = (type: 'IPv4' | 'IPv6') => specs.flatMap(p => p.ips.filter(ip => family(ip) === type).map(ip => endpoint(p, ip)))
  return [slice('web-v4', 'IPv4', of('IPv4')), slice('web-v6', 'IPv6', of('IPv6'))]
}

export function loadCluster(sim: ApiServerSimulator): void {
  sim.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } })
  sim.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace }, spec: { ports: [{ name: 'http', port: 80, targetPort: 8080 }] } })
  for (const p of pods) uids.set(p.name, sim.create(pod(p)).metadata.uid)
  for (const s of slicesFor(pods)) sim.create(s)
}

/** kubelet's status patch after the pod restarted with `ips` (and `ready`), against the status the apiserver has (`was`). */
export function statusPatch(name: string, was: string[], ips: string[], ready = true): any {
  const readiness = ready ? 'True' : 'False'
  return {
    metadata: { uid: uidOf(name) },
    status: {
      '$setElementOrder/conditions': [{ type: 'Initialized' }, { type: 'Ready' }, { type: 'ContainersReady' }, { type: 'PodScheduled' }],
      '$setElementOrder/podIPs': ips.map(ip => ({ ip })),
      conditions: [
        { lastTransitionTime: '2026-11-27T08:00:05Z', message: null, reason: null, status: readiness, type: 'Ready' },
        { lastTransitionTime: '2026-11-27T08:00:05Z', message: null, reason: null, status: readiness, type: 'ContainersReady' },
      ],
      podIP: ips[0],
      podIPs: [...ips.map(ip => ({ ip })), ...was.filter(ip => !ips.includes(ip)).map(ip => ({ $patch: 'delete', ip }))],
    },
  }
}

const kubeletAgent = 'kubelet/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

/** kubelet's PATCH of pods/<name>/status through the hub: status code and the Status's message. */
export async function sendStatusPatch(hub: string, name: string, patch: unknown): Promise<{ status: number; message: string }> {
  const res = await request(`${hub}/api/v1/namespaces/${namespace}/pods/${name}/status`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/strategic-merge-patch+json', 'user-agent': kubeletAgent, accept: 'application/json' },
    body: JSON.stringify(patch),
  })
  const body = (await res.body.json()) as { message?: string }
  return { status: res.statusCode, message: body.message ?? '' }
}

/** kubelet's delete of a pod that finished terminating (grace period 0, uid precondition). */
export async function sendPodDelete(hub: string, name: string): Promise<number> {
  const res = await request(`${hub}/api/v1/namespaces/${namespace}/pods/${name}`, {
    method: 'DELETE',
    headers: { 'content-type': 'application/json', 'user-agent': kubeletAgent },
    body: JSON.stringify({ kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0, preconditions: { uid: uidOf(name) } }),
  })
  await res.body.dump()
  return res.statusCode
}

/** kubelet's list of its pods (what it reads first, and the hub caches). */
export async function listOwnPods(hub: string): Promise<number> {
  const res = await request(`${hub}/api/v1/pods?fieldSelector=spec.nodeName%3D${thisNode}`, {
    headers: { 'user-agent': kubeletAgent, accept: 'application/json' },
  })
  await res.body.dump()
  return res.statusCode
}

/** Each endpoint of the slices as `slice: pod=addresses ready`, sorted: what kube-proxy would program. */
export function endpointsSeen(slices: Iterable<any>): string[] {
  const out: string[] = []
  for (const s of slices)
    for (const e of s.endpoints ?? [])
      out.push(`${s.metadata.name}: ${e.targetRef?.name}=${(e.addresses ?? []).join(',')} ${e.conditions?.ready ? 'ready' : 'unready'}`)
  return out.sort()
}
