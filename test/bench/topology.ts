// The service-topology filter per watch frame, in-process (no network, no other process): frames
// through the splitter alone (baseline) against splitter + filter, for the same 100-endpoint slice
// in protobuf and JSON. A second table next to the side-by-side one: what the filter itself costs.
import { Readable } from 'node:stream'
import { pino } from 'pino'
import { ratioRow } from './report.ts'
import type { Row } from './report.ts'
import { WatchFrameSplitter } from '../../lib/api/frames.ts'
import { encodeUnknown, encodeWatchEvent } from '../../lib/codec/protobuf.ts'
import { lenFieldSize, writeLenHeader } from '../../lib/codec/wire.ts'
import { FilterRegistry } from '../../filters/registry.ts'
import type { TopologyProvider } from '../../filters/registry.ts'
import { classify } from '../../lib/api/requestinfo.ts'

const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'
const pools = ['shanghai', 'hangzhou', 'beijing']
const nodeName = (i: number) => `node-${i % 12}`

function endpoints(count: number, seed: number) {
  return Array.from({ length: count }, (_, i) => ({
    addresses: [`10.${seed % 250}.${Math.floor(i / 250)}.${i % 250}`],
    conditions: { ready: true },
    nodeName: nodeName(i),
    zone: `${pools[(i % 12) % 3]}-a`,
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

function field(n: number, payload: Buffer | string): Buffer {
  const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload
  const out = Buffer.alloc(lenFieldSize(n, bytes.length))
  bytes.copy(out, writeLenHeader(out, 0, n, bytes.length))
  return out
}

/** The same 100-endpoint slice as the apiserver would encode it (the fields the filter reads, and addresses). */
function protobufSliceFrame(): Buffer {
  const meta = Buffer.concat([
    field(1, 'watched'),
    field(3, 'bench'),
    field(6, '1000'),
    field(11, Buffer.concat([field(1, 'kubernetes.io/service-name'), field(2, 'svc')])),
  ])
  const eps = endpoints(100, 1).map(e => field(2, Buffer.concat([field(1, e.addresses[0]), field(6, e.nodeName), field(7, e.zone)])))
  const raw = Buffer.concat([field(1, meta), ...eps, field(4, 'IPv4')])
  return encodeWatchEvent('MODIFIED', encodeUnknown({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', raw }))
}

function jsonSliceFrame(): Buffer {
  const object = {
    ...slice('watched', 100, 1),
    metadata: { name: 'watched', namespace: 'bench', resourceVersion: '1000', labels: { 'kubernetes.io/service-name': 'svc' } },
  }
  return Buffer.from(JSON.stringify({ type: 'MODIFIED', object }) + '\n')
}

/** Frames per second through the splitter, and through the splitter plus `perFrame`. */
async function framesPerSecond(framing: 'json' | 'protobuf', frame: Buffer, count: number, perFrame?: (f: Buffer) => Buffer): Promise<number> {
  const stream = Readable.from(
    (function* () {
      const batch = Buffer.concat(Array.from({ length: 100 }, () => frame))
      for (let i = 0; i < count / 100; i++) yield batch
    })(),
  )
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
    nodePool: 'shanghai',
    context: () => ({ nodeName: nodeName(0), nodeLabels: nodeLabelsByName.get(nodeName(0))!, poolNodes, nodeLabelsByName }),
    annotationOf: () => 'openyurt.io/nodepool',
  }
}

export async function inProcessRows(frames: number): Promise<Row[]> {
  const rows: Row[] = []
  const registry = new FilterRegistry(
    benchProvider(),
    { enabled: ['servicetopology'], components: { servicetopology: ['kube-proxy'] } },
    pino({ level: 'silent' }),
  )
  const filter = registry.forRequest(classify('GET', '/apis/discovery.k8s.io/v1/endpointslices?watch=true', kubeProxy))!
  for (const [framing, frame] of [
    ['protobuf', protobufSliceFrame()],
    ['json', jsonSliceFrame()],
  ] as const) {
    await framesPerSecond(framing, frame, Math.min(frames, 2_000)) // warm-up
    rows.push(
      ratioRow(
        {
          id: `inprocess.${framing}`,
          name: `${framing} frames, 100-endpoint slice: split + filter vs split only`,
          unit: 'frames/s',
          baselineLabel: 'split only',
        },
        await framesPerSecond(framing, frame, frames),
        await framesPerSecond(framing, frame, frames, f => filter.frame(framing, f) ?? f),
        'higher',
      ),
    )
  }
  return rows
}
