// forwardkubesvctraffic: the default/kubernetes EndpointSlice gets the hub as its one endpoint and
// its "https" port, when its address family is the hub's; in JSON and on the apiserver's protobuf.
import t from 'tap'
import { forwardKubeSvcTrafficFilter as filter, hubAddressType, kubeSliceDecision } from '../filters/forwardkubesvctraffic.ts'
import { ProtobufError } from '../lib/codec/wire.ts'
import { decodeUnknown } from '../lib/codec/protobuf.ts'
import { decodeObject, encodeObject } from '../lib/codec/typed.ts'
import { messageField, stringField, varintField } from '../filters/protobuf-edit.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'
import { type Json, checkCase, recordedListOfOne, clone, context, diffPaths, fieldBytes, fuzzJson, fuzzProtobuf } from './helpers/object-filters.ts'

const v1 = 'discovery.k8s.io/v1'
const hub = { host: '169.254.2.1', port: 10268 }
const list = fixtureJson('list-endpointslices.json')
const recorded: Json[] = list.items.map((s: Json) => ({ kind: 'EndpointSlice', apiVersion: v1, ...s }))
const kubernetes = recorded.find(s => s.metadata.name === 'kubernetes')
const slice = (over: Json): Json => ({ ...clone(kubernetes), ...clone(over) })
const forwarded = (s: Json, portIndex: number | null = 0, h = hub): Json => {
  s.endpoints = [{ addresses: [h.host], conditions: { ready: true } }]
  if (portIndex !== null) s.ports[portIndex].port = h.port
  return s
}
const v6 = context({ hub: { host: 'fd00::10', port: 443 } })

