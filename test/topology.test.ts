// decideTopology's table, in the manner of kube-proxy's CategorizeEndpoints tests: the recorded
// cluster's nodes (pools beijing, hangzhou, shanghai), seen from kind-worker2 of pool shanghai.
import t from 'tap'
import { decideTopology, nodePoolLabel, parseTopologyKeys, type EndpointPlace, type TopologyContext } from '../filters/topology.ts'
import { recordedContext } from './helpers/fixtures.ts'

const contextFor = recordedContext

const ctx = contextFor('kind-worker2')

// index: where
const E: EndpointPlace[] = [
  { nodeName: 'kind-control-plane', zone: 'beijing-a' }, // 0 pool beijing, region north
  { nodeName: 'kind-worker', zone: 'hangzhou-a' }, // 1 pool hangzhou, region east
  { nodeName: 'kind-worker2', zone: 'shanghai-a' }, // 2 this node
  { nodeName: 'kind-worker3', zone: 'shanghai-b' }, // 3 same pool, other zone, region east
  {}, // 4 no node, no zone
  { zone: 'shanghai-a' }, // 5 no node, this node's zone
  { nodeName: 'gone', zone: 'shanghai-a' }, // 6 a node the hub does not know, this node's zone
  { nodeName: 'gone', zone: 'hangzhou-a' }, // 7 a node the hub does not know, another zone
  { nodeName: 'kind-worker2' }, // 8 this node, no zone field
]
const only = (...idx: number[]) => E.map((_, i) => idx.includes(i))

t.test('single keys', async t => {
  const cases: [annotation: string, key: string, keep: boolean[]][] = [
    ['kubernetes.io/hostname', 'kubernetes.io/hostname', only(2, 8)],
    ['openyurt.io/nodepool', 'openyurt.io/nodepool', only(2, 3, 8)],
    ['kubernetes.io/zone', 'kubernetes.io/zone', only(2, 3, 8)],
    // Kubernetes' meaning: the node's zone label; an endpoint's own zone counts only when its node is unknown
    ['topology.kubernetes.io/zone', 'topology.kubernetes.io/zone', only(2, 5, 6, 8)],
    // no zone-like fallback for other labels
    ['topology.kubernetes.io/region', 'topology.kubernetes.io/region', only(1, 2, 3, 8)],
    // the pool label as a plain label key: same value on the endpoint's node
    [nodePoolLabel, nodePoolLabel, only(2, 3, 8)],
    ['*', '*', only(0, 1, 2, 3, 4, 5, 6, 7, 8)],
    // this node has no such label: nothing is "the same", no endpoints
    ['example.com/rack', 'example.com/rack', only()],
  ]
  for (const [annotation, key, keep] of cases) {
    t.strictSame(decideTopology(annotation, E, ctx), { kind: 'filter', key, keep }, annotation)
  }
})

t.test('an arbitrary node label key', async t => {
  const racks = contextFor('kind-worker2', {
    'kind-control-plane': { 'example.com/rack': 'r1' },
    'kind-worker': { 'example.com/rack': 'r2' },
    'kind-worker2': { 'example.com/rack': 'r2' },
    // kind-worker3 has no rack label
  })
  t.strictSame(decideTopology('example.com/rack', E, racks), { kind: 'filter', key: 'example.com/rack', keep: only(1, 2, 8) })
  // a label only the other nodes have
  const others = contextFor('kind-worker2', { 'kind-worker3': { 'example.com/rack': 'r1' } })
  t.strictSame(decideTopology('example.com/rack', E, others), { kind: 'filter', key: 'example.com/rack', keep: only() })
  // the zone fallback is for the zone label only
  const sel = [{ nodeName: 'gone', zone: 'r2' }]
  t.strictSame(decideTopology('example.com/rack', sel, racks), { kind: 'filter', key: 'example.com/rack', keep: [false] })
})

