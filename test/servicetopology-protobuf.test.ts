// Service topology on protobuf bytes, through the filter chain as production builds it (a list, one
// object, one watch frame) and, object by object, through filterEndpointsRaw (the step it runs).
import t, { type Test } from 'tap'
import { pino } from 'pino'
import { fixtureBytes, recordedAnnotations, recordedContext, watchFrames } from './helpers/fixtures.ts'
import { type ServiceTopologyInput, filterEndpointsRaw } from '../filters/servicetopology-protobuf.ts'
import { FilterRegistry } from '../filters/registry.ts'
import type { ResponseFilter, TopologyProvider } from '../filters/registry.ts'
import { classify } from '../lib/api/requestinfo.ts'
import type { TopologyContext } from '../filters/topology.ts'
import { ProtobufError, assembleList, decodeUnknown, decodeWatchEvent, encodeUnknown, objectMeta, splitList } from '../lib/codec/protobuf.ts'
import { FieldReader, lenFieldSize, writeBytesField, writeStringField } from '../lib/codec/wire.ts'

const bytes = fixtureBytes

// --- the context: node kind-worker2 of pool shanghai, Services as recorded --------------------

const contextFor = (nodeName: string): TopologyContext => recordedContext(nodeName)

const annotationsAsRecorded = recordedAnnotations()

type Input = ServiceTopologyInput & {
  /** onInvalid's reports (filterEndpointsRaw called directly) */
  invalid: string[]
  /** what the chains made from this input logged (warn and above) */
  warnings: string[]
}

function inputWith(annotations: Map<string, string> | ((ns: string, svc: string) => string | undefined), nodeName = 'kind-worker2'): Input {
  const invalid: string[] = []
  return {
    invalid,
    warnings: [],
    topology: contextFor(nodeName),
    annotationOf: typeof annotations === 'function' ? annotations : (ns, svc) => annotations.get(`${ns}/${svc}`),
    onInvalid: (ns, svc, reason) => invalid.push(`${ns}/${svc}: ${reason}`),
  }
}
const recorded = () => inputWith(annotationsAsRecorded)

// --- the chain, as production builds it for kube-proxy ------------------------------------------

const slicesPath = '/apis/discovery.k8s.io/v1/endpointslices'
const watchPath = `${slicesPath}?watch=true`
const v1beta1Path = '/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/svc-ud1-abcde'
const endpointsPath = '/api/v1/namespaces/default/endpoints/svc-ud1'

/** The filters production runs for kube-proxy's GET of path, reading input's topology and annotations. */
function chainFor(input: Input, path = slicesPath): ResponseFilter {
  const provider: TopologyProvider = { known: true, nodePool: '', context: () => input.topology, annotationOf: (ns, svc) => input.annotationOf(ns, svc) }
  const log = pino({ level: 'warn' }, { write: (line: string) => void input.warnings.push(JSON.parse(line).msg) })
  const chain = new FilterRegistry(provider, { enabled: ['servicetopology'], components: { servicetopology: ['kube-proxy'] } }, log).forRequest(
    classify('GET', path, 'kube-proxy/v1.24.0'),
  )
  if (!chain) throw new Error(`no filter for ${path}`)
  return chain
}

// --- a protobuf field walker for the checks ----------------------------------------------------

interface Field {
  field: number
  /** the whole field: tag, length and payload */
  all: Buffer
  payload: Buffer
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = []
  const r = new FieldReader(buf)
  while (r.next()) out.push({ field: r.field, all: buf.subarray(r.tagStart, r.pos), payload: buf.subarray(r.start, r.end) })
  return out
}
const strings = (buf: Buffer, field: number): string[] =>
  fields(buf)
    .filter(f => f.field === field)
    .map(f => f.payload.toString())

function lenField(field: number, payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(lenFieldSize(field, payload.length))
  writeBytesField(out, 0, field, payload)
  return out
}

const frames = watchFrames

/** Endpoints (field 2) of an EndpointSlice message. */
const endpointCount = (raw: Buffer): number => fields(raw).filter(f => f.field === 2).length
/** How many endpoints went from input to output, item by item. */
const droppedBetween = (input: Buffer[], output: Buffer[]): number =>
  input.reduce((n, item) => n + endpointCount(item), 0) - output.reduce((n, item) => n + endpointCount(item), 0)