t.test('hubAddressType and kubeSliceDecision', async t => {
  t.equal(hubAddressType('169.254.2.1'), 'IPv4')
  t.equal(hubAddressType('fd00::10'), 'IPv6')
  t.equal(hubAddressType('::ffff:10.0.0.1'), 'IPv6')
  for (const h of ['hub.local', '', '10.0.0.256', '[fd00::1]', ' 10.0.0.1']) t.equal(hubAddressType(h), undefined, h)
  t.same(kubeSliceDecision('IPv4', '10.0.0.1'), { forward: true })
  t.same(kubeSliceDecision('IPv6', 'fd00::1'), { forward: true })
  t.match(kubeSliceDecision('IPv6', '10.0.0.1'), { forward: false, reason: /\(IPv6\) is not the hub host's \(IPv4/ })
  t.match(kubeSliceDecision('FQDN', '10.0.0.1'), { forward: false })
  t.match(kubeSliceDecision('IPv4', 'hub.local'), { forward: false, reason: /not an IP address/ })
})

t.test('cases, JSON and protobuf', async t => {
  const https = { name: 'https', protocol: 'TCP', port: 6443 }
  const cases: [string, Json, Parameters<typeof checkCase>[4], ReturnType<typeof context>?, string[]?][] = [
    ['the recorded default/kubernetes', kubernetes, s => forwarded(s), undefined, ['endpoints', 'ports.0.port']],
    ['another slice', recorded.find(s => s.metadata.name !== 'kubernetes'), 'same'],
    ['named kubernetes in another namespace', slice({ metadata: { name: 'kubernetes', namespace: 'kube-system' } }), 'same'],
    [
      'three apiservers become the hub',
      slice({ endpoints: ['192.0.2.2', '192.0.2.3', '192.0.2.4'].map(a => ({ addresses: [a], conditions: { ready: true, serving: true } })) }),
      s => forwarded(s),
    ],
    [
      'an endpoint with everything is replaced',
      slice({
        endpoints: [
          { addresses: ['192.0.2.2'], conditions: { ready: false }, hostname: 'm', nodeName: 'cp', zone: 'z', targetRef: { kind: 'Pod', name: 'p' } },
        ],
      }),
      s => forwarded(s),
    ],
    ['no endpoints: one inserted', slice({ endpoints: [] }), s => forwarded(s)],
    [
      'the first https port only',
      slice({ ports: [{ name: 'metrics', protocol: 'TCP', port: 9090 }, https, { ...https, protocol: 'UDP' }] }),
      s => forwarded(s, 1),
    ],
    ['a port without a number gets one', slice({ ports: [{ name: 'https', protocol: 'TCP' }] }), s => forwarded(s)],
    ['no https port: endpoints only', slice({ ports: [{ name: 'api', protocol: 'TCP', port: 6443 }] }), s => forwarded(s, null)],
    ['already the hub', forwarded(clone(kubernetes)), 'same'],
    [
      'IPv6 slice, IPv6 hub',
      slice({ addressType: 'IPv6', endpoints: [{ addresses: ['fd00::2'], conditions: { ready: true } }] }),
      s => forwarded(s, 0, v6.hub),
      v6,
    ],
  ]
  for (const [name, object, expect, ctx, changed] of cases) t.test(name, async t => checkCase(t, filter, v1, object, expect, ctx, changed))

  t.test('discovery.k8s.io/v1beta1 too', async t => {
    const beta = {
      ...clone(kubernetes),
      apiVersion: 'discovery.k8s.io/v1beta1',
      endpoints: [{ addresses: ['192.0.2.2'], conditions: { ready: true }, topology: { 'kubernetes.io/hostname': 'cp' } }],
    }
    checkCase(t, filter, 'discovery.k8s.io/v1beta1', beta, s => forwarded(s))
  })
})

t.test('another family: left, and said', async t => {
  const cases: [string, Json, ReturnType<typeof context>, RegExp][] = [
    ['IPv4 slice, IPv6 hub', kubernetes, context({ hub: { host: 'fd00::10', port: 443 } }), /\(IPv4\) is not the hub host's \(IPv6/],
    ['IPv6 slice, IPv4 hub', slice({ addressType: 'IPv6' }), context(), /\(IPv6\) is not the hub host's \(IPv4/],
    ['FQDN slice', slice({ addressType: 'FQDN' }), context(), /\(FQDN\)/],
    ['no addressType', slice({ addressType: '' }), context(), /\(\)/],
    ['a hub host that is a name', kubernetes, context({ hub: { host: 'hub.local', port: 443 } }), /not an IP address/],
    ['an unusable hub', kubernetes, context({ hub: { host: hub.host, port: -1 } }), /not usable/],
  ]
  for (const [name, object, ctx, reason] of cases) {
    t.test(name, async t => {
      checkCase(t, filter, v1, object, 'same', ctx)
      t.ok(ctx.warnings.length > 0 && ctx.warnings.every(w => reason.test(w) && w.startsWith('forwardkubesvctraffic: ')), ctx.warnings[0])
    })
  }
  const ctx = context({ hub: { host: 'fd00::10', port: 443 } })
  checkCase(
    t,
    filter,
    v1,
    recorded.find(s => s.metadata.name !== 'kubernetes'),
    'same',
    ctx,
  )
  t.same(ctx.warnings, [], 'nothing said of other slices')
})

t.test('the recorded protobuf list, item by item', async t => {
  const list = fixtureBytes('list-endpointslices.pb')
  t.equal(decodeUnknown(list).apiVersion, v1)
  const { raw, out } = recordedListOfOne(t, filter, list, recorded, v1, 'EndpointSlice', 'kubernetes')
  t.same(diffPaths(decodeObject(raw, v1, 'EndpointSlice'), decodeObject(out, v1, 'EndpointSlice')), ['endpoints.0.addresses.0', 'ports.0.port'])
  const [inTop, outTop] = [fieldBytes(raw), fieldBytes(out)]
  t.same(
    outTop.map(f => f.field),
    inTop.map(f => f.field),
    'fields in the same order',
  )
  t.same(
    outTop.filter(f => f.field === 1 || f.field === 4).map(f => f.bytes),
    inTop.filter(f => f.field === 1 || f.field === 4).map(f => f.bytes),
    'metadata and addressType byte for byte',
  )
  const port = (fs: typeof inTop) =>
    fieldBytes(fs.find(f => f.field === 3)!.payload)
      .filter(f => f.field !== 3)
      .map(f => f.bytes)
  t.same(port(outTop), port(inTop), 'the port but its number byte for byte')
})

t.test('malformed protobuf on the path', async t => {
  const meta = messageField(1, stringField(1, 'kubernetes'), stringField(3, 'default'))
  const ipv4 = stringField(4, 'IPv4')
  t.throws(() => filter.protobuf(Buffer.concat([meta, varintField(4, 1)]), 'EndpointSlice', context()), ProtobufError, 'addressType not a string')
  t.throws(() => filter.protobuf(Buffer.concat([meta, ipv4, varintField(3, 1)]), 'EndpointSlice', context()), ProtobufError, 'a port not a message')
  t.throws(
    () => filter.protobuf(Buffer.concat([meta, ipv4, messageField(3, varintField(1, 1))]), 'EndpointSlice', context()),
    ProtobufError,
    'a port name not a string',
  )
  const bare = Buffer.concat([meta, ipv4])
  t.same(
    decodeObject(filter.protobuf(bare, 'EndpointSlice', context())!, v1, 'EndpointSlice'),
    {
      kind: 'EndpointSlice',
      apiVersion: v1,
      metadata: { name: 'kubernetes', namespace: 'default', creationTimestamp: null },
      addressType: 'IPv4',
      endpoints: [{ addresses: [hub.host], conditions: { ready: true } }],
      ports: null,
    },
    'no endpoints nor ports: the endpoint inserted in field order',
  )
  t.equal(filter.protobuf(bare, 'Endpoints', context()), bare, 'another kind')
})

t.test('fuzz', async t => {
  fuzzJson(t, filter, [kubernetes, slice({ ports: [https(1), https(2)] })], [context(), v6, context({ hub: { host: '', port: 0 } })])
  fuzzProtobuf(
    t,
    filter,
    'EndpointSlice',
    [encodeObject(kubernetes, v1, 'EndpointSlice'), encodeObject(slice({ addressType: 'IPv6' }), v1, 'EndpointSlice')],
    context(),
  )
})

function https(port: number): Json {
  return { name: 'https', port }
}
