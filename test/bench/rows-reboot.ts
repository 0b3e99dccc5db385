// Row 13 (issue 32): after a reboot with the cloud away, how soon kube-proxy sees a pod of this node
// at the address kubelet just wrote. A simulator process of its own (the cloud goes dark in it, and
// kube-proxy's view is this cluster only): pods of the hub's node in EndpointSlices (targetRef with
// the pod's uid, nodeName), beside endpoints of other nodes and Services of other nodes only.
//   online: kubelet lists its pods, kube-proxy lists and watches the slices (JSON and protobuf), both
//     through the hub; baseline: the simulator rewrites each pod's endpoint to a new address (the
//     EndpointSlice controller's writes), each timed to the first event naming it on each watch
//   then the cloud goes dark, the hub is SIGKILLed and started again offline on the same cache;
//   kube-proxy lists and watches again from its list's version; kubelet sends each pod's status patch
//   (strategic merge, as a real kubelet's) with yet another address, `concurrency` at a time: each is
//   timed from its send to the first event naming its new address on each watch.
// Twice: beside a few Services of other nodes, and beside many (what an overlay change costs grows
// with the slices the hub re-filters for each open watch).
import { Agent, request } from 'undici'
import { statusPatch, uidOf } from '../helpers/reboot-cluster.ts'
import { clientHeaders, clock, openWatch, percentile, userAgents } from './load.ts'
import type { Format, OpenWatch } from './load.ts'
import * as objects from './objects.ts'
import { HubProcess, SimProcess, sleep } from './processes.ts'
import { figureRow, guarded, naRow, thousands } from './report.ts'
import type { Row } from './report.ts'

export interface RebootCounts {
  /** pods of the hub's node, each with one endpoint */
  pods: number
  podsPerService: number
  /** endpoints of other nodes in each slice of the node's Services */
  othersPerSlice: number
  /** Services whose slices name only pods of other nodes */
  otherServices: number
  /** kubelet's status patches in flight at once */
  concurrency: number
  settleMs: number
}

const targetMs = 1_000
const namespace = 'reboot-apps'

/** The address of the hub node's pod `k`: round 0 as seeded, 1 after the cloud's rewrite (online), 2 as kubelet writes it offline. */
export const podAddress = (round: number, k: number): string => `10.${244 + round}.${Math.floor(k / 250)}.${(k % 250) + 2}`
export const podName = (k: number): string => `local-${k}`
const serviceOf = (k: number, counts: RebootCounts): number => Math.floor(k / counts.podsPerService)
const serviceName = (s: number): string => `edge-svc-${s}`
const sliceName = (s: number): string => `${serviceName(s)}-x7k2p`
/** other nodes in turn: a third of them in the hub's pool (servicetopology keeps those) */
const otherNode = (i: number): string => objects.nodeName(1 + (i % (objects.nodeCount - 1)))

function pod(k: number): any {
  const condition = (type: string) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: '2026-11-25T13:19:08Z' })
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName(k), namespace, uid: uidOf(podName(k)), labels: { app: 'edge' } },
    spec: { nodeName: objects.hubNode, containers: [{ name: 'app', image: 'registry.k8s.io/e2e-test-images/agnhost:2.39' }] },
    status: {
      phase: 'Running',
      conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(condition),
      hostIP: '192.168.0.10',
      podIP: podAddress(0, k),
      podIPs: [{ ip: podAddress(0, k) }],
    },
  }
}

function endpoint(name: string, uid: string, ip: string, nodeName: string): any {
  return {
    addresses: [ip],
    conditions: { ready: true, serving: true, terminating: false },
    nodeName,
    targetRef: { kind: 'Pod', namespace, name, uid },
  }
}

function service(s: number): any {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: serviceName(s), namespace, annotations: { 'openyurt.io/topologyKeys': 'openyurt.io/nodepool' } },
    spec: { selector: { app: serviceName(s) }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
  }
}

function slice(s: number, endpoints: any[]): any {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: sliceName(s),
      namespace,
      labels: { 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io', 'kubernetes.io/service-name': serviceName(s) },
    },
    addressType: 'IPv4',
    endpoints,
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  }
}

const localServices = (counts: RebootCounts): number => Math.ceil(counts.pods / counts.podsPerService)

