// The JSON service topology filter on what a real apiserver sent (test/fixtures/apiserver-v1.24), seen
// from kind-worker2 of pool shanghai (kind-worker2, kind-worker3), the Services' annotations as recorded.
import t from 'tap'
import { topologyAnnotation, type TopologyContext } from '../filters/topology.ts'
import { fixtureJson, recordedContext } from './helpers/fixtures.ts'
import { filterEndpointsObject, serviceOf, type ServiceTopologyInput } from '../filters/servicetopology.ts'

type Json = any // eslint-disable-line @typescript-eslint/no-explicit-any
const fixture = (name: string): Json => fixtureJson(name)

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v)
    for (const child of Object.values(v)) deepFreeze(child)
  }
  return v
}

const topology: TopologyContext = recordedContext('kind-worker2')

const services: { metadata: { namespace: string; name: string; annotations?: Record<string, string> } }[] = fixture('list-services.json').items
const recorded: ServiceTopologyInput['annotationOf'] = (ns, name) =>
  services.find(s => s.metadata.namespace === ns && s.metadata.name === name)?.metadata.annotations?.[topologyAnnotation]

function inputWith(annotationOf: ServiceTopologyInput['annotationOf']) {
  const invalid: [string, string, string][] = []
  const asked: string[] = []
  const input: ServiceTopologyInput = {
    topology,
    annotationOf: (ns, name) => (asked.push(`${ns}/${name}`), annotationOf(ns, name)),
    onInvalid: (ns, name, reason) => invalid.push([ns, name, reason]),
  }
  return { input, invalid, asked }
}

const slices: Json[] = deepFreeze(fixture('list-endpointslices.json').items)
const slice = (name: string) => slices.find(s => s.metadata.name === name)
const beta: Json = deepFreeze(fixture('get-endpointslice-v1beta1.json'))
const endpoints: Json = deepFreeze(fixture('get-endpoints-svc-ud1.json'))

const sliceIPs = (o: Json): string[] => (o.endpoints ?? []).flatMap((e: Json) => e.addresses)
const without = (o: Json, field: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== field))

t.test('serviceOf', async t => {
  t.equal(serviceOf('EndpointSlice', { name: 'svc-ud1-abcde', labels: { 'kubernetes.io/service-name': 'svc-ud1' } }), 'svc-ud1')
  t.equal(serviceOf('EndpointSlice', { name: 'svc-ud1-abcde' }), undefined, 'never guessed from the name')
  t.equal(serviceOf('EndpointSlice', { name: 'svc-ud1-abcde', labels: { 'kubernetes.io/service-name': '' } }), undefined)
  t.equal(serviceOf('Endpoints', { name: 'svc-ud1', labels: { 'kubernetes.io/service-name': 'other' } }), 'svc-ud1')
  t.equal(serviceOf('Endpoints', {}), undefined)
  t.equal(serviceOf('Pod', { name: 'svc-ud1' }), undefined)
})

t.test('the recorded v1 list, item by item (items carry no kind: the list names it)', async t => {
  const cases: [name: string, ips: string[], dropped: number][] = [
    ['svc-ud1-abcde', ['10.244.1.3', '10.244.3.2'], 2], // openyurt.io/nodepool: shanghai's nodes
    ['svc-host-klmno', ['10.244.1.3'], 1], // kubernetes.io/hostname
    ['svc-ud1-without-topology-fghij', ['10.244.2.3', '10.244.1.3'], 0], // no annotation
    ['kubernetes', ['192.0.2.2'], 0], // no annotation, endpoints without nodeName
  ]
  t.equal(slices.length, cases.length)
  for (const [name, ips, dropped] of cases) {
    const { input, invalid } = inputWith(recorded)
    const item = slice(name)
    const r = filterEndpointsObject(item, input, 'EndpointSlice')
    t.strictSame(sliceIPs(r.object), ips, name)
    t.equal(r.dropped, dropped, `${name}: dropped`)
    t.equal(r.changed, dropped > 0, `${name}: changed`)
    if (dropped === 0) t.equal(r.object, item, `${name}: the same object`)
    else {
      t.not(r.object, item)
      t.strictSame(without(r.object, 'endpoints'), without(item, 'endpoints'), `${name}: every other field as it was`)
      t.strictSame(Object.keys(r.object), Object.keys(item), `${name}: field order`)
      // the kept endpoints are the input's own, whole
      for (const e of r.object.endpoints) t.ok(item.endpoints.includes(e))
    }
    t.strictSame(invalid, [])
  }
  // without the hint an item is not known to be a slice, and passes
  const r = filterEndpointsObject(slice('svc-ud1-abcde'), inputWith(recorded).input)
  t.equal(r.object, slice('svc-ud1-abcde'))
  t.equal(r.changed, false)
})