t.test('ordered lists: the first key that keeps an endpoint wins', async t => {
  const list = 'kubernetes.io/hostname,openyurt.io/nodepool,*'
  const pick = (...idx: number[]) => idx.map(i => E[i])
  const cases: [annotation: string, endpoints: EndpointPlace[], key: string, keep: boolean[]][] = [
    [list, E, 'kubernetes.io/hostname', only(2, 8)],
    [list, pick(0, 1, 3, 4), 'openyurt.io/nodepool', [false, false, true, false]],
    [list, pick(0, 1, 4), '*', [true, true, true]],
    // without '*': none matches, so none is kept; the decision names the last key
    ['kubernetes.io/hostname,openyurt.io/nodepool', pick(0, 1, 4), 'openyurt.io/nodepool', [false, false, false]],
    ['kubernetes.io/hostname,openyurt.io/nodepool', pick(0, 3), 'openyurt.io/nodepool', [false, true]],
    ['topology.kubernetes.io/zone,topology.kubernetes.io/region', pick(0, 1, 3), 'topology.kubernetes.io/region', [false, true, true]],
    ['topology.kubernetes.io/zone,topology.kubernetes.io/region', pick(0, 1, 5), 'topology.kubernetes.io/zone', [false, false, true]],
    // spaces around keys are tolerated
    [' kubernetes.io/hostname , * ', pick(0, 1), '*', [true, true]],
    // a key this node has no label for falls through to the next
    ['example.com/rack,openyurt.io/nodepool', pick(1, 3), 'openyurt.io/nodepool', [false, true]],
  ]
  for (const [annotation, endpoints, key, keep] of cases) {
    t.strictSame(decideTopology(annotation, endpoints, ctx), { kind: 'filter', key, keep }, `${annotation} over ${JSON.stringify(endpoints)}`)
  }
})

t.test('a single key with no match keeps nothing', async t => {
  const elsewhere = [E[0], E[1]]
  for (const key of ['kubernetes.io/hostname', 'openyurt.io/nodepool', 'kubernetes.io/zone', 'topology.kubernetes.io/zone']) {
    t.strictSame(decideTopology(key, elsewhere, ctx), { kind: 'filter', key, keep: [false, false] }, key)
  }
  t.strictSame(decideTopology('kubernetes.io/hostname', [], ctx), { kind: 'filter', key: 'kubernetes.io/hostname', keep: [] }, 'no endpoints at all')
})

t.test('endpoints without nodeName are dropped by the node and pool keys', async t => {
  const noNode: EndpointPlace[] = [{}, { zone: 'shanghai-a' }, { nodeName: 'kind-worker2' }]
  for (const key of ['kubernetes.io/hostname', 'openyurt.io/nodepool', 'kubernetes.io/zone']) {
    t.strictSame(decideTopology(key, noNode, ctx), { kind: 'filter', key, keep: [false, false, true] }, key)
  }
})

t.test('a node whose pool is unknown: the pool keys keep nothing', async t => {
  const lone: TopologyContext = { ...ctx, poolNodes: new Set() }
  t.strictSame(decideTopology('openyurt.io/nodepool', E, lone), { kind: 'filter', key: 'openyurt.io/nodepool', keep: only() })
  t.strictSame(decideTopology('openyurt.io/nodepool,*', E, lone).kind, 'filter')
})

t.test('no annotation, or one that cannot be used: unchanged, with the reason', async t => {
  t.strictSame(decideTopology(undefined, E, ctx), { kind: 'unchanged' })
  const cases: [annotation: string, reason: RegExp][] = [
    ['', /empty key/],
    [' ', /empty key/],
    [',', /empty key/],
    ['kubernetes.io/hostname,', /empty key/],
    ['kubernetes.io/hostname,,*', /empty key/],
    ['*,kubernetes.io/hostname', /"\*" must be the last key/],
    ['*,*', /"\*" must be the last key/],
    ['kubernetes.io/hostname,*,openyurt.io/nodepool', /"\*" must be the last key/],
    ['Example.COM/rack', /"Example.COM\/rack" is not a label key/],
    ['a/b/c', /not a label key/],
    ['kubernetes.io/', /not a label key/],
    ['/hostname', /not a label key/],
    ['-rack', /not a label key/],
    ['rack-', /not a label key/],
    ['x'.repeat(64), /not a label key/],
    ['kubernetes.io/hostname;openyurt.io/nodepool', /not a label key/],
    ['kubernetes.io/hostname,kubernetes.io/hostname', /a key repeats/],
    ['openyurt.io/nodepool, openyurt.io/nodepool ,*', /a key repeats/],
  ]
  for (const [annotation, reason] of cases) {
    const d = decideTopology(annotation, E, ctx)
    t.equal(d.kind, 'unchanged', JSON.stringify(annotation))
    t.match(d.kind === 'unchanged' ? d.invalid : undefined, reason, JSON.stringify(annotation))
  }
  // the longest name is fine; names may carry upper case, prefixes may not
  t.strictSame(parseTopologyKeys('x'.repeat(63)), ['x'.repeat(63)])
  t.strictSame(parseTopologyKeys('example.com/Rack_1.a'), ['example.com/Rack_1.a'])
})
