// masterservice: Service default/kubernetes points at the hub (clusterIP, clusterIPs, the "https"
// port), in JSON and on the apiserver's protobuf bytes; everything else passes as it is.
import t from 'tap'
import { masterServiceFilter as filter } from '../filters/masterservice.ts'
import { ProtobufError } from '../lib/codec/wire.ts'
import { decodeObject, encodeObject } from '../lib/codec/typed.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'
import { type Json, checkCase, recordedListOfOne, clone, context, deepFreeze, diffPaths, fieldBytes, fuzzJson, fuzzProtobuf } from './helpers/object-filters.ts'
import { messageField, stringField, varintField } from '../filters/protobuf-edit.ts'

const recorded: Json[] = fixtureJson('list-services.json').items.map((s: Json) => ({ kind: 'Service', apiVersion: 'v1', ...s }))
const kubernetes = recorded.find(s => s.metadata.name === 'kubernetes')
const withSpec = (spec: Json, metadata: Json = kubernetes.metadata): Json => ({
  ...clone(kubernetes),
  metadata: clone(metadata),
  spec: { ...clone(kubernetes.spec), ...spec },
})
const hub = { host: '169.254.2.1', port: 10268 }
const pointed = (s: Json, portIndex: number | null = 0, h = hub): Json => {
  s.spec.clusterIP = h.host
  s.spec.clusterIPs = [h.host]
  if (portIndex !== null) s.spec.ports[portIndex].port = h.port
  return s
}