/**
 * The output slice equals the input slice with some Endpoint fields (2) taken out: every other field
 * byte-identical and in place, each kept Endpoint byte-identical to an input Endpoint, in order.
 * Returns the addresses kept.
 */
function checkSlice(t: Test, input: Buffer, output: Buffer): string[] {
  const inFields = fields(input)
  const outFields = fields(output)
  t.same(
    outFields.filter(f => f.field !== 2).map(f => f.all),
    inFields.filter(f => f.field !== 2).map(f => f.all),
    'metadata, ports, addressType byte-identical',
  )
  const inEndpoints = inFields.filter(f => f.field === 2)
  let next = 0
  for (const e of outFields.filter(f => f.field === 2)) {
    while (next < inEndpoints.length && !inEndpoints[next].all.equals(e.all)) next++
    t.ok(next < inEndpoints.length, 'kept endpoint byte-identical to an input endpoint, in order')
    next++
  }
  // the order of fields: the endpoints that stay sit where they were
  const order = (fs: Field[]) => fs.map(f => f.field).filter((f, i, a) => f !== 2 || a[i - 1] !== 2)
  t.same(
    order(outFields).filter(f => f !== 2),
    order(inFields).filter(f => f !== 2),
  )
  return outFields.filter(f => f.field === 2).flatMap(f => strings(f.payload, 1))
}

function sliceName(raw: Buffer): string {
  return objectMeta(raw).name
}

// --- lists -------------------------------------------------------------------------------------

t.test('list-endpointslices.pb', async t => {
  const body = bytes('list-endpointslices.pb')
  const input = recorded()
  const out = chainFor(input).body('protobuf', body)!
  t.not(out, body, 'changed')
  t.same(input.warnings, [], 'nothing reported')

  const before = decodeUnknown(body)
  const after = decodeUnknown(out)
  t.equal(after.apiVersion, 'discovery.k8s.io/v1')
  t.equal(after.kind, 'EndpointSliceList')
  t.same(
    fields(out.subarray(4))
      .filter(f => f.field !== 2)
      .map(f => f.all),
    fields(body.subarray(4))
      .filter(f => f.field !== 2)
      .map(f => f.all),
    'Unknown envelope fields other than raw byte-identical',
  )
  t.same(
    fields(after.raw)
      .filter(f => f.field !== 2)
      .map(f => f.all),
    fields(before.raw)
      .filter(f => f.field !== 2)
      .map(f => f.all),
    'ListMeta byte-identical',
  )
  const inList = splitList(before.raw)
  const outList = splitList(after.raw)
  t.equal(outList.resourceVersion, inList.resourceVersion)
  t.equal(outList.items.length, inList.items.length, 'same number of items')
  t.equal(droppedBetween(inList.items, outList.items), 3, 'svc-ud1 drops 2, svc-host drops 1')
  // the envelope is exactly what the apiserver would write for these items
  t.ok(encodeUnknown({ apiVersion: after.apiVersion, kind: after.kind, raw: assembleList(outList) }).equals(out), 'lengths and envelope canonical')

  const kept = new Map<string, string[]>()
  for (let i = 0; i < inList.items.length; i++) {
    const name = sliceName(inList.items[i])
    t.equal(sliceName(outList.items[i]), name, 'items in order')
    t.same(objectMeta(outList.items[i]), objectMeta(inList.items[i]))
    kept.set(name, checkSlice(t, inList.items[i], outList.items[i]))
  }
  // kind-worker2, pool shanghai (kind-worker2, kind-worker3): what the recorded slices keep
  t.same(
    Object.fromEntries(kept),
    {
      kubernetes: ['192.0.2.2'],
      'svc-host-klmno': ['10.244.1.3'], // kubernetes.io/hostname: this node's one
      'svc-ud1-abcde': ['10.244.1.3', '10.244.3.2'], // openyurt.io/nodepool: kind-worker2's and kind-worker3's
      'svc-ud1-without-topology-fghij': ['10.244.2.3', '10.244.1.3'], // no annotation: all
    },
    'every slice, the addresses it keeps',
  )
  const index = (name: string) => inList.items.findIndex(i => sliceName(i) === name)
  t.ok(outList.items[index('kubernetes')].equals(inList.items[index('kubernetes')]), 'kubernetes slice byte-identical')
  t.ok(outList.items[index('svc-ud1-without-topology-fghij')].equals(inList.items[index('svc-ud1-without-topology-fghij')]))
})

