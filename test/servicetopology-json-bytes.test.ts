// The service topology filter over an EndpointSlice's JSON bytes (filterSliceJsonBytes, what the
// chain runs on JSON) must decide exactly as the filter over the decoded object does: the same
// endpoints kept, every other byte the apiserver's, and the very same Buffer when nothing changes.
// Checked on the real apiserver's bytes (test/fixtures/apiserver-v1.24), from every node of every
// pool, under every kind of annotation, and on shapes the apiserver never writes.
import t from 'tap'
import type { Test } from 'tap'
import { elementRanges, memberRanges } from '../lib/codec/json-scan.ts'
import { filterEndpointsObject, filterSliceJsonBytes, type ServiceTopologyInput } from '../filters/servicetopology.ts'
import { fixtureBytes, fixtureJson, recordedAnnotations, recordedContext } from './helpers/fixtures.ts'
import { endpointSlice } from './bench/objects.ts'

type Json = any // eslint-disable-line @typescript-eslint/no-explicit-any

/** The items of a recorded JSON list, as the bytes the apiserver wrote for each. */
function itemBytes(name: string): Buffer[] {
  const body = fixtureBytes(name)
  return elementRanges(body, memberRanges(body, ['items']).get('items')!).map(r => body.subarray(r.start, r.end))
}

const nodes: string[] = fixtureJson('list-nodes.json').items.map((n: Json) => n.metadata.name)
const recorded = recordedAnnotations()
const annotations: [string, (ns: string, name: string) => string | undefined][] = [
  ['as recorded', (ns, name) => recorded.get(`${ns}/${name}`)],
  ['none', () => undefined],
  ['nodepool', () => 'openyurt.io/nodepool'],
  ['hostname', () => 'kubernetes.io/hostname'],
  ['zone, then anywhere', () => 'topology.kubernetes.io/zone,*'],
  ['a label no node has', () => 'example.com/nowhere'],
  ['invalid', () => 'a,,b'],
]

function agree(t: Test, raw: Buffer, input: ServiceTopologyInput, kind: 'EndpointSlice' | undefined, what: string): void {
  const object = JSON.parse(raw.toString())
  const expected = filterEndpointsObject(object, input, kind)
  const out = filterSliceJsonBytes(raw, input, kind)
  if (out === undefined) {
    t.fail(`${what}: bytes were not enough for a slice`)
    return
  }
  if (!expected.changed) {
    if (out !== raw) t.fail(`${what}: unchanged, but a new Buffer`)
    return
  }
  // the same decision; and every byte the filter did not drop is the apiserver's
  t.same(JSON.parse(out.toString()), expected.object, `${what}: same endpoints kept`)
  // outside the endpoints, the input's bytes; inside, the input's bytes of each endpoint kept
  const inRange = memberRanges(raw, ['endpoints']).get('endpoints')!
  const outRange = memberRanges(out, ['endpoints']).get('endpoints')!
  t.equal(out.subarray(0, outRange.start).toString(), raw.subarray(0, inRange.start).toString(), `${what}: bytes before the endpoints`)
  t.equal(out.subarray(outRange.end).toString(), raw.subarray(inRange.end).toString(), `${what}: bytes after the endpoints`)
  const kept = new Set((expected.object.endpoints as unknown[]).map(e => JSON.stringify(e)))
  const keptBytes = elementRanges(raw, inRange)
    .map(r => raw.subarray(r.start, r.end).toString())
    .filter(e => kept.has(JSON.stringify(JSON.parse(e))))
  t.same(
    elementRanges(out, outRange).map(r => out.subarray(r.start, r.end).toString()),
    keptBytes,
    `${what}: each endpoint kept byte for byte`,
  )
}

t.test('recorded slices, from every node, under every annotation', async t => {
  const slices = [...itemBytes('list-endpointslices.json'), fixtureBytes('get-endpointslice-v1beta1.json')]
  let checked = 0
  for (const node of nodes) {
    for (const [label, annotationOf] of annotations) {
      const input: ServiceTopologyInput = { topology: recordedContext(node), annotationOf }
      for (const raw of slices) {
        agree(t, raw, input, 'EndpointSlice', `${node}, ${label}`)
        checked++
      }
    }
  }
  t.ok(checked > 100, `${checked} decisions compared`)
})

t.test('a cluster of generated slices (10 endpoints over 30 nodes)', async t => {
  const topology = recordedContext(nodes[1])
  const input: ServiceTopologyInput = {
    topology: { ...topology, poolNodes: new Set(['node-0', 'node-3', 'node-6']) },
    annotationOf: () => 'openyurt.io/nodepool',
  }
  let changed = 0
  for (let i = 0; i < 300; i++) {
    const raw = Buffer.from(JSON.stringify(endpointSlice(i)))
    agree(t, raw, input, undefined, `slice ${i}`)
    if (filterSliceJsonBytes(raw, input) !== raw) changed++
  }
  t.ok(changed > 200, `${changed} of 300 trimmed`)
})

