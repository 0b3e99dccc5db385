// /debug/topology's per-key view, as a table over plain data: the same decision the filters make.
import t from 'tap'
import { sliceOf, topologyReport } from '../lib/topology/report.ts'
import { decodeList } from '../lib/cache/decode.ts'
import { fixtureBytes } from './helpers/fixtures.ts'
import type { TopologyContext } from '../filters/topology.ts'

const context: TopologyContext = {
  nodeName: 'n1',
  nodeLabels: { 'topology.kubernetes.io/zone': 'z1' },
  poolNodes: new Set(['n1', 'n2']),
  nodeLabelsByName: new Map([
    ['n1', { 'topology.kubernetes.io/zone': 'z1' }],
    ['n2', { 'topology.kubernetes.io/zone': 'z2' }],
    ['n3', { 'topology.kubernetes.io/zone': 'z1' }],
  ]),
}
const places = [{ nodeName: 'n1' }, { nodeName: 'n2' }, { nodeName: 'n3' }, { zone: 'z1' }, {}]

const cases: { name: string; annotation: string; applied?: string; keeps?: Record<string, string[]>; invalid?: RegExp }[] = [
  { name: 'hostname', annotation: 'kubernetes.io/hostname', applied: 'kubernetes.io/hostname', keeps: { 'kubernetes.io/hostname': ['n1'] } },
  { name: 'pool', annotation: 'openyurt.io/nodepool', applied: 'openyurt.io/nodepool', keeps: { 'openyurt.io/nodepool': ['n1', 'n2'] } },
  {
    name: 'zone label: nodes with this node’s zone, and an endpoint whose own zone matches',
    annotation: 'topology.kubernetes.io/zone',
    applied: 'topology.kubernetes.io/zone',
    keeps: { 'topology.kubernetes.io/zone': ['n1', 'n3', 'zone z1'] },
  },
  {
    name: 'ordered keys: every key shown, the first that keeps anything applied',
    annotation: 'example.com/rack,kubernetes.io/hostname,*',
    applied: 'kubernetes.io/hostname',
    keeps: { 'example.com/rack': [], 'kubernetes.io/hostname': ['n1'], '*': ['n1', 'n2', 'n3', 'zone z1', 'unknown node'] },
  },
  { name: 'unusable annotation: why, and no keys', annotation: '*,kubernetes.io/hostname', invalid: /must be the last key/ },
]

for (const c of cases) {
  t.test(c.name, async t => {
    const report = topologyReport({ 'ns/svc': c.annotation }, [{ service: 'ns/svc', places }], context)['ns/svc']
    t.equal(report.endpoints, places.length)
    if (c.invalid) {
      t.match(report.invalid, c.invalid)
      t.same(report.keys, [])
      return
    }
    t.equal(report.applied, c.applied)
    t.same(Object.fromEntries(report.keys.map(k => [k.key, k.keeps])), c.keeps)
  })
}

t.test('a Service with no cached slices: zero endpoints, nothing kept', async t => {
  const report = topologyReport({ 'ns/other': 'kubernetes.io/hostname' }, [{ service: 'ns/svc', places }], context)['ns/other']
  t.same(report, {
    annotation: 'kubernetes.io/hostname',
    endpoints: 0,
    applied: 'kubernetes.io/hostname',
    keys: [{ key: 'kubernetes.io/hostname', keeps: [] }],
  })
})

t.test('a slice reads the same from protobuf and from JSON (the recorded list)', async t => {
  const fromProtobuf = decodeList('protobuf', fixtureBytes('list-endpointslices.pb')).items.map(sliceOf)
  const fromJson = decodeList('json', fixtureBytes('list-endpointslices.json')).items.map(sliceOf)
  t.ok(fromJson.length > 0 && fromJson.every(Boolean), 'every recorded slice has a Service and endpoints')
  t.same(fromProtobuf, fromJson)
})
