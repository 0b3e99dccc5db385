// The localendpoints filter's byte check, in-process (no network, no other process): JSON slices of
// other nodes, none naming one of this node's 100 overlaid pods, through localEndpointsJsonBytes
// (each must pass as it is, unparsed) against a JSON.parse of the same bytes, what the check spares
// them. Its test (test/filters-localendpoints.test.ts) checks that nothing is parsed; the cost is here.
import { localEndpointsJsonBytes } from '../../filters/localendpoints.ts'
import type { LocalEndpointsInput, LocalPod } from '../../filters/local-pod.ts'
import { figureRow, thousands } from './report.ts'
import type { Row } from './report.ts'

/** what the filter's test held it to, once, on a loaded 2-core box */
const targetUs = 200

const localPod = (i: number): LocalPod => ({
  namespace: 'default',
  name: `local-${i}`,
  uid: `u${i}`,
  ips: ['10.0.0.9', 'fd00::9'],
  ready: true,
  serving: true,
  gone: false,
  terminating: false,
})

/** A slice of four endpoints on four other nodes, each naming a pod of its own. */
function otherNodesSlice(i: number): Buffer {
  const endpoints = [0, 1, 2, 3].map(n => ({
    addresses: [`10.${n}.${i >> 8}.${i & 255}`],
    conditions: { ready: true, serving: true, terminating: false },
    targetRef: { kind: 'Pod', namespace: 'default', name: `app-${i}-${n}`, uid: `x${i}` },
    nodeName: `node-${n}`,
    zone: 'z1',
  }))
  return Buffer.from(
    JSON.stringify({
      kind: 'EndpointSlice',
      apiVersion: 'discovery.k8s.io/v1',
      metadata: { name: `app-${i}-abcde`, namespace: 'default', uid: `s${i}`, resourceVersion: `${i}`, labels: { 'kubernetes.io/service-name': `app-${i}` } },
      addressType: 'IPv4',
      endpoints,
      ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
    }),
  )
}

/** µs per slice of `each` over every slice, after a warm-up pass (as a running hub is warm). */
function microsPerSlice(slices: Buffer[], each: (raw: Buffer) => unknown): number {
  for (const raw of slices) each(raw)
  const start = process.hrtime.bigint()
  for (const raw of slices) each(raw)
  return Number(process.hrtime.bigint() - start) / 1000 / slices.length
}

export function localEndpointsRows(count: number): Row[] {
  const pods = Array.from({ length: 100 }, (_, i) => localPod(i))
  const input: LocalEndpointsInput = { nodeName: 'edge-1', pods: new Map(pods.map(p => [`${p.namespace}/${p.name}`, p])) }
  const slices = Array.from({ length: count }, (_, i) => otherNodesSlice(i))
  let passed = 0
  const checked = microsPerSlice(slices, raw => {
    if (localEndpointsJsonBytes(raw, input, 'EndpointSlice') === raw) passed++
  })
  if (passed !== 2 * count) throw new Error(`the byte check passed ${passed} of ${2 * count} slices as they are: it would parse the others`)
  const parsed = microsPerSlice(slices, raw => JSON.parse(raw.toString()))
  return [
    figureRow(
      {
        id: 'inprocess.localendpoints.json-bytes',
        name: `localendpoints byte check, JSON slices of other nodes (100 overlaid pods): unparsed vs JSON.parse`,
        unit: 'µs/slice',
        baselineLabel: 'JSON.parse',
        note: `${thousands(count)} slices of ${slices[0].length} bytes, each passed as it is (no parse); the baseline is the parse the check spares each`,
      },
      parsed,
      checked,
      'lower',
      `≤ ${targetUs} µs`,
      checked <= targetUs,
    ),
  ]
}