/** The cluster but its slices: the nodes, the node's pods, the Services. */
export function rebootCluster(counts: RebootCounts): any[] {
  const out: any[] = [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }]
  for (let i = 0; i < objects.nodeCount; i++) out.push(objects.node(i))
  for (let k = 0; k < counts.pods; k++) out.push(pod(k))
  for (let s = 0; s < localServices(counts) + counts.otherServices; s++) out.push(service(s))
  return out
}

/**
 * The slices: the node's pods (by the uids the simulator gave them: the filter matches targetRef.uid)
 * beside endpoints of other nodes, then Services of other nodes only.
 */
export function rebootSlices(counts: RebootCounts, podUids: string[]): any[] {
  const local = localServices(counts)
  const others = (s: number, n: number) =>
    Array.from({ length: n }, (_, j) => endpoint(`other-${s}-${j}`, uidOf(`other-${s}-${j}`), `10.200.${s % 250}.${j + 2}`, otherNode(s * n + j)))
  return Array.from({ length: local + counts.otherServices }, (_, s) => {
    const own = podUids.flatMap((uid, k) => (serviceOf(k, counts) === s ? [endpoint(podName(k), uid, podAddress(0, k), objects.hubNode)] : []))
    return slice(s, [...own, ...others(s, s < local ? counts.othersPerSlice : objects.endpointsPerSlice)])
  })
}

/**
 * A watch that notes when each awaited address first shows up in a frame: JSON `"<ip>"`, protobuf
 * the string field (its length byte, then the bytes), so 10.1.0.1 is not found in 10.1.0.10.
 */
class AddressWatch {
  private readonly pending = new Map<number, Buffer>()
  private readonly seenAt = new Map<number, number>()
  watch!: OpenWatch

  constructor(readonly format: Format) {}

  async open(url: string): Promise<void> {
    this.watch = await openWatch(url, clientHeaders(userAgents.kubeProxy, this.format), (frame, at) => {
      for (const [i, needle] of this.pending)
        if (frame.includes(needle)) {
          this.seenAt.set(i, at)
          this.pending.delete(i)
        }
    })
    const protobuf = this.watch.contentType.startsWith('application/vnd.kubernetes.protobuf')
    if (protobuf !== (this.format === 'protobuf')) throw new Error(`a ${this.format} watch was answered ${this.watch.contentType}`)
  }

  /** Awaits `ips` (by index), before what makes them appear. */
  expect(ips: string[]): void {
    this.seenAt.clear()
    for (const [i, ip] of ips.entries())
      this.pending.set(i, this.format === 'json' ? Buffer.from(`"${ip}"`) : Buffer.concat([Buffer.from([ip.length]), Buffer.from(ip)]))
  }

  /** When each awaited address arrived (clock()); throws if some did not within `timeoutMs`. */
  async arrivals(count: number, timeoutMs: number): Promise<number[]> {
    const deadline = performance.now() + timeoutMs
    while (this.pending.size > 0 && performance.now() < deadline) await sleep(20)
    if (this.pending.size > 0)
      throw new Error(
        `${this.pending.size} of ${count} new addresses never reached the ${this.format} watch within ${timeoutMs / 1000} s (${this.watch.count} frames came)`,
      )
    return Array.from({ length: count }, (_, i) => this.seenAt.get(i)!)
  }

  close(): void {
    this.watch?.close()
  }
}

const listPath = objects.slicesPath
const watchPath = (rv: string) => `${objects.slicesWatchPath(rv)}&allowWatchBookmarks=true&timeoutSeconds=540`

/** kube-proxy's list (JSON), until the hub answers it whole: its resourceVersion. */
async function listSlices(hub: HubProcess, timeoutMs = 60_000): Promise<{ rv: string; items: number }> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const res = await request(hub.url + listPath, { headers: clientHeaders(userAgents.kubeProxy, 'json') })
    if (res.statusCode === 200) {
      const list = (await res.body.json()) as { metadata: { resourceVersion: string }; items: unknown[] }
      return { rv: list.metadata.resourceVersion, items: list.items.length }
    }
    const text = await res.body.text()
    if (performance.now() > deadline) throw new Error(`kube-proxy's list: ${res.statusCode} ${text.slice(0, 300)}`)
    await sleep(100)
  }
}