t.test('a v1 slice with its own kind and apiVersion (get, watch)', async t => {
  const item = deepFreeze({ kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...slice('svc-ud1-abcde') })
  const r = filterEndpointsObject(item, inputWith(recorded).input)
  t.strictSame(sliceIPs(r.object), ['10.244.1.3', '10.244.3.2'])
  t.equal(r.dropped, 2)
  // the object's own kind wins over a wrong hint
  t.strictSame(sliceIPs(filterEndpointsObject(item, inputWith(recorded).input, 'Endpoints').object), ['10.244.1.3', '10.244.3.2'])
})

t.test('the v1beta1 slice: node and zone in topology', async t => {
  const r = filterEndpointsObject(beta, inputWith(recorded).input)
  t.strictSame(sliceIPs(r.object), ['10.244.1.3'])
  t.equal(r.changed, true)
  t.equal(r.dropped, 1)
  t.strictSame(r.object.endpoints, [beta.endpoints[1]])
  t.strictSame(without(r.object, 'endpoints'), without(beta, 'endpoints'))

  const host = filterEndpointsObject(beta, inputWith(() => 'kubernetes.io/hostname').input)
  t.strictSame(sliceIPs(host.object), ['10.244.1.3'])
  // the zone label reads topology["topology.kubernetes.io/zone"] when the node is unknown
  const unknownNodes: TopologyContext = { ...topology, nodeLabelsByName: new Map() }
  const zone = filterEndpointsObject(beta, { topology: unknownNodes, annotationOf: () => 'topology.kubernetes.io/zone' })
  t.strictSame(sliceIPs(zone.object), ['10.244.1.3'])
  const region = filterEndpointsObject(beta, inputWith(() => 'topology.kubernetes.io/region').input)
  t.equal(region.object, beta, 'both nodes are in region east')
})

t.test('core Endpoints: one decision over ready and not-ready addresses', async t => {
  const ips = (o: Json) => (o.subsets ?? []).map((s: Json) => [(s.addresses ?? []).map((a: Json) => a.ip), (s.notReadyAddresses ?? []).map((a: Json) => a.ip)])

  const { input, asked } = inputWith(recorded)
  const r = filterEndpointsObject(endpoints, input)
  t.strictSame(asked, ['default/svc-ud1'], 'the Service is the object itself')
  t.strictSame(ips(r.object), [[['10.244.1.3', '10.244.3.2'], []]])
  t.equal(r.dropped, 2)
  t.equal(r.changed, true)
  t.notOk('notReadyAddresses' in r.object.subsets[0], 'an emptied address list is omitted, as the apiserver does')
  t.strictSame(without(r.object.subsets[0], 'addresses'), without(without(endpoints.subsets[0], 'addresses'), 'notReadyAddresses'))
  t.strictSame(without(r.object, 'subsets'), without(endpoints, 'subsets'))

  const host = filterEndpointsObject(endpoints, inputWith(() => 'kubernetes.io/hostname').input)
  t.strictSame(ips(host.object), [[['10.244.1.3'], []]])
  t.equal(host.dropped, 3)

  // the not-ready address alone on its node: kept as not-ready, ready addresses dropped
  const onWorker = { ...topology, nodeName: 'kind-worker' }
  const worker = filterEndpointsObject(endpoints, { topology: onWorker, annotationOf: () => 'kubernetes.io/hostname' })
  t.strictSame(ips(worker.object), [[['10.244.2.3'], ['10.244.2.2']]])
  t.equal(worker.dropped, 2)

  // a list decides once over all subsets: hostname matches in the second subset, so the first empties
  const two = deepFreeze({
    ...endpoints,
    subsets: [
      { addresses: [{ ip: '10.0.0.1', nodeName: 'kind-worker' }], ports: [{ port: 1 }] },
      { notReadyAddresses: [{ ip: '10.0.0.2', nodeName: 'kind-worker2' }], ports: [{ port: 2 }] },
      { addresses: [{ ip: '10.0.0.3', nodeName: 'kind-worker3' }], ports: [{ port: 3 }] },
    ],
  })
  const ordered = filterEndpointsObject(two, inputWith(() => 'kubernetes.io/hostname,openyurt.io/nodepool,*').input)
  t.strictSame(ordered.object.subsets, [two.subsets[1]], 'emptied subsets are dropped, the kept one is the same object')
  t.equal(ordered.object.subsets[0], two.subsets[1])
  t.equal(ordered.dropped, 2)

  // nothing left: no subsets field at all
  const none = filterEndpointsObject(endpoints, inputWith(() => 'example.com/rack').input)
  t.equal(none.changed, true)
  t.equal(none.dropped, 4)
  t.notOk('subsets' in none.object)
  t.strictSame(none.object, without(endpoints, 'subsets'))

  // all kept: the same object
  const all = filterEndpointsObject(endpoints, inputWith(() => 'topology.kubernetes.io/region,*').input)
  t.equal(all.object, endpoints)
  t.equal(all.changed, false)
})

