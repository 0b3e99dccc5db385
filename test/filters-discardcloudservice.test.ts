// discardcloudservice: LoadBalancer Services annotated svc.openyurt.io/discard: "true" and the
// cloud-only kube-system/x-tunnel-server-internal-svc are dropped; in JSON and protobuf.
import t from 'tap'
import { discardCloudServiceFilter as filter, isCloudService } from '../filters/discardcloudservice.ts'
import { ProtobufError } from '../lib/codec/wire.ts'
import { decodeUnknown, splitList } from '../lib/codec/protobuf.ts'
import { encodeObject } from '../lib/codec/typed.ts'
import { messageField, stringField, varintField } from '../filters/protobuf-edit.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'
import { type Json, checkCase, clone, context, fuzzJson, fuzzProtobuf } from './helpers/object-filters.ts'

const recorded: Json[] = fixtureJson('list-services.json').items.map((s: Json) => ({ kind: 'Service', apiVersion: 'v1', ...s }))
const base = recorded.find(s => s.metadata.name === 'svc-ud1')
const annotation = 'svc.openyurt.io/discard'
function service(type: string, annotations?: Record<string, string>, ns = 'default', name = 'lb'): Json {
  const s = clone(base)
  s.metadata = { ...s.metadata, namespace: ns, name, annotations: { ...s.metadata.annotations, ...annotations } }
  s.spec.type = type
  if (type === 'LoadBalancer' || type === 'NodePort') s.spec.ports[0].nodePort = 30080
  if (type === 'LoadBalancer') s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.7' }] } }
  return s
}

t.test('isCloudService', async t => {
  const table: [string, string, string, string | undefined, boolean][] = [
    ['default', 'lb', 'LoadBalancer', 'true', true],
    ['default', 'lb', 'LoadBalancer', 'True', false],
    ['default', 'lb', 'LoadBalancer', 'false', false],
    ['default', 'lb', 'LoadBalancer', '', false],
    ['default', 'lb', 'LoadBalancer', undefined, false],
    ['default', 'lb', 'NodePort', 'true', false],
    ['default', 'lb', 'ClusterIP', 'true', false],
    ['default', 'lb', 'loadbalancer', 'true', false],
    ['kube-system', 'x-tunnel-server-internal-svc', 'ClusterIP', undefined, true],
    ['kube-system', 'x-tunnel-server-internal-svc', '', undefined, true],
    ['default', 'x-tunnel-server-internal-svc', 'ClusterIP', undefined, false],
    ['kube-system', 'x-tunnel-server-svc', 'NodePort', undefined, false],
  ]
  for (const [ns, name, type, discard, dropped] of table) t.equal(isCloudService(ns, name, type, discard), dropped, `${ns}/${name} ${type} ${discard}`)
})

t.test('cases, JSON and protobuf', async t => {
  const cases: [string, Json, 'same' | 'dropped'][] = [
    ['a LoadBalancer to discard', service('LoadBalancer', { [annotation]: 'true' }), 'dropped'],
    ['a LoadBalancer kept', service('LoadBalancer'), 'same'],
    ['a LoadBalancer annotated "false"', service('LoadBalancer', { [annotation]: 'false' }), 'same'],
    ['a NodePort annotated "true"', service('NodePort', { [annotation]: 'true' }), 'same'],
    ['a ClusterIP annotated "true"', service('ClusterIP', { [annotation]: 'true' }), 'same'],
    ['the tunnel server internal Service', service('ClusterIP', {}, 'kube-system', 'x-tunnel-server-internal-svc'), 'dropped'],
    ['its name in another namespace', service('ClusterIP', {}, 'default', 'x-tunnel-server-internal-svc'), 'same'],
    ...recorded.map((s): [string, Json, 'same'] => [`recorded ${s.metadata.name}`, s, 'same']),
  ]
  for (const [name, object, expect] of cases) t.test(name, async t => checkCase(t, filter, 'v1', object, expect))
})

t.test('the recorded protobuf list passes as it is', async t => {
  for (const raw of splitList(decodeUnknown(fixtureBytes('list-services.pb')).raw).items) t.equal(filter.protobuf(raw, 'Service', context()), raw)
})

t.test('protobuf details', async t => {
  const meta = messageField(1, stringField(1, 'lb'), stringField(3, 'default'), messageField(12, stringField(1, annotation), stringField(2, 'true')))
  const lb = messageField(2, stringField(4, 'LoadBalancer'))
  const dropped = Buffer.concat([meta, lb])
  t.equal(filter.protobuf(dropped, 'Service', context()), null)
  t.equal(filter.protobuf(dropped, 'Pod', context()), dropped, 'another kind passes')
  const merged = Buffer.concat([meta, messageField(2, stringField(4, 'ClusterIP')), messageField(2, stringField(3, '10.0.0.1')), lb])
  t.equal(filter.protobuf(merged, 'Service', context()), null, 'spec written in parts: the last type counts')
  const later = Buffer.concat([meta, lb, messageField(2, stringField(4, 'NodePort'))])
  t.equal(filter.protobuf(later, 'Service', context()), later)
  const overridden = Buffer.concat([meta, messageField(1, messageField(12, stringField(1, annotation), stringField(2, 'no'))), lb])
  t.equal(filter.protobuf(overridden, 'Service', context()), overridden, 'the last annotation value counts')
  t.throws(() => filter.protobuf(Buffer.concat([meta, varintField(2, 1)]), 'Service', context()), ProtobufError, 'spec not a message')
  t.throws(() => filter.protobuf(Buffer.concat([meta, messageField(2, varintField(4, 1))]), 'Service', context()), ProtobufError, 'type not a string')
  t.throws(() => filter.protobuf(Buffer.concat([varintField(1, 1), lb]), 'Service', context()), ProtobufError, 'metadata not a message')
})

t.test('fuzz', async t => {
  const objects = [service('LoadBalancer', { [annotation]: 'true' }), service('ClusterIP', {}, 'kube-system', 'x-tunnel-server-internal-svc')]
  fuzzJson(t, filter, objects, [context()])
  fuzzProtobuf(
    t,
    filter,
    'Service',
    objects.map(o => encodeObject(o, 'v1', 'Service')),
    context(),
  )
})