async function debugCache(hub: HubProcess): Promise<any> {
  const res = await request(`${hub.adminUrl}/debug/cache`)
  return res.body.json()
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await sleep(100)
  }
}

const cloudIs = (hub: HubProcess, state: string) => until(`the hub to find the cloud ${state}`, async () => (await debugCache(hub)).cloud === state)

async function openWatches(hub: HubProcess, rv: string): Promise<AddressWatch[]> {
  const watches = [new AddressWatch('json'), new AddressWatch('protobuf')]
  await Promise.all(watches.map(w => w.open(hub.url + watchPath(rv))))
  return watches
}

/** kubelet's status patches, `concurrency` in flight: each one's send time (clock()) and the hub's answers. */
async function sendPatches(hub: HubProcess, podUids: string[], concurrency: number): Promise<{ sentAt: number[]; answers: Map<string, number> }> {
  const count = podUids.length
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 60_000 })
  const sentAt: number[] = []
  const answers = new Map<string, number>()
  let next = 0
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let k = next++; k < count; k = next++) {
          const body = JSON.stringify({ ...statusPatch(podName(k), [podAddress(0, k)], [podAddress(2, k)]), metadata: { uid: podUids[k] } })
          sentAt[k] = clock()
          const res = await request(`${hub.url}/api/v1/namespaces/${namespace}/pods/${podName(k)}/status`, {
            method: 'PATCH',
            headers: { 'content-type': 'application/strategic-merge-patch+json', 'user-agent': userAgents.kubelet, accept: 'application/json' },
            body,
            dispatcher: agent,
          })
          const status = (await res.body.json()) as { message?: string }
          // what the hub said it learned, without the pod's name and address: one line per kind of answer
          const learned = (status.message ?? '')
            .replace(/.*; /, '')
            .replace(/[a-z0-9-]+\/local-[0-9]+/g, '<pod>')
            .replace(/ at [0-9.]+,/, ' at <ip>,')
          const key = `${res.statusCode}: ${learned.slice(0, 200)}`
          answers.set(key, (answers.get(key) ?? 0) + 1)
        }
      }),
    )
  } finally {
    await agent.close()
  }
  return { sentAt, answers }
}

interface Delays {
  p50: number
  p99: number
  worst: number
  all: number[]
}

const delaysOf = (from: number[], to: number[]): Delays => {
  const all = to.map((t, i) => t - from[i])
  return { p50: percentile(all, 50), p99: percentile(all, 99), worst: Math.max(...all), all }
}
const ms = (n: number): string => `${n.toFixed(0)} ms`
const spread = (d: Delays): string => `p50 ${ms(d.p50)}, p99 ${ms(d.p99)}, worst ${ms(d.worst)}`

/**
 * The rows of one cluster size, `id` their ids' stem (reboot.<id>.json, .protobuf): the JSON and the
 * protobuf watch, each its p99 offline against the same delay online.
 */