t.test('filterEndpointsRaw on list items', async t => {
  const items = splitList(decodeUnknown(bytes('list-endpointslices.pb')).raw).items
  const input = recorded()
  for (const item of items) {
    const r = filterEndpointsRaw('discovery.k8s.io/v1', 'EndpointSlice', item, input)
    if (sliceName(item) === 'svc-ud1-abcde') {
      t.ok(r.changed)
      t.equal(r.dropped, 2)
      t.same(checkSlice(t, item, r.raw), ['10.244.1.3', '10.244.3.2'])
    } else if (sliceName(item) === 'svc-host-klmno') {
      t.equal(r.dropped, 1)
      t.same(checkSlice(t, item, r.raw), ['10.244.1.3'])
    } else {
      t.equal(r.raw, item, `${sliceName(item)}: the same Buffer`)
      t.notOk(r.changed)
    }
  }
  // other kinds, other versions: the same Buffer
  const pod = decodeUnknown(bytes('list-pods-kind-worker2.pb'))
  for (const [apiVersion, kind] of [
    ['v1', 'Pod'],
    ['discovery.k8s.io/v2', 'EndpointSlice'],
    ['v2', 'Endpoints'],
  ]) {
    const r = filterEndpointsRaw(apiVersion, kind, items[1], input)
    t.equal(r.raw, items[1])
    t.same([r.changed, r.dropped], [false, 0])
  }
  t.equal(filterEndpointsRaw('v1', 'PodList', pod.raw, input).raw, pod.raw)
})

t.test('a single key with no match: the slice stays, with no endpoints', async t => {
  const body = bytes('list-endpointslices.pb')
  // kind-control-plane hosts none of the endpoints; its pool beijing has none either
  const input = inputWith(
    new Map([
      ['default/svc-ud1', 'kubernetes.io/hostname'],
      ['default/svc-host', 'openyurt.io/nodepool'],
    ]),
    'kind-control-plane',
  )
  const out = chainFor(input).body('protobuf', body)!
  const inItems = splitList(decodeUnknown(body).raw).items
  const outItems = splitList(decodeUnknown(out).raw).items
  t.equal(droppedBetween(inItems, outItems), 6)
  t.equal(outItems.length, 4)
  for (let i = 0; i < inItems.length; i++) {
    const name = sliceName(inItems[i])
    if (name === 'svc-ud1-abcde' || name === 'svc-host-klmno') {
      t.equal(fields(outItems[i]).filter(f => f.field === 2).length, 0, `${name}: field 2 absent`)
      t.same(
        fields(outItems[i]).map(f => f.all),
        fields(inItems[i])
          .filter(f => f.field !== 2)
          .map(f => f.all),
        `${name}: everything else identical`,
      )
    } else t.ok(outItems[i].equals(inItems[i]))
  }
})

t.test('unchanged input: the same Buffer', async t => {
  // Services without the annotation
  const none = inputWith(new Map())
  for (const [name, path] of [
    ['list-endpointslices.pb', slicesPath],
    ['get-endpointslice-v1beta1.pb', v1beta1Path],
    ['get-endpoints-svc-ud1.pb', endpointsPath],
  ]) {
    const body = bytes(name)
    t.equal(chainFor(none, path).body('protobuf', body), body, `${name}: the same Buffer`)
  }
  // other kinds, annotated or not (as if the apiserver answered with them): not the filter's to touch
  const annotated = chainFor(inputWith(() => 'kubernetes.io/hostname'))
  for (const name of ['list-pods-kind-worker2.pb', 'list-services.pb', 'list-services.metadata.pb', 'get-lease-kind-worker2.pb', 'get-node-kind-worker2.pb']) {
    const body = bytes(name)
    t.equal(annotated.body('protobuf', body), body, `${name}: the same Buffer`)
  }
  // everything kept (the `*` key, or a pool holding every node): the same Buffer
  const list = bytes('list-endpointslices.pb')
  t.equal(chainFor(inputWith(() => '*')).body('protobuf', list), list)
  const body = bytes('get-endpoints-svc-ud1.pb')
  t.equal(
    chainFor(
      inputWith(() => 'kubernetes.io/hostname,*', 'kind-control-plane'),
      endpointsPath,
    ).body('protobuf', body),
    body,
  )
})