t.test('a single key with no match leaves a slice with no endpoints', async t => {
  const item = slice('svc-host-klmno')
  const r = filterEndpointsObject(item, inputWith(() => 'example.com/rack').input, 'EndpointSlice')
  t.strictSame(r.object.endpoints, [])
  t.equal(r.changed, true)
  t.equal(r.dropped, 2)
  t.strictSame(without(r.object, 'endpoints'), without(item, 'endpoints'))
})

t.test('an annotation that cannot be used: unchanged, onInvalid told why', async t => {
  for (const [annotation, reason] of [
    ['*,kubernetes.io/hostname', /"\*" must be the last key/],
    ['', /empty key/],
    ['Bad.Prefix/x', /not a label key/],
  ] as const) {
    const { input, invalid } = inputWith(() => annotation)
    const item = slice('svc-ud1-abcde')
    const r = filterEndpointsObject(item, input, 'EndpointSlice')
    t.equal(r.object, item)
    t.equal(r.changed, false)
    t.equal(invalid.length, 1)
    t.strictSame(invalid[0].slice(0, 2), ['default', 'svc-ud1'])
    t.match(invalid[0][2], reason)

    const e = filterEndpointsObject(endpoints, inputWith(() => annotation).input)
    t.equal(e.object, endpoints)
  }
  // without onInvalid, the same answer
  const r = filterEndpointsObject(beta, { topology, annotationOf: () => ',' })
  t.equal(r.object, beta)
})

t.test('unknown Service, or none: unchanged', async t => {
  const { input, asked } = inputWith(() => undefined)
  for (const item of slices) t.equal(filterEndpointsObject(item, input, 'EndpointSlice').object, item)
  t.equal(filterEndpointsObject(beta, input).object, beta)
  t.equal(filterEndpointsObject(endpoints, input).object, endpoints)
  t.equal(asked.length, slices.length + 2)

  // a slice without the service-name label is never matched by name
  const orphan = deepFreeze({ ...slice('svc-ud1-abcde'), metadata: { ...slice('svc-ud1-abcde').metadata, labels: {} } })
  const o = inputWith(recorded)
  t.equal(filterEndpointsObject(orphan, o.input, 'EndpointSlice').object, orphan)
  t.strictSame(o.asked, [])
})

t.test('anything else passes as it is', async t => {
  const { input, asked } = inputWith(() => 'kubernetes.io/hostname')
  const others: [Json, ('EndpointSlice' | 'Endpoints')?][] = [
    [fixture('get-notfound.json')],
    [fixture('get-notfound.json'), 'EndpointSlice'], // a Status has its own kind
    [fixture('get-secret.json')],
    [fixture('list-endpointslices.json')], // the list itself
    [{ ...beta, endpoints: null }],
    [without(beta, 'endpoints')],
    [{ ...endpoints, subsets: null }],
    [without(endpoints, 'subsets')],
    [{ ...endpoints, apiVersion: 'example.com/v1' }], // another group's Endpoints
    [{ ...beta, apiVersion: 'example.com/v1' }],
    [{ ...beta, kind: 'EndpointSliceList' }],
    [without(slice('svc-ud1-abcde'), 'metadata'), 'EndpointSlice'],
    [{ ...slice('svc-ud1-abcde'), metadata: without(slice('svc-ud1-abcde').metadata, 'namespace') }, 'EndpointSlice'],
    [null, 'EndpointSlice'],
    ['text', 'Endpoints'],
    [[slice('svc-ud1-abcde')], 'EndpointSlice'],
  ]
  for (const [object, kind] of others) {
    deepFreeze(object)
    const r = filterEndpointsObject(object, input, kind)
    t.equal(r.object, object)
    t.equal(r.changed, false)
    t.equal(r.dropped, 0)
  }
  t.strictSame(asked, [])

  // an empty slice has nothing to trim
  const empty = deepFreeze({ ...beta, endpoints: [] })
  t.equal(filterEndpointsObject(empty, input).object, empty)
})

t.test('odd endpoints: entries without a place are dropped by node keys, kept by the rest', async t => {
  const item = deepFreeze({
    ...slice('svc-ud1-abcde'),
    endpoints: [{ addresses: ['10.0.0.1'] }, null, { addresses: ['10.0.0.2'], nodeName: 'kind-worker2' }, { addresses: ['10.0.0.3'], nodeName: 7 }],
  })
  const r = filterEndpointsObject(item, inputWith(() => 'kubernetes.io/hostname').input, 'EndpointSlice')
  t.strictSame(r.object.endpoints, [item.endpoints[2]])
  t.equal(r.dropped, 3)
})