export async function rebootRows(hubEntry: string, id: string, counts: RebootCounts, progress: (what: string) => void): Promise<Row[]> {
  const rows: Row[] = []
  const cached = thousands(localServices(counts) + counts.otherServices)
  const what = `offline after a reboot: kubelet status write with a new address → kube-proxy's watch event, ${counts.pods} pods, ${cached} slices cached`
  const base = (format: Format) => ({
    id: `reboot.${id}.${format}`,
    name: `${what} (${format === 'json' ? 'JSON' : 'protobuf'} watch), p99`,
    unit: 'ms',
    baselineLabel: 'online slice write',
    protobuf: format === 'protobuf',
  })
  const target = `≤ ${thousands(targetMs)} ms`
  const specs = (['json', 'protobuf'] as const).map(f => ({ base: base(f), better: 'lower' as const, target }))
  const sim = await SimProcess.start()
  try {
    await guarded(rows, specs, async () => {
      const cluster = rebootCluster(counts)
      const { uids } = (await sim.call('createObjects', { objects: cluster })) as { uids: string[] }
      const podUids = cluster.flatMap((o, i) => (o.kind === 'Pod' ? [uids[i]] : []))
      const slices = ((await sim.call('createObjects', { objects: rebootSlices(counts, podUids) })) as { uids: string[] }).uids.length
      progress(`reboot: ${counts.pods} pods of ${objects.hubNode} in ${slices} slices (with ${counts.otherServices} Services of other nodes only)`)

      // online: kubelet's pods and kube-proxy's slices cached; the cloud's own rewrite as the baseline
      let hub = await HubProcess.start(hubEntry, { server: sim.url })
      try {
        const pods = await request(`${hub.url}${objects.nodePodsPath}`, { headers: clientHeaders(userAgents.kubelet, 'json') })
        const podList = (await pods.body.json()) as { items?: unknown[] }
        if (pods.statusCode !== 200 || podList.items?.length !== counts.pods)
          throw new Error(`kubelet's list of its pods: ${pods.statusCode}, ${podList.items?.length} pods`)
        const online = await listSlices(hub)
        let watches = await openWatches(hub, online.rv)
        const changes = Array.from({ length: counts.pods }, (_, k) => ({
          namespace,
          slice: sliceName(serviceOf(k, counts)),
          pod: podName(k),
          ip: podAddress(1, k),
        }))
        for (const w of watches) w.expect(changes.map(c => c.ip))
        const written = (await sim.call('setEndpointAddresses', { changes, batch: counts.concurrency })) as { writtenAt: number[] }
        const baseline = await Promise.all(watches.map(async w => delaysOf(written.writtenAt, await w.arrivals(counts.pods, 60_000))))
        for (const w of watches) w.close()
        await until('the slices and the pods cached', async () => {
          const cached = (await debugCache(hub)).collections as { resource: string; listed?: boolean }[]
          return ['endpointslices', 'pods'].every(r => cached.some(c => c.resource.includes(r) && c.listed))
        })
        await sleep(counts.settleMs)

        // the cloud goes dark; the node reboots: kill -9, and the hub starts again on its cache, offline
        await sim.call('fault', { fault: 'refuse' })
        await cloudIs(hub, 'offline')
        await hub.kill()
        const restartedAt = performance.now()
        hub = await HubProcess.start(hubEntry, { server: sim.url, cacheDir: hub.cacheDir })
        await cloudIs(hub, 'offline')
        const offline = await listSlices(hub)
        const listedMs = performance.now() - restartedAt
        watches = await openWatches(hub, offline.rv)
        try {
          for (const w of watches) w.expect(changes.map((_, k) => podAddress(2, k)))
          const { sentAt, answers } = await sendPatches(hub, podUids, counts.concurrency)
          // each watch its own row: one format failing leaves the other's figure
          const measured = await Promise.all(
            watches.map(w =>
              w.arrivals(counts.pods, 30_000).then(
                at => delaysOf(sentAt, at),
                (error: Error) => error,
              ),
            ),
          )
          const overlaid = ((await debugCache(hub)).podOverlay?.pods ?? []).length
          const answered = [...answers].map(([a, n]) => `${a} × ${n}`).join('; ')
          return watches.map((w, i) => {
            const [off, on] = [measured[i], baseline[i]]
            if (off instanceof Error) return naRow(base(w.format), 'lower', target, `failed: ${off.message}; kubelet's patches answered: ${answered}`)
            return figureRow(
              {
                ...base(w.format),
                note:
                  `offline: ${spread(off)} from each PATCH pods/<name>/status sent (${counts.concurrency} in flight) to the first ${w.format} frame naming its new address; ` +
                  `baseline, online: ${spread(on)} from each of ${counts.pods} slice writes in the simulator (a burst, one endpoint each) to the frame through the hub; ` +
                  `${slices} slices (kube-proxy listed ${offline.items} offline), the hub restarted offline and served kube-proxy's list ${ms(listedMs)} after its spawn; ` +
                  `kubelet's patches answered: ${answered}; the overlay holds ${overlaid} pods`,
              },
              on.p99,
              off.p99,
              'lower',
              target,
              off.p99 <= targetMs,
            )
          })
        } finally {
          for (const w of watches) w.close()
        }
      } finally {
        await hub.stop()
        await sim.call('fault', { fault: 'none' })
      }
    })
  } finally {
    await sim.close()
  }
  return rows
}