t.test('an invalid annotation: reported, the object unchanged', async t => {
  const body = bytes('list-endpointslices.pb')
  const input = inputWith(new Map([['default/svc-ud1', '*,kubernetes.io/hostname']]))
  t.equal(chainFor(input).body('protobuf', body), body)
  t.equal(input.warnings.length, 1, 'one warning')
  t.match(input.warnings[0], /^servicetopology: annotation of default\/svc-ud1 ignored: /)
})

// --- watch ---------------------------------------------------------------------------------------

t.test('watch-endpointslices.pb frames', async t => {
  const all = frames(bytes('watch-endpointslices.pb'))
  t.equal(all.length, 5)
  const input = recorded()
  const chain = chainFor(input, watchPath)
  const types: string[] = []
  for (const frame of all) {
    const event = decodeWatchEvent(frame)
    types.push(event.type)
    const out = chain.frame('protobuf', frame)!
    if (event.type === 'BOOKMARK') {
      t.equal(out, frame, 'BOOKMARK: the same Buffer')
      continue
    }
    const raw = decodeUnknown(event.object).raw
    const name = sliceName(raw)
    if (name !== 'svc-ud1-abcde') {
      // svc-ud1-zzzzz has its one endpoint on kind-worker2: kept
      t.equal(out, frame, `${event.type} ${name}: the same Buffer`)
      continue
    }
    t.not(out, frame, 'changed')
    t.equal(out.readUInt32BE(0), out.length - 4, 'length prefix')
    const after = decodeWatchEvent(out)
    t.equal(after.type, event.type)
    // the frame's own fields other than the object, and the envelope, as the apiserver would write them
    const rebuiltObject = decodeUnknown(after.object)
    t.equal(rebuiltObject.apiVersion, 'discovery.k8s.io/v1')
    t.equal(rebuiltObject.kind, 'EndpointSlice')
    t.ok(encodeUnknown(rebuiltObject).equals(after.object), 'Unknown envelope lengths')
    t.equal(endpointCount(raw) - endpointCount(rebuiltObject.raw), 1, 'one endpoint dropped')
    t.same(checkSlice(t, raw, rebuiltObject.raw), ['10.244.1.3', '10.244.3.2'], "kind-worker2's and kind-worker3's: pool shanghai")
  }
  t.same(types, ['MODIFIED', 'ADDED', 'DELETED', 'BOOKMARK', 'BOOKMARK'])
  // not at home anywhere: ADDED and DELETED lose their endpoint too
  const away = chainFor(inputWith(new Map([['default/svc-ud1', 'kubernetes.io/hostname']]), 'kind-worker3'), watchPath)
  for (const frame of [all[1], all[2]]) {
    const type = decodeWatchEvent(frame).type
    t.equal(endpointCount(decodeUnknown(decodeWatchEvent(frame).object).raw), 1, `${type} had one endpoint`)
    const out = away.frame('protobuf', frame)!
    t.equal(out.readUInt32BE(0), out.length - 4)
    t.equal(decodeWatchEvent(out).type, type)
    t.same(
      fields(decodeUnknown(decodeWatchEvent(out).object).raw).filter(f => f.field === 2),
      [],
      `${type} has none now`,
    )
  }
  t.equal(away.frame('protobuf', all[3]), all[3])
})

t.test('watch ERROR frames pass as they are', async t => {
  const frame = frames(bytes('watch-expired.pb'))[0]
  t.equal(decodeWatchEvent(frame).type, 'ERROR')
  t.equal(
    chainFor(
      inputWith(() => 'kubernetes.io/hostname'),
      watchPath,
    ).frame('protobuf', frame),
    frame,
  )
})

// --- v1beta1 slices and core Endpoints -----------------------------------------------------------

