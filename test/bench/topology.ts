// Service topology throughput, each figure against unfiltered pass-through in the same run:
// a JSON watch of 100-endpoint slices through the hub (kube-proxy vs another client), a list of
// 10,000 slices, and the protobuf and JSON frame paths in-process (the simulator speaks JSON only).
import { Readable } from 'node:stream'
import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { ApiServerSimulator } from '../simulator/index.ts'
import { listTime, startHubProcess, watchEventsPerSecond } from './common.ts'
import type { Row } from './common.ts'
import { WatchFrameSplitter } from '../../lib/frames.ts'
import { encodeUnknown, encodeWatchEvent } from '../../lib/codec/protobuf.ts'
import { lenFieldSize, writeLenHeader } from '../../lib/codec/wire.ts'
import { FilterRegistry } from '../../filters/registry.ts'
import type { TopologyProvider } from '../../filters/registry.ts'
import { classify } from '../../lib/requestinfo.ts'

const kubeProxy = { 'user-agent': 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc' }
const other = { 'user-agent': 'bench-client/v1' }
const pools = ['shanghai', 'hangzhou', 'beijing']
const nodeName = (i: number) => `node-${i % 12}`

function endpoints(count: number, seed: number) {
  return Array.from({ length: count }, (_, i) => ({
    addresses: [`10.${seed % 250}.${Math.floor(i / 250)}.${i % 250}`],
    conditions: { ready: true },
    nodeName: nodeName(i),
    zone: `${pools[i % 12 % 3]}-a`,
  }))
}

function slice(name: string, count: number, seed: number) {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'bench', labels: { 'kubernetes.io/service-name': 'svc' } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    endpoints: endpoints(count, seed),
  }
}

function seedCluster(simulator: ApiServerSimulator): void {
  simulator.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } })
  for (let i = 0; i < 12; i++) {
    simulator.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName(i), labels: { 'apps.openyurt.io/nodepool': pools[i % 3] } } })
  }
  simulator.create({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'svc', namespace: 'bench', annotations: { 'openyurt.io/topologyKeys': 'openyurt.io/nodepool' } },
    spec: { ports: [{ port: 80 }] },
  })
}

/** Events per second a watch of the bench namespace's slices delivers while one 100-endpoint slice is rewritten `count` times. */
function sliceWatchThroughput(simulator: ApiServerSimulator, base: string, headers: Record<string, string>, count: number): Promise<number> {
  return watchEventsPerSecond(simulator, `${base}/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices?watch=true`, headers, count, i => {
    const current = simulator.get('discovery.k8s.io/v1', 'EndpointSlice', 'bench', 'watched')
    simulator.update({ ...current, endpoints: endpoints(100, i + 1) }) // i + 1: an identical update would be a no-op, no event
  })
}

// ---- in-process frame paths ---------------------------------------------------------------------

function field(n: number, payload: Buffer | string): Buffer {
  const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload
  const out = Buffer.alloc(lenFieldSize(n, bytes.length))
  bytes.copy(out, writeLenHeader(out, 0, n, bytes.length))
  return out
}

/** The same 100-endpoint slice as the apiserver would encode it (the fields the filter reads, and addresses). */
function protobufSliceFrame(): Buffer {
  const meta = Buffer.concat([field(1, 'watched'), field(3, 'bench'), field(6, '1000'), field(11, Buffer.concat([field(1, 'kubernetes.io/service-name'), field(2, 'svc')]))])
  const eps = endpoints(100, 1).map(e => field(2, Buffer.concat([field(1, e.addresses[0]), field(6, e.nodeName), field(7, e.zone)])))
  const raw = Buffer.concat([field(1, meta), ...eps, field(4, 'IPv4')])
  return encodeWatchEvent('MODIFIED', encodeUnknown({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', raw }))
}

function jsonSliceFrame(): Buffer {
  const object = { ...slice('watched', 100, 1), metadata: { name: 'watched', namespace: 'bench', resourceVersion: '1000', labels: { 'kubernetes.io/service-name': 'svc' } } }
  return Buffer.from(JSON.stringify({ type: 'MODIFIED', object }) + '\n')
}

/** Frames per second through the splitter, and through the splitter plus `perFrame`. */
async function framesPerSecond(framing: 'json' | 'protobuf', frame: Buffer, count: number, perFrame?: (f: Buffer) => Buffer): Promise<number> {
  const stream = Readable.from((function* () {
    const batch = Buffer.concat(Array.from({ length: 100 }, () => frame))
    for (let i = 0; i < count / 100; i++) yield batch
  })())
  const start = performance.now()
  let bytes = 0
  for await (const f of stream.pipe(new WatchFrameSplitter(framing))) bytes += (perFrame ? perFrame(f as Buffer) : (f as Buffer)).length
  if (bytes === 0) throw new Error('no frames')
  return count / ((performance.now() - start) / 1000)
}

function benchProvider(): TopologyProvider {
  const nodeLabelsByName = new Map(Array.from({ length: 12 }, (_, i) => [nodeName(i), { 'apps.openyurt.io/nodepool': pools[i % 3] }]))
  const poolNodes = new Set([...nodeLabelsByName].filter(([, l]) => l['apps.openyurt.io/nodepool'] === 'shanghai').map(([n]) => n))
  return {
    known: true,
    context: () => ({ nodeName: nodeName(0), nodeLabels: nodeLabelsByName.get(nodeName(0))!, poolNodes, nodeLabelsByName }),
    annotationOf: () => 'openyurt.io/nodepool',
  }
}

export async function topologyRows(): Promise<Row[]> {
  const rows: Row[] = []
  const registry = new FilterRegistry(benchProvider(), ['kube-proxy'], pino({ level: 'silent' }))
  const filter = registry.forRequest(classify('GET', '/apis/discovery.k8s.io/v1/endpointslices?watch=true', kubeProxy['user-agent']))!
  for (const [framing, frame] of [['protobuf', protobufSliceFrame()], ['json', jsonSliceFrame()]] as const) {
    rows.push({
      name: `${framing} frames, 100-endpoint slice, in-process`,
      direct: await framesPerSecond(framing, frame, 20_000),
      hub: await framesPerSecond(framing, frame, 20_000, f => filter.frame(framing, f)),
      unit: 'frames/s',
      higherIsBetter: true,
    })
  }

  const simulator = await ApiServerSimulator.start()
  seedCluster(simulator)
  simulator.create(slice('watched', 100, 0))
  // kube-proxy is filtered but not cached here: the figures are the filter's, not the disk's
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-topology-'))
  const hub = await startHubProcess(['--server', simulator.url, '--cache-dir', cacheDir, '--cache-components', 'outpost', '--node-name', nodeName(0)])
  try {
    await new Promise(resolve => setTimeout(resolve, 500)) // the hub's Node and Service lists
    rows.push({
      name: 'JSON watch through the hub, 100-endpoint slices',
      direct: await sliceWatchThroughput(simulator, hub.url, other, 2_000),
      hub: await sliceWatchThroughput(simulator, hub.url, kubeProxy, 2_000),
      unit: 'events/s',
      higherIsBetter: true,
    })
    for (let i = 0; i < 10_000; i++) simulator.create(slice(`listed-${i}`, 10, i))
    const path = '/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices'
    rows.push({
      name: 'LIST 10,000 slices through the hub (median of 5)',
      direct: await listTime(hub.url, path, 5, other),
      hub: await listTime(hub.url, path, 5, kubeProxy),
      unit: 'ms',
      higherIsBetter: false,
    })
  } finally {
    await hub.stop()
    await simulator.close()
  }
  return rows
}
