// The localendpoints filter: the node's own endpoints as the EndpointSlice and Endpoints controllers
// would have written them had they seen the status kubelet wrote offline. One table of cases, run on
// decoded JSON, on JSON bytes and on protobuf (whose output must decode, and encode, as the JSON
// output does); then the real apiserver's protobuf bytes, where everything but the changed endpoint
// must survive byte for byte; then the byte check that spares most objects a parse (its cost per
// slice: the bench's in-process row inprocess.localendpoints.json-bytes).
import t from 'tap'
import type { Test } from 'tap'
import { localEndpointsJsonBytes, localEndpointsObject } from '../filters/localendpoints.ts'
import { localEndpointsProtobuf } from '../filters/localendpoints-protobuf.ts'
import { Patches, applyPatches, messageField, spansOf, stringField } from '../filters/protobuf-edit.ts'
import { decodeUnknown, splitList } from '../lib/codec/protobuf.ts'
import { decodeObject, encodeObject } from '../lib/codec/typed.ts'
import type { LocalEndpointsInput, LocalPod } from '../filters/local-pod.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'

type Json = Record<string, any>
type Seen = [string, string, string[]]

const node = 'edge-1'
const pod = (over: Partial<LocalPod> = {}): LocalPod => ({
  namespace: 'default',
  name: 'web-1',
  uid: 'u1',
  ips: ['10.0.0.9', 'fd00::9'],
  ready: true,
  serving: true,
  gone: false,
  terminating: false,
  ...over,
})

function inputOf(pods: LocalPod[], nodeName = node): { input: LocalEndpointsInput; seen: Seen[] } {
  const seen: Seen[] = []
  const input: LocalEndpointsInput = {
    nodeName,
    pods: new Map(pods.map(p => [`${p.namespace}/${p.name}`, p])),
    observed: (p, type, addresses) => seen.push([`${p.namespace}/${p.name}`, type, [...addresses]]),
  }
  return { input, seen }
}

const cond = (ready: boolean, serving = ready, terminating = false) => ({ ready, serving, terminating })
const ref = (over: Json = {}) => ({ kind: 'Pod', namespace: 'default', name: 'web-1', uid: 'u1', ...over })
const ep = (address: string, over: Json = {}): Json => ({ addresses: [address], conditions: cond(true), targetRef: ref(), nodeName: node, zone: 'z1', ...over })
const otherEp = ep('10.1.0.7', { targetRef: ref({ name: 'db-0', uid: 'u9' }), nodeName: 'edge-2' })
const meta = { name: 'web-abc', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } }
const slice = (endpoints: Json[], addressType = 'IPv4'): Json => ({
  kind: 'EndpointSlice',
  apiVersion: 'discovery.k8s.io/v1',
  metadata: meta,
  addressType,
  endpoints,
  ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
})
const topology = (host: string) => ({ 'kubernetes.io/hostname': host, 'topology.kubernetes.io/zone': 'z1' })
const betaEp = (address: string, host: string, over: Json = {}): Json => ({
  addresses: [address],
  conditions: { ready: true },
  targetRef: ref(),
  topology: topology(host),
  ...over,
})
const betaSlice = (endpoints: Json[]): Json => ({ ...slice(endpoints), apiVersion: 'discovery.k8s.io/v1beta1' })

const addr = (ip: string, over: Json = {}): Json => ({ ip, nodeName: node, targetRef: ref(), ...over })
const otherAddr = addr('10.1.0.7', { nodeName: 'edge-2', targetRef: ref({ name: 'db-0', uid: 'u9' }) })
const otherNotReady = addr('10.1.0.8', { nodeName: 'edge-2', targetRef: ref({ name: 'db-1', uid: 'u8' }) })
const ports = [{ name: 'http', port: 80, protocol: 'TCP' }]
const endpoints = (subsets?: Json[]): Json => ({
  kind: 'Endpoints',
  apiVersion: 'v1',
  metadata: { name: 'web', namespace: 'default' },
  ...(subsets ? { subsets } : {}),
})