t.test('get-endpointslice-v1beta1.pb: the node from the topology map', async t => {
  const body = bytes('get-endpointslice-v1beta1.pb')
  // two endpoints, kind-worker's 10.244.2.3 and kind-worker2's 10.244.1.3, placed by the topology map
  const cases: [string, string[]][] = [
    ['openyurt.io/nodepool', ['10.244.1.3']], // kind-worker is in hangzhou
    ['kubernetes.io/hostname', ['10.244.1.3']],
    ['topology.kubernetes.io/zone', ['10.244.1.3']], // hangzhou-a, shanghai-a
    ['topology.kubernetes.io/region', ['10.244.2.3', '10.244.1.3']], // both east: both kept
  ]
  for (const [annotation, expected] of cases) {
    const input = inputWith(new Map([['default/svc-ud1', annotation]]))
    const out = chainFor(input, v1beta1Path).body('protobuf', body)!
    const before = decodeUnknown(body)
    const after = decodeUnknown(out)
    t.equal(after.apiVersion, 'discovery.k8s.io/v1beta1')
    t.ok(encodeUnknown(after).equals(out), 'envelope')
    t.same(checkSlice(t, before.raw, after.raw), expected, annotation)
    if (expected.length === 2) t.equal(out, body, `${annotation}: the same Buffer`)
    else t.equal(endpointCount(before.raw) - endpointCount(after.raw), 1, `${annotation}: one endpoint dropped`)
  }

  // nodeName (field 6), when present, wins over the topology map; the map's zone still counts
  const raw = decodeUnknown(body).raw
  const parts = fields(raw)
  const rewritten = Buffer.concat(
    parts.map(f => {
      if (f.field !== 2 || !strings(f.payload, 1).includes('10.244.2.3')) return f.all
      const nodeName = Buffer.allocUnsafe(lenFieldSize(6, 12))
      writeStringField(nodeName, 0, 6, 'kind-worker2', 12)
      return lenField(2, Buffer.concat([f.payload, nodeName]))
    }),
  )
  const input = inputWith(new Map([['default/svc-ud1', 'kubernetes.io/hostname']]))
  const r = filterEndpointsRaw('discovery.k8s.io/v1beta1', 'EndpointSlice', rewritten, input)
  t.notOk(r.changed, 'both endpoints now on kind-worker2')
  t.equal(r.raw, rewritten)
  // an empty nodeName counts as absent (as in the JSON filter): the map decides
  const emptyNode = Buffer.concat(parts.map(f => (f.field === 2 ? lenField(2, Buffer.concat([f.payload, Buffer.from([0x32, 0x00])])) : f.all)))
  const e = filterEndpointsRaw('discovery.k8s.io/v1beta1', 'EndpointSlice', emptyNode, input)
  t.same(checkSlice(t, emptyNode, e.raw), ['10.244.1.3'])
  // an unknown node: the endpoint's own zone (from the map) stands in for the zone label
  const zoneInput = inputWith(new Map([['default/svc-ud1', 'topology.kubernetes.io/zone']]))
  zoneInput.topology = { ...zoneInput.topology, nodeLabelsByName: new Map() }
  const z = filterEndpointsRaw('discovery.k8s.io/v1beta1', 'EndpointSlice', raw, zoneInput)
  t.same(checkSlice(t, raw, z.raw), ['10.244.1.3'])
})

/** The subsets of an Endpoints message: for each, ready and not-ready IPs and the ports' bytes. */
function subsetsOf(raw: Buffer) {
  return fields(raw)
    .filter(f => f.field === 2)
    .map(s => ({
      addresses: fields(s.payload)
        .filter(f => f.field === 1)
        .map(a => strings(a.payload, 1)[0]),
      notReady: fields(s.payload)
        .filter(f => f.field === 2)
        .map(a => strings(a.payload, 1)[0]),
      ports: fields(s.payload)
        .filter(f => f.field === 3)
        .map(f => f.all),
    }))
}