t.test('cases, JSON and protobuf', async t => {
  const cases: [string, Json, Parameters<typeof checkCase>[4], ReturnType<typeof context>?, string[]?][] = [
    ['the recorded default/kubernetes', kubernetes, s => pointed(s), undefined, ['spec.clusterIP', 'spec.clusterIPs', 'spec.ports.0.port']],
    ['kubernetes in another namespace', withSpec({}, { name: 'kubernetes', namespace: 'kube-system' }), 'same'],
    ['another Service of default', recorded.find(s => s.metadata.name === 'svc-ud1'), 'same'],
    ['no namespace', withSpec({}, { name: 'kubernetes' }), 'same'],
    [
      'the first port named https, only',
      withSpec({
        ports: [
          { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
          { name: 'https', protocol: 'TCP', port: 443, targetPort: 6443 },
          { name: 'https', protocol: 'UDP', port: 443, targetPort: 6443 },
        ],
      }),
      s => pointed(s, 1),
      undefined,
      ['spec.clusterIP', 'spec.clusterIPs', 'spec.ports.1.port'],
    ],
    ['no https port: addresses only', withSpec({ ports: [{ name: 'api', protocol: 'TCP', port: 443, targetPort: 6443 }] }), s => pointed(s, null)],
    ['dual-stack clusterIPs become one', withSpec({ clusterIPs: ['10.96.0.1', 'fd00::1'], ipFamilies: ['IPv4', 'IPv6'] }), s => pointed(s)],
    ['no clusterIPs: inserted in field order', withSpec({ clusterIPs: undefined }), s => pointed(s)],
    ['no clusterIP: inserted', withSpec({ clusterIP: undefined }), s => pointed(s)],
    ['no ports', withSpec({ ports: undefined }), s => pointed(s, null)],
    ['already pointing at the hub', pointed(clone(kubernetes)), 'same'],
    ['a hub on IPv6', kubernetes, s => pointed(s, 0, { host: 'fd00::10', port: 443 }), context({ hub: { host: 'fd00::10', port: 443 } })],
    ['a hub port beyond one varint byte', kubernetes, s => pointed(s, 0, { host: hub.host, port: 65535 }), context({ hub: { host: hub.host, port: 65535 } })],
  ]
  for (const [name, object, expect, ctx, changed] of cases) t.test(name, async t => checkCase(t, filter, 'v1', object, expect, ctx, changed))
})

t.test('an unusable hub address: unchanged, and said', async t => {
  for (const h of [{ host: '', port: 443 }, { host: 'x', port: 0 }, { host: 'x', port: 70000 }, { host: 'x', port: 1.5 }, null]) {
    const ctx = context({ hub: h as never })
    checkCase(t, filter, 'v1', kubernetes, 'same', ctx)
    t.match(ctx.warnings[0], /^masterservice: hub address .* is not usable/)
  }
  const ctx = context({ hub: { host: '', port: 443 } })
  checkCase(t, filter, 'v1', recorded[1], 'same', ctx)
  t.same(ctx.warnings, [], 'said only for the Service it would change')
})

t.test('other kinds pass', async t => {
  const raw = encodeObject(kubernetes, 'v1', 'Service')
  t.equal(filter.protobuf(raw, 'Endpoints', context()), raw)
  const frozen = deepFreeze(clone(kubernetes))
  t.not(filter.json(frozen, 'Endpoints', context()), frozen, 'its own kind (Service) wins over the hint')
  const endpoints = deepFreeze({ ...clone(kubernetes), kind: 'Endpoints' })
  t.equal(filter.json(endpoints, 'Service', context()), endpoints)
  const v2 = deepFreeze({ ...clone(kubernetes), apiVersion: 'v2' })
  t.equal(filter.json(v2, 'Service', context()), v2)
})

t.test('the recorded protobuf list, item by item', async t => {
  const { raw, out } = recordedListOfOne(t, filter, fixtureBytes('list-services.pb'), recorded, 'v1', 'Service', 'kubernetes')
  t.same(diffPaths(decodeObject(raw, 'v1', 'Service'), decodeObject(out, 'v1', 'Service')), ['spec.ports.0.port', 'spec.clusterIP', 'spec.clusterIPs.0'])
  const top = fieldBytes(raw)
  const outTop = fieldBytes(out)
  t.same(
    outTop.filter(f => f.field !== 2).map(f => f.bytes),
    top.filter(f => f.field !== 2).map(f => f.bytes),
    'metadata and status byte for byte',
  )
  const spec = fieldBytes(top.find(f => f.field === 2)!.payload)
  const outSpec = fieldBytes(outTop.find(f => f.field === 2)!.payload)
  t.same(
    outSpec.map(f => f.field),
    spec.map(f => f.field),
    'spec fields in the same order',
  )
  const kept = (fs: typeof spec) => fs.filter(f => ![1, 3, 18].includes(f.field)).map(f => f.bytes)
  t.same(kept(outSpec), kept(spec), 'every other spec field byte for byte')
  const port = fieldBytes(spec.find(f => f.field === 1)!.payload)
  const outPort = fieldBytes(outSpec.find(f => f.field === 1)!.payload)
  t.same(
    outPort.filter(f => f.field !== 3).map(f => f.bytes),
    port.filter(f => f.field !== 3).map(f => f.bytes),
    'the port but its number byte for byte',
  )
})

t.test('malformed protobuf on the path: ProtobufError', async t => {
  const meta = messageField(1, stringField(1, 'kubernetes'), stringField(3, 'default'))
  const spec = messageField(2, stringField(3, '10.96.0.1'))
  t.throws(() => filter.protobuf(Buffer.concat([meta, spec, spec]), 'Service', context()), ProtobufError, 'spec twice')
  t.throws(() => filter.protobuf(Buffer.concat([meta, varintField(2, 7)]), 'Service', context()), ProtobufError, 'spec not a message')
  t.throws(() => filter.protobuf(Buffer.concat([meta, messageField(2, varintField(1, 7))]), 'Service', context()), ProtobufError, 'a port not a message')
  t.throws(() => filter.protobuf(Buffer.concat([varintField(1, 1), spec]), 'Service', context()), ProtobufError, 'metadata not a message')
  const twice = Buffer.concat([meta, messageField(2, stringField(3, 'a'), stringField(3, 'b'))])
  const out = filter.protobuf(twice, 'Service', context())!
  t.same(decodeObject(out, 'v1', 'Service').spec, { clusterIP: hub.host, clusterIPs: [hub.host] }, 'a scalar written twice: one value left')
  t.equal(filter.protobuf(meta, 'Service', context()), meta, 'no spec: unchanged')
  const empty = Buffer.alloc(0)
  t.equal(filter.protobuf(empty, 'Service', context()), empty, 'empty: unchanged')
})

t.test('fuzz', async t => {
  const objects = [
    kubernetes,
    withSpec({
      ports: [
        { name: 'https', port: 1 },
        { name: 'https', port: 2 },
      ],
    }),
  ]
  fuzzJson(t, filter, objects, [context(), context({ hub: { host: '', port: 0 } })])
  fuzzProtobuf(t, filter, 'Service', [encodeObject(kubernetes, 'v1', 'Service'), fixtureBytes('list-services.pb').subarray(0, 300)], context())
})
