// nodeportisolation: NodePort and LoadBalancer Services annotated nodeport.openyurt.io/listen are
// dropped on nodes of the pools the annotation does not enable; in JSON and protobuf.
import t from 'tap'
import { nodePortIsolationFilter as filter, nodePortListenDecision, parseNodePortListen } from '../filters/nodeportisolation.ts'
import { ProtobufError } from '../lib/codec/wire.ts'
import { decodeUnknown, splitList } from '../lib/codec/protobuf.ts'
import { encodeObject } from '../lib/codec/typed.ts'
import { messageField, stringField, varintField } from '../filters/protobuf-edit.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'
import { type Json, checkCase, clone, context, fuzzJson, fuzzProtobuf } from './helpers/object-filters.ts'

const recorded: Json[] = fixtureJson('list-services.json').items.map((s: Json) => ({ kind: 'Service', apiVersion: 'v1', ...s }))
const base = recorded.find(s => s.metadata.name === 'svc-ud1')
const annotation = 'nodeport.openyurt.io/listen'
function service(type: string, listen?: string): Json {
  const s = clone(base)
  s.metadata = { ...s.metadata, name: 'np', annotations: listen === undefined ? s.metadata.annotations : { ...s.metadata.annotations, [annotation]: listen } }
  s.spec.type = type
  if (type === 'LoadBalancer' || type === 'NodePort') s.spec.ports[0].nodePort = 30080
  if (type === 'ExternalName') s.spec = { type, externalName: 'example.com' }
  return s
}

t.test('nodePortListenDecision', async t => {
  const table: [string, string, 'keep' | 'drop'][] = [
    ['shanghai', 'shanghai', 'keep'],
    ['beijing,shanghai', 'shanghai', 'keep'],
    ['-shanghai', 'shanghai', 'drop'],
    ['beijing', 'shanghai', 'drop'], // not configured: disabled
    ['*', 'shanghai', 'keep'],
    ['*,-shanghai', 'shanghai', 'drop'], // a named entry wins over *
    ['-shanghai,*', 'shanghai', 'drop'],
    ['*,-beijing', 'shanghai', 'keep'],
    ['-*', 'shanghai', 'drop'], // "-*" disables nothing and enables nothing
    ['', 'shanghai', 'drop'], // no entry at all
    [' , ,-', 'shanghai', 'drop'],
    [' shanghai ', 'shanghai', 'keep'],
    ['\tshanghai\n', 'shanghai', 'keep'],
    ['\u00a0shanghai\u3000', 'shanghai', 'keep'], // Go's TrimSpace trims Unicode spaces
    ['\ufeffshanghai', 'shanghai', 'drop'], // ... but not U+FEFF, which JavaScript's trim() would
    ['shanghai,-shanghai', 'shanghai', 'keep'], // of entries naming one pool the first counts
    ['-shanghai,shanghai', 'shanghai', 'drop'],
    ['--shanghai', 'shanghai', 'drop'],
    ['Shanghai', 'shanghai', 'drop'],
    ['- shanghai', 'shanghai', 'drop'],
    ['-beijing', '', 'keep'], // this node's pool unknown: as native Kubernetes
    ['', '', 'keep'],
  ]
  for (const [value, pool, want] of table) t.equal(nodePortListenDecision(value, pool), want, `${JSON.stringify(value)} in ${JSON.stringify(pool)}`)
  t.same([...parseNodePortListen(' a, -b ,,a,-a, *,-')], ['a', '-b', '*'])
})

t.test('cases, JSON and protobuf', async t => {
  const pools = (pool: string) => context({ nodePool: pool })
  const cases: [string, Json, 'same' | 'dropped', ReturnType<typeof context>?][] = [
    ['a NodePort not enabled here', service('NodePort', 'beijing'), 'dropped'],
    ['a LoadBalancer disabled here', service('LoadBalancer', '*,-shanghai'), 'dropped'],
    ['a NodePort enabled here', service('NodePort', 'shanghai'), 'same'],
    ['a LoadBalancer enabled by *', service('LoadBalancer', '*'), 'same'],
    ['an empty annotation: enabled nowhere', service('NodePort', ''), 'dropped'],
    ['no annotation', service('NodePort'), 'same'],
    ['a ClusterIP Service annotated', service('ClusterIP', 'beijing'), 'same'],
    ['an ExternalName Service annotated', service('ExternalName', 'beijing'), 'same'],
    ['a node of unknown pool', service('NodePort', 'beijing'), 'same', pools('')],
    ['a node of pool beijing', service('NodePort', 'beijing'), 'same', pools('beijing')],
    ['a node of pool hangzhou', service('LoadBalancer', 'beijing,-hangzhou,*'), 'dropped', pools('hangzhou')],
    ...recorded.map((s): [string, Json, 'same'] => [`recorded ${s.metadata.name}`, s, 'same']),
  ]
  for (const [name, object, expect, ctx] of cases) t.test(name, async t => checkCase(t, filter, 'v1', object, expect, ctx))
})

t.test('the recorded protobuf list passes as it is', async t => {
  for (const raw of splitList(decodeUnknown(fixtureBytes('list-services.pb')).raw).items) t.equal(filter.protobuf(raw, 'Service', context()), raw)
})

t.test('protobuf details', async t => {
  const meta = (value: string) => messageField(1, stringField(1, 'np'), messageField(12, stringField(1, annotation), stringField(2, value)))
  const np = messageField(2, stringField(4, 'NodePort'))
  const obj = Buffer.concat([meta('beijing'), np])
  t.equal(filter.protobuf(obj, 'Service', context()), null)
  t.equal(filter.protobuf(obj, 'ConfigMap', context()), obj, 'another kind passes')
  const merged = Buffer.concat([meta('beijing'), messageField(1, messageField(12, stringField(1, annotation), stringField(2, 'shanghai'))), np])
  t.equal(filter.protobuf(merged, 'Service', context()), merged, 'the last annotation value counts')
  t.throws(() => filter.protobuf(Buffer.concat([meta('x'), varintField(2, 1)]), 'Service', context()), ProtobufError, 'spec not a message')
  t.throws(() => filter.protobuf(Buffer.concat([messageField(1, varintField(12, 1)), np]), 'Service', context()), ProtobufError, 'an annotation not a message')
})

t.test('fuzz', async t => {
  const objects = [service('NodePort', 'beijing'), service('LoadBalancer', '*,-shanghai')]
  fuzzJson(t, filter, objects, [context(), context({ nodePool: '' }), context({ nodePool: 5 as never })])
  fuzzProtobuf(
    t,
    filter,
    'Service',
    objects.map(o => encodeObject(o, 'v1', 'Service')),
    context(),
  )
})