t.test('shapes the apiserver does not write: decided as the decoded filter decides', async t => {
  const input: ServiceTopologyInput = { topology: recordedContext('kind-worker2'), annotationOf: () => 'kubernetes.io/hostname' }
  const base = JSON.parse(
    itemBytes('list-endpointslices.json')
      .map(b => b.toString())
      .find(s => s.includes('kind-worker2'))!,
  )
  const shapes: [string, unknown][] = [
    ['pretty-printed', base],
    ['endpoints null', { ...base, endpoints: null }],
    ['endpoints not an array', { ...base, endpoints: 'x' }],
    ['an endpoint that is not an object', { ...base, endpoints: [7, ...base.endpoints] }],
    ['nodeName not a string', { ...base, endpoints: base.endpoints.map((e: Json) => ({ ...e, nodeName: 5 })) }],
    [
      'nodeName empty, hostname in topology',
      { ...base, endpoints: base.endpoints.map((e: Json) => ({ ...e, nodeName: '', topology: { 'kubernetes.io/hostname': e.nodeName } })) },
    ],
    ['metadata null', { ...base, metadata: null }],
    ['no service-name label', { ...base, metadata: { ...base.metadata, labels: {} } }],
    ['service-name label not a string', { ...base, metadata: { ...base.metadata, labels: { 'kubernetes.io/service-name': 5 } } }],
    ['labels not an object', { ...base, metadata: { ...base.metadata, labels: 'x' } }],
    ['namespace not a string', { ...base, metadata: { ...base.metadata, namespace: 7 } }],
    [
      'node names not ASCII, and one like another',
      { ...base, endpoints: base.endpoints.map((e: Json, i: number) => ({ ...e, nodeName: i % 2 ? 'kïnd-worker2' : 'kind-wrker22' })) },
    ],
    ['kind not a string', { ...base, kind: 3 }],
    ['apiVersion not a string', { ...base, kind: 'EndpointSlice', apiVersion: null }],
    ['another kind', { ...base, kind: 'ConfigMap', apiVersion: 'v1' }],
    ['an unknown version', { ...base, kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v2' }],
  ]
  for (const [what, object] of shapes) {
    const raw = Buffer.from(what === 'pretty-printed' ? JSON.stringify(object, null, 2) : JSON.stringify(object))
    const expected = filterEndpointsObject(JSON.parse(raw.toString()), input, 'EndpointSlice')
    const out = filterSliceJsonBytes(raw, input, 'EndpointSlice')
    if (expected.changed) t.same(JSON.parse(String(out)), expected.object, what)
    else t.equal(out, raw, `${what}: the same Buffer`)
  }
  // escaped member names and a repeated member: read as JSON.parse reads them
  const text = JSON.stringify(base)
  const escaped = Buffer.from(text.replaceAll('"nodeName"', '"node\\u004eame"'))
  t.same(
    JSON.parse(String(filterSliceJsonBytes(escaped, input, 'EndpointSlice'))),
    filterEndpointsObject(JSON.parse(escaped.toString()), input, 'EndpointSlice').object,
    'escaped member names',
  )
  const label = text.match(/"kubernetes.io\/service-name":"[^"]*"/)![0]
  for (const [what, changed] of [
    ['an escaped label name', text.replace(label, label.replace('io/', 'io\\/'))],
    ['a repeated service-name label: the last', text.replace(label, `${label},"kubernetes.io/service-name":null`)],
  ]) {
    const raw = Buffer.from(changed)
    const expected = filterEndpointsObject(JSON.parse(changed), input, 'EndpointSlice')
    t.same(
      JSON.parse(String(filterSliceJsonBytes(raw, input, 'EndpointSlice'))),
      expected.changed ? expected.object : JSON.parse(changed),
      `${what} (${expected.changed ? 'filtered' : 'as it is'})`,
    )
  }
  const repeated = Buffer.from(text.replace('"endpoints":', '"endpoints":[],"endpoints":'))
  t.same(
    JSON.parse(String(filterSliceJsonBytes(repeated, input, 'EndpointSlice'))),
    filterEndpointsObject(JSON.parse(repeated.toString()), input, 'EndpointSlice').object,
    'a repeated member: the last',
  )
})

t.test('core Endpoints are left to the decoded filter', async t => {
  const input: ServiceTopologyInput = { topology: recordedContext('kind-worker2'), annotationOf: () => 'kubernetes.io/hostname' }
  t.equal(filterSliceJsonBytes(fixtureBytes('get-endpoints-svc-ud1.json'), input), undefined)
  t.equal(filterSliceJsonBytes(Buffer.from(JSON.stringify({ metadata: { name: 'x', namespace: 'y' }, subsets: [] })), input, 'Endpoints'), undefined)
})

t.test('a Service without the annotation: its endpoints are not read', async t => {
  const asked: string[] = []
  const input: ServiceTopologyInput = { topology: recordedContext('kind-worker2'), annotationOf: (ns, name) => (asked.push(`${ns}/${name}`), undefined) }
  // a nodeName with an escape JSON has not (\q): reading it would throw, skipping it does not
  const raw = Buffer.from(
    '{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"a","namespace":"b","labels":{"kubernetes.io/service-name":"s"}},"endpoints":[{"nodeName":"kind-\\q"}]}',
  )
  t.equal(filterSliceJsonBytes(raw, input), raw)
  t.same(asked, ['b/s'])
  const annotated: ServiceTopologyInput = { ...input, annotationOf: () => 'kubernetes.io/hostname' }
  t.throws(() => filterSliceJsonBytes(raw, annotated), 'annotated: the endpoints are read (and this one cannot be)')
})