const seen4 = (...addresses: string[]): Seen[] => [['default/web-1', 'IPv4', addresses]]
const seen6 = (...addresses: string[]): Seen[] => [['default/web-1', 'IPv6', addresses]]

interface Case {
  what: string
  pods?: LocalPod[]
  object: Json
  /** 'same': the very object comes back */
  want: Json | 'same'
  seen: Seen[]
}

const cases: Case[] = [
  { what: 'a new address', object: slice([ep('10.0.0.5'), otherEp]), want: slice([ep('10.0.0.9'), otherEp]), seen: seen4('10.0.0.5') },
  {
    what: 'dual-stack: the IPv6 slice takes the IPv6 address',
    object: slice([ep('fd00::5')], 'IPv6'),
    want: slice([ep('fd00::9')], 'IPv6'),
    seen: seen6('fd00::5'),
  },
  {
    what: 'dual-stack, IPv6 first: the IPv4 slice takes the IPv4 address',
    pods: [pod({ ips: ['fd00::9', '10.0.0.9'] })],
    object: slice([ep('10.0.0.5')]),
    want: slice([ep('10.0.0.9')]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'an unready pod: not ready, not serving',
    pods: [pod({ ready: false, serving: false })],
    object: slice([ep('10.0.0.9')]),
    want: slice([ep('10.0.0.9', { conditions: cond(false) })]),
    seen: seen4('10.0.0.9'),
  },
  {
    what: 'a terminating pod: terminating, still serving',
    pods: [pod({ ready: false, serving: true, terminating: true })],
    object: slice([ep('10.0.0.5')]),
    want: slice([ep('10.0.0.9', { conditions: cond(false, true, true) })]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'a gone pod: its endpoint goes',
    pods: [pod({ gone: true })],
    object: slice([ep('10.0.0.5'), otherEp]),
    want: slice([otherEp]),
    seen: seen4('10.0.0.5'),
  },
  { what: 'another uid: another pod of that name', object: slice([ep('10.0.0.5', { targetRef: ref({ uid: 'u0' }) })]), want: 'same', seen: [] },
  { what: 'a pod of another node', object: slice([ep('10.0.0.5', { nodeName: 'edge-2' })]), want: 'same', seen: [] },
  { what: 'a pod of the same name in another namespace', object: slice([ep('10.0.0.5', { targetRef: ref({ namespace: 'other' }) })]), want: 'same', seen: [] },
  { what: 'a targetRef of another kind', object: slice([ep('10.0.0.5', { targetRef: ref({ kind: 'Node' }) })]), want: 'same', seen: [] },
  {
    what: 'no node and no uid: still the pod',
    object: slice([{ addresses: ['10.0.0.5'], targetRef: { kind: 'Pod', namespace: 'default', name: 'web-1' } }]),
    want: slice([{ addresses: ['10.0.0.9'], conditions: cond(true), targetRef: { kind: 'Pod', namespace: 'default', name: 'web-1' } }]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'an FQDN slice is left alone',
    object: slice([ep('web-1.example.com')], 'FQDN'),
    want: 'same',
    seen: [['default/web-1', 'FQDN', ['web-1.example.com']]],
  },
  {
    what: 'no IP of the family: the endpoint goes',
    pods: [pod({ ips: ['10.0.0.9'] })],
    object: slice([ep('fd00::5')], 'IPv6'),
    want: slice([], 'IPv6'),
    seen: seen6('fd00::5'),
  },
  {
    what: 'v1beta1: the node in topology',
    object: betaSlice([betaEp('10.0.0.5', node), betaEp('10.1.0.7', 'edge-2', { targetRef: ref({ name: 'db-0' }) })]),
    want: betaSlice([betaEp('10.0.0.9', node, { conditions: cond(true) }), betaEp('10.1.0.7', 'edge-2', { targetRef: ref({ name: 'db-0' }) })]),
    seen: seen4('10.0.0.5'),
  },
  { what: 'v1beta1: topology names another node', object: betaSlice([betaEp('10.0.0.5', 'edge-2')]), want: 'same', seen: [] },
  { what: 'already as the pod is: the same object', object: slice([ep('10.0.0.9'), otherEp]), want: 'same', seen: seen4('10.0.0.9') },
  { what: 'no overlay: the same object', pods: [], object: slice([ep('10.0.0.5')]), want: 'same', seen: [] },
  { what: 'not an endpoints kind', object: { kind: 'Service', apiVersion: 'v1', metadata: { name: 'web-1', namespace: 'default' } }, want: 'same', seen: [] },
  // core v1 Endpoints
  {
    what: 'Endpoints: a new ip, still ready, in its place',
    object: endpoints([{ addresses: [addr('10.0.0.5'), otherAddr], ports }]),
    want: endpoints([{ addresses: [addr('10.0.0.9'), otherAddr], ports }]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'Endpoints: turns unready, moves to the end of notReadyAddresses',
    pods: [pod({ ready: false, serving: false })],
    object: endpoints([{ addresses: [addr('10.0.0.5'), otherAddr], notReadyAddresses: [otherNotReady], ports }]),
    want: endpoints([{ addresses: [otherAddr], notReadyAddresses: [otherNotReady, addr('10.0.0.9')], ports }]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'Endpoints: turns ready, moves to the end of addresses; the emptied list goes',
    object: endpoints([{ addresses: [otherAddr], notReadyAddresses: [addr('10.0.0.9')], ports }]),
    want: endpoints([{ addresses: [otherAddr, addr('10.0.0.9')], ports }]),
    seen: seen4('10.0.0.9'),
  },
  {
    what: 'Endpoints: turns ready in a subset with no ready list',
    object: endpoints([{ notReadyAddresses: [addr('10.0.0.5'), otherNotReady], ports }]),
    want: endpoints([{ addresses: [addr('10.0.0.9')], notReadyAddresses: [otherNotReady], ports }]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'Endpoints: gone; the emptied subset is dropped, the other kept',
    pods: [pod({ gone: true })],
    object: endpoints([
      { addresses: [addr('10.0.0.5')], ports },
      { addresses: [otherAddr], ports: [{ name: 'db', port: 5432, protocol: 'TCP' }] },
    ]),
    want: endpoints([{ addresses: [otherAddr], ports: [{ name: 'db', port: 5432, protocol: 'TCP' }] }]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'Endpoints: gone from the last subset: no subsets',
    pods: [pod({ gone: true })],
    object: endpoints([{ notReadyAddresses: [addr('10.0.0.5')], ports }]),
    want: endpoints(),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'Endpoints: terminating, left out (as the controller leaves out pods being deleted)',
    pods: [pod({ ready: false, serving: true, terminating: true })],
    object: endpoints([{ addresses: [addr('10.0.0.5'), otherAddr], ports }]),
    want: endpoints([{ addresses: [otherAddr], ports }]),
    seen: seen4('10.0.0.5'),
  },
  {
    what: 'Endpoints: the IPv6 address',
    object: endpoints([{ addresses: [addr('fd00::5')], ports }]),
    want: endpoints([{ addresses: [addr('fd00::9')], ports }]),
    seen: seen6('fd00::5'),
  },
  {
    what: 'Endpoints: no IP of the family',
    pods: [pod({ ips: ['10.0.0.9'] })],
    object: endpoints([{ addresses: [addr('fd00::5'), otherAddr], ports }]),
    want: endpoints([{ addresses: [otherAddr], ports }]),
    seen: seen6('fd00::5'),
  },
  {
    what: 'Endpoints: an address of another node',
    object: endpoints([{ addresses: [addr('10.0.0.5', { nodeName: 'edge-2' })], ports }]),
    want: 'same',
    seen: [],
  },
  {
    what: 'Endpoints: already as the pod is',
    object: endpoints([{ addresses: [addr('10.0.0.9'), otherAddr], notReadyAddresses: [otherNotReady], ports }]),
    want: 'same',
    seen: seen4('10.0.0.9'),
  },
]

const typeOf = (o: Json) => ({ apiVersion: o.apiVersion as string, kind: o.kind as string })

t.test('decoded JSON', async t => {
  for (const c of cases) {
    const { input, seen } = inputOf(c.pods ?? [pod()])
    const before = structuredClone(c.object)
    const out = localEndpointsObject(c.object, input)
    if (c.want === 'same') t.equal(out, c.object, `${c.what}: the same object`)
    else t.same(out, c.want, c.what)
    t.same(c.object, before, `${c.what}: the input is not mutated`)
    t.same(seen, c.seen, `${c.what}: the overlay is told what the object said`)
  }
})

t.test('JSON bytes: passed when no name is an overlaid pod, else parsed to the same result', async t => {
  for (const c of cases) {
    const { input } = inputOf(c.pods ?? [pod()])
    const raw = Buffer.from(JSON.stringify(c.object))
    const out = localEndpointsJsonBytes(raw, input)
    if (out !== undefined) {
      t.equal(out, raw, `${c.what}: passed as it is`)
      t.equal(c.want, 'same', `${c.what}: only an object the filter leaves alone is passed unparsed`)
      continue
    }
    const parsed = JSON.parse(raw.toString())
    const result = localEndpointsObject(parsed, input)
    t.same(result, c.want === 'same' ? c.object : c.want, c.what)
  }
  const { input } = inputOf([pod()])
  const cut = Buffer.from('{"kind":"EndpointSlice","endpoints":[{"targetRef":{"name" : "db-0"}')
  t.equal(localEndpointsJsonBytes(cut, input), cut, 'malformed bytes that name no overlaid pod are not read')
  t.equal(localEndpointsJsonBytes(Buffer.from('{"targetRef":{"name" :\n"web-1"}}'), input), undefined, 'spaces around the colon are seen through')
  t.equal(localEndpointsJsonBytes(Buffer.from('{"targetRef":{"name":"web\\u002d1"}}'), input), undefined, 'an escaped name may be one: parsed')
})

t.test('protobuf: decodes and encodes as the JSON output; unchanged is the same Buffer', async t => {
  for (const c of cases) {
    const { input, seen } = inputOf(c.pods ?? [pod()])
    const { apiVersion, kind } = typeOf(c.object)
    const raw = encodeObject(c.object, apiVersion, kind)
    const out = localEndpointsProtobuf(raw, apiVersion, kind, input)
    t.same(seen, c.seen, `${c.what}: the overlay is told the same`)
    if (c.want === 'same') {
      t.equal(out, raw, `${c.what}: the same Buffer`)
      continue
    }
    t.same(decodeObject(out, apiVersion, kind), decodeObject(encodeObject(c.want, apiVersion, kind), apiVersion, kind), c.what)
    t.ok(out.equals(encodeObject(c.want, apiVersion, kind)), `${c.what}: the bytes the apiserver would write`)
  }
  const { input } = inputOf([pod()])
  const name = Buffer.from([...input.pods.values()][0].name)
  const malformed = Buffer.concat([Buffer.from([0x12, 0x05, 0x0a]), name])
  t.throws(() => localEndpointsProtobuf(malformed, 'discovery.k8s.io/v1', 'EndpointSlice', input), { name: 'ProtobufError' }, 'malformed bytes that name a pod')
  const unnamed = Buffer.from([0x12, 0x05, 0x0a])
  t.equal(localEndpointsProtobuf(unnamed, 'discovery.k8s.io/v1', 'EndpointSlice', input), unnamed, 'bytes that name no overlaid pod pass unread')
})

/** Each field of a message, as its bytes (tag included). */
const fieldsOf = (buf: Buffer, start = 0, end = buf.length): Buffer[] => spansOf(buf, start, end).map(s => buf.subarray(s.tagStart, s.next))

/** Every field but those at `except` is byte-identical, in the same order. */
function sameBytesBut(t: Test, before: Buffer[], after: Buffer[], except: Set<number>, what: string): void {
  t.equal(after.length, before.length, `${what}: as many fields`)
  const differing = before.flatMap((b, i) => (except.has(i) || (after[i] && b.equals(after[i])) ? [] : [i]))
  t.same(differing, [], `${what}: every other field byte for byte`)
}

/** raw with a targetRef to default/<name> added at `path` ([field, occurrence] per level): the recorded objects name no pods. */
function withTargetRef(raw: Buffer, path: [number, number][], refField: number, name: string): Buffer {
  const targetRef = messageField(refField, stringField(1, 'Pod'), stringField(2, 'default'), stringField(3, name))
  const patch = (start: number, end: number, depth: number): Patches => {
    const p = new Patches(spansOf(raw, start, end))
    if (depth === path.length) {
      p.inserts.push({ field: refField, emit: edit => edit.literal(targetRef) })
      return p
    }
    const [field, occurrence] = path[depth]
    const at = p.spans.flatMap((s, i) => (s.field === field ? [i] : []))[occurrence]
    p.nest(raw, at, patch(p.spans[at].start, p.spans[at].end, depth + 1))
    return p
  }
  return applyPatches(raw, patch(0, raw.length, 0))
}

t.test('real apiserver bytes: only the changed endpoint differs', async t => {
  await t.test('EndpointSlice list (v1)', async t => {
    const list = decodeUnknown(fixtureBytes('list-endpointslices.pb'))
    const items = splitList(list.raw).items
    const jsonItems = fixtureJson('list-endpointslices.json').items
    const name = 'united-deployment1-hangzhou-fv6th-66ff6fd958-f2694'
    const { input, seen } = inputOf([pod({ name, uid: 'x', ips: ['10.244.2.9'] })], 'kind-worker')
    items.forEach((item, i) => {
      const out = localEndpointsProtobuf(item, 'discovery.k8s.io/v1', 'EndpointSlice', input)
      if (jsonItems[i].metadata.name !== 'svc-ud1-abcde') return t.equal(out, item, `${jsonItems[i].metadata.name}: the same Buffer`)
      const endpoint = spansOf(item).findIndex(s => s.field === 2) // the pod's endpoint is the first
      sameBytesBut(t, fieldsOf(item), fieldsOf(out), new Set([endpoint]), 'the slice')
      const e = spansOf(out)[endpoint]
      const o = spansOf(item)[endpoint]
      sameBytesBut(t, fieldsOf(item, o.start, o.end).slice(1), fieldsOf(out, e.start, e.end).slice(1), new Set(), 'the endpoint, addresses aside')
      const decoded: Json = decodeObject(out, 'discovery.k8s.io/v1', 'EndpointSlice', { typeMeta: false })
      t.same(decoded, localEndpointsObject(jsonItems[i], input, 'EndpointSlice'), 'decodes as the JSON filter writes the recorded JSON')
      t.same(decoded.endpoints[0].addresses, ['10.244.2.9'])
    })
    t.same(seen.length, 2, 'told once per reading of the pod, in either format')
  })

  await t.test('EndpointSlice v1beta1, the node in topology', async t => {
    const raw = decodeUnknown(fixtureBytes('get-endpointslice-v1beta1.pb')).raw
    const { input } = inputOf([pod({ ips: ['10.244.2.9'] })], 'kind-worker')
    t.equal(localEndpointsProtobuf(raw, 'discovery.k8s.io/v1beta1', 'EndpointSlice', input), raw, 'endpoints without targetRef are no pod of the overlay')
    const named = withTargetRef(raw, [[2, 0]], 4, 'web-1')
    const out = localEndpointsProtobuf(named, 'discovery.k8s.io/v1beta1', 'EndpointSlice', input)
    const endpoint = spansOf(named).findIndex(s => s.field === 2)
    sameBytesBut(t, fieldsOf(named), fieldsOf(out), new Set([endpoint]), 'the slice')
    const [o, e] = [spansOf(named)[endpoint], spansOf(out)[endpoint]]
    sameBytesBut(t, fieldsOf(named, o.start, o.end).slice(2), fieldsOf(out, e.start, e.end).slice(2), new Set(), 'the endpoint, addresses and conditions aside')
    const decoded: Json = decodeObject(out, 'discovery.k8s.io/v1beta1', 'EndpointSlice')
    t.same(decoded, localEndpointsObject(decodeObject(named, 'discovery.k8s.io/v1beta1', 'EndpointSlice'), input))
    t.same(decoded.endpoints[0].addresses, ['10.244.2.9'])
    t.same(decoded.endpoints[0].conditions, cond(true))
  })

  await t.test('Endpoints: a not-ready address turns ready', async t => {
    const raw = decodeUnknown(fixtureBytes('get-endpoints-svc-ud1.pb')).raw
    const { input } = inputOf([pod({ ips: ['10.244.2.9'] })], 'kind-worker')
    t.equal(localEndpointsProtobuf(raw, 'v1', 'Endpoints', input), raw, 'addresses without targetRef are no pod of the overlay')
    const firstNotReady: [number, number][] = [
      [2, 0],
      [2, 0],
    ]
    const named = withTargetRef(raw, firstNotReady, 2, 'web-1') // 10.244.2.2 on kind-worker
    const out = localEndpointsProtobuf(named, 'v1', 'Endpoints', input)
    const subsetOf = (b: Buffer) => spansOf(b).findIndex(s => s.field === 2)
    sameBytesBut(t, fieldsOf(named), fieldsOf(out), new Set([subsetOf(named)]), 'the object')
    const [s0, s1] = [spansOf(named)[subsetOf(named)], spansOf(out)[subsetOf(out)]]
    const [before, after] = [spansOf(named, s0.start, s0.end), spansOf(out, s1.start, s1.end)]
    t.same(
      before.map(s => s.field),
      [1, 1, 1, 2, 3],
      'recorded: three ready addresses, one not ready, the ports',
    )
    t.same(
      after.map(s => s.field),
      [1, 1, 1, 1, 3],
      'four ready addresses, the ports',
    )
    sameBytesBut(
      t,
      fieldsOf(named, s0.start, s0.end).filter((_, i) => i !== 3),
      fieldsOf(out, s1.start, s1.end).filter((_, i) => i !== 3),
      new Set(),
      'the subset, the moved address aside',
    )
    const [a0, a1] = [before[3], after[3]]
    t.same(fieldsOf(out, a1.start, a1.end)[0], stringField(1, '10.244.2.9'), 'the moved address has the new ip')
    t.same(fieldsOf(out, a1.start, a1.end).slice(1), fieldsOf(named, a0.start, a0.end).slice(1), 'and its other fields byte for byte')
    const decoded: Json = decodeObject(out, 'v1', 'Endpoints')
    t.same(decoded, localEndpointsObject(decodeObject(named, 'v1', 'Endpoints'), input), 'decodes as the JSON filter writes')
    t.same(
      decoded.subsets[0].addresses.map((a: Json) => a.ip),
      ['10.244.2.3', '10.244.1.3', '10.244.3.2', '10.244.2.9'],
    )
    t.notOk('notReadyAddresses' in decoded.subsets[0], 'the emptied list goes')
  })
})

t.test('the byte check: 10,000 slices of other nodes pass without a parse', async t => {
  const pods = Array.from({ length: 100 }, (_, i) => pod({ name: `local-${i}`, uid: `u${i}` }))
  const { input } = inputOf(pods)
  const slices = Array.from({ length: 10_000 }, (_, i) =>
    Buffer.from(
      JSON.stringify({
        ...slice([0, 1, 2, 3].map(n => ep(`10.${n}.${i >> 8}.${i & 255}`, { nodeName: `node-${n}`, targetRef: ref({ name: `app-${i}-${n}`, uid: `x${i}` }) }))),
        metadata: { ...meta, name: `app-${i}-abcde`, uid: `s${i}`, resourceVersion: `${i}` },
      }),
    ),
  )
  // what it costs per slice is the bench's in-process row (inprocess.localendpoints.json-bytes): here, that it parses nothing
  const parse = JSON.parse
  let parses = 0
  JSON.parse = ((...args: Parameters<typeof JSON.parse>) => {
    parses++
    return parse(...args)
  }) as typeof JSON.parse
  let passed = 0
  try {
    for (const raw of slices) if (localEndpointsJsonBytes(raw, input, 'EndpointSlice') === raw) passed++
  } finally {
    JSON.parse = parse
  }
  t.equal(passed, slices.length, 'every slice passes as it is')
  t.equal(parses, 0, 'and not one was parsed')
})