t.test('get-endpoints-svc-ud1.pb: ready and not-ready addresses, one decision', async t => {
  const body = bytes('get-endpoints-svc-ud1.pb')
  const before = decodeUnknown(body)
  const cases: [string, string, { addresses: string[]; notReady: string[] }[]][] = [
    ['openyurt.io/nodepool', 'kind-worker2', [{ addresses: ['10.244.1.3', '10.244.3.2'], notReady: [] }]],
    ['kubernetes.io/hostname', 'kind-worker2', [{ addresses: ['10.244.1.3'], notReady: [] }]],
    ['kubernetes.io/hostname', 'kind-worker', [{ addresses: ['10.244.2.3'], notReady: ['10.244.2.2'] }]],
    ['kubernetes.io/hostname', 'kind-control-plane', []],
  ]
  for (const [annotation, node, expected] of cases) {
    const input = inputWith(new Map([['default/svc-ud1', annotation]]), node)
    const out = chainFor(input, endpointsPath).body('protobuf', body)!
    const after = decodeUnknown(out)
    t.equal(after.kind, 'Endpoints')
    t.ok(encodeUnknown(after).equals(out), 'envelope')
    t.same(
      subsetsOf(after.raw).map(s => ({ addresses: s.addresses, notReady: s.notReady })),
      expected,
      `${annotation} on ${node}`,
    )
    const addressCount = (raw: Buffer) => subsetsOf(raw).reduce((n, s) => n + s.addresses.length + s.notReady.length, 0)
    t.equal(addressCount(before.raw), 4)
    t.equal(
      addressCount(after.raw),
      expected.reduce((n, s) => n + s.addresses.length + s.notReady.length, 0),
    )
    t.same(
      fields(after.raw)
        .filter(f => f.field !== 2)
        .map(f => f.all),
      fields(before.raw)
        .filter(f => f.field !== 2)
        .map(f => f.all),
      'metadata byte-identical',
    )
    for (const s of subsetsOf(after.raw)) t.same(s.ports, subsetsOf(before.raw)[0].ports, 'ports byte-identical')
    // every kept address is byte-identical to the input's
    const inAddresses = fields(fields(before.raw).find(f => f.field === 2)!.payload).map(f => f.all)
    for (const s of fields(after.raw).filter(f => f.field === 2)) {
      for (const a of fields(s.payload).filter(f => f.field !== 3)) t.ok(inAddresses.some(b => b.equals(a.all)))
    }
  }
})

t.test('Endpoints: a subset left empty goes, the others stay', async t => {
  const raw = decodeUnknown(bytes('get-endpoints-svc-ud1.pb')).raw
  const original = fields(raw).find(f => f.field === 2)!
  // a second subset: one address on kind-worker, then the ports of the first
  const address = Buffer.allocUnsafe(lenFieldSize(1, 8) + lenFieldSize(4, 11))
  writeStringField(address, writeStringField(address, 0, 1, '10.9.9.9', 8), 4, 'kind-worker', 11)
  const ports = fields(original.payload)
    .filter(f => f.field === 3)
    .map(f => f.all)
  const second = lenField(2, Buffer.concat([lenField(1, address), ...ports]))
  // a subset with ports only, as `kubectl apply` can store: not the filter's to drop
  const portsOnly = lenField(2, Buffer.concat(ports))
  const two = Buffer.concat([raw, second, portsOnly])
  t.same(
    subsetsOf(two).map(s => s.addresses),
    [['10.244.2.3', '10.244.1.3', '10.244.3.2'], ['10.9.9.9'], []],
  )

  const input = inputWith(new Map([['default/svc-ud1', 'openyurt.io/nodepool']]))
  const r = filterEndpointsRaw('v1', 'Endpoints', two, input)
  t.equal(r.dropped, 3)
  t.same(
    subsetsOf(r.raw).map(s => [s.addresses, s.notReady]),
    [
      [['10.244.1.3', '10.244.3.2'], []],
      [[], []],
    ],
    'the emptied subset goes',
  )
  t.ok(fields(r.raw).at(-1)!.all.equals(portsOnly), 'the subset that had no addresses stays')
  // on kind-worker the second subset is untouched (byte-identical) and the first keeps its kind-worker addresses
  const w = filterEndpointsRaw('v1', 'Endpoints', two, inputWith(new Map([['default/svc-ud1', 'kubernetes.io/hostname']]), 'kind-worker'))
  t.same(
    subsetsOf(w.raw).map(s => [s.addresses, s.notReady]),
    [
      [['10.244.2.3'], ['10.244.2.2']],
      [['10.9.9.9'], []],
      [[], []],
    ],
  )
  t.ok(fields(w.raw).at(-2)!.all.equals(second), 'untouched subset byte-identical')
})

// --- malformed input -----------------------------------------------------------------------------

t.test('malformed objects: filterEndpointsRaw throws a ProtobufError', async t => {
  const input = recorded()
  const item = splitList(decodeUnknown(bytes('list-endpointslices.pb')).raw).items.find(i => sliceName(i) === 'svc-ud1-abcde')!
  // an endpoint field with the wrong wire type
  const bad = Buffer.concat([item, Buffer.from([0x10, 0x01])])
  t.throws(() => filterEndpointsRaw('discovery.k8s.io/v1', 'EndpointSlice', bad, input), ProtobufError, 'field 2 as a varint')
  t.throws(() => filterEndpointsRaw('discovery.k8s.io/v1', 'EndpointSlice', Buffer.from([0x12, 0x7f, 0x0a]), recorded()), ProtobufError)
})

t.test('malformed input through the chain: never a throw or a hang; what it cannot read passes as it is', async t => {
  const input = recorded()
  const slices = chainFor(input)
  const watch = chainFor(input, watchPath)
  const notProtobuf = Buffer.from('{"kind":"EndpointSliceList"}')
  t.equal(slices.body('protobuf', notProtobuf), notProtobuf, 'not protobuf: the same Buffer')
  for (const frame of [Buffer.from([0, 0]), Buffer.from([0, 0, 0, 9, 1])])
    t.equal(watch.frame('protobuf', frame), frame, 'a frame shorter than its prefix says: the same Buffer')
  const body = bytes('list-endpointslices.pb')
  const truncated = body.subarray(0, body.length - 7)
  t.equal(slices.body('protobuf', truncated), truncated, 'truncated: the same Buffer')
  t.same(input.warnings, [], 'nothing reached the filter')

  // one malformed item among good ones: it passes as it is (reported), the others are filtered
  const list = splitList(decodeUnknown(body).raw)
  const badAt = list.items.findIndex(i => sliceName(i) === 'svc-ud1-abcde')
  const bad = Buffer.concat([list.items[badAt], Buffer.from([0x10, 0x01])])
  const withBad = encodeUnknown({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSliceList',
    raw: assembleList({ ...list, items: list.items.map((item, i) => (i === badAt ? bad : item)) }),
  })
  const out = splitList(decodeUnknown(slices.body('protobuf', withBad)!).raw).items
  t.ok(out[badAt].equals(bad), 'the malformed item byte-identical')
  t.same(
    checkSlice(
      t,
      list.items[list.items.findIndex(i => sliceName(i) === 'svc-host-klmno')],
      out.find(i => sliceName(i) === 'svc-host-klmno')!,
    ),
    ['10.244.1.3'],
    'svc-host filtered',
  )
  t.equal(input.warnings.length, 1)
  t.match(input.warnings[0], /^servicetopology: an object passed unfiltered: /)

  // every truncation and many corruptions of every fixture: some bytes, never a throw; what it
  // filtered, it leaves as it is when filtered again
  const sources: [string, Buffer, 'body' | 'frame', string][] = [
    ['list-endpointslices.pb', body, 'body', slicesPath],
    ['get-endpoints-svc-ud1.pb', bytes('get-endpoints-svc-ud1.pb'), 'body', endpointsPath],
    ['get-endpointslice-v1beta1.pb', bytes('get-endpointslice-v1beta1.pb'), 'body', v1beta1Path],
    ...frames(bytes('watch-endpointslices.pb')).map((f, i): [string, Buffer, 'frame', string] => [`frame ${i}`, f, 'frame', watchPath]),
  ]
  let seed = 12345
  const random = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32
  let asItIs = 0
  let filtered = 0
  for (const [name, src, shape, path] of sources) {
    const chain = chainFor(input, path)
    const run = (b: Buffer) => (shape === 'body' ? chain.body('protobuf', b) : chain.frame('protobuf', b))
    const check = (b: Buffer, what: string) => {
      let out: Buffer | null
      try {
        out = run(b)
      } catch (error) {
        t.fail(`${what}: ${String(error)}`)
        return
      }
      if (!Buffer.isBuffer(out)) t.fail(`${what}: ${String(out)}`)
      else if (out === b) asItIs++
      else {
        filtered++
        if (run(out) !== out) t.fail(`${what}: its result changed again when filtered again`)
      }
    }
    for (let n = 0; n < src.length; n += 3) {
      let b = src.subarray(0, n)
      if (shape === 'frame' && n >= 4) {
        b = Buffer.from(b)
        b.writeUInt32BE(n - 4, 0)
      }
      check(b, `${name} cut at ${n}`)
    }
    for (let i = 0; i < 400; i++) {
      const b = Buffer.from(src)
      for (let k = 1 + Math.floor(random() * 3); k > 0; k--) b[4 + Math.floor(random() * (b.length - 4))] = Math.floor(random() * 256)
      check(b, `${name} corrupted`)
    }
  }
  t.ok(asItIs > 100, `${asItIs} damaged inputs passed as they are`)
  t.ok(filtered > 100, `${filtered} filtered, each the same Buffer when filtered again`)
})
