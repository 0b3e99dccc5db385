// serviceenvupdater: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT set in a pod's containers get
// the hub's host and port, in JSON and on the apiserver's protobuf bytes.
import t from 'tap'
import { serviceEnvUpdaterFilter as filter, serviceEnvValue } from '../filters/serviceenvupdater.ts'
import { ProtobufError } from '../lib/codec/wire.ts'
import { decodeUnknown, splitList } from '../lib/codec/protobuf.ts'
import { decodeObject, encodeObject } from '../lib/codec/typed.ts'
import { messageField, stringField, varintField } from '../filters/protobuf-edit.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'
import { fullPod } from './helpers/typed-objects.ts'
import { type Json, checkCase, clone, context, deepFreeze, diffPaths, fuzzJson, fuzzProtobuf } from './helpers/object-filters.ts'

const hub = { host: '169.254.2.1', port: 10268 }
const HOST = 'KUBERNETES_SERVICE_HOST'
const PORT = 'KUBERNETES_SERVICE_PORT'
const recorded: Json[] = fixtureJson('list-pods-kind-worker2.json').items.map((p: Json) => ({ kind: 'Pod', apiVersion: 'v1', ...p }))

/** fullPod with extra env vars in its first container (and, when given, its init and ephemeral containers). */
function podWith(env: Json[], init?: Json[], ephemeral?: Json[]): Json {
  const pod: Json = clone(fullPod)
  pod.spec.containers[0].env.push(...clone(env))
  if (init) pod.spec.initContainers[0].env = clone(init)
  if (ephemeral) pod.spec.ephemeralContainers[0].env = clone(ephemeral)
  return pod
}
/** The expected pod: every env var of the two names in every container gets the hub's value. */
const rewritten = (pod: Json, h = hub): Json => {
  for (const list of ['initContainers', 'containers', 'ephemeralContainers']) {
    for (const c of pod.spec[list] ?? []) {
      for (const e of c.env ?? []) {
        if (e.name === HOST) e.value = h.host
        if (e.name === PORT) e.value = String(h.port)
      }
    }
  }
  return pod
}

t.test('serviceEnvValue', async t => {
  t.equal(serviceEnvValue(HOST, hub), '169.254.2.1')
  t.equal(serviceEnvValue(PORT, hub), '10268')
  for (const n of ['KUBERNETES_SERVICE_PORT_HTTPS', 'KUBERNETES_PORT', 'kubernetes_service_host', '', ' KUBERNETES_SERVICE_HOST'])
    t.equal(serviceEnvValue(n, hub), undefined, n)
})

t.test('cases, JSON and protobuf', async t => {
  const both = [
    { name: HOST, value: '10.96.0.1' },
    { name: PORT, value: '443' },
  ]
  const cases: [string, Json, Parameters<typeof checkCase>[4], ReturnType<typeof context>?, string[]?][] = [
    ['no such env var', fullPod, 'same'],
    ['the recorded pods (no env at all)', recorded[0], 'same'],
    ['both, in containers', podWith(both), p => rewritten(p), undefined, ['spec.containers.0.env.6.value', 'spec.containers.0.env.7.value']],
    ['whatever the old value, even empty or absent', podWith([{ name: HOST, value: 'apiserver.example.com' }, { name: PORT }]), p => rewritten(p)],
    ['only one of them', podWith([{ name: PORT, value: '6443' }]), p => rewritten(p)],
    ['a name repeated: every occurrence (kubelet uses the last)', podWith([...both, { name: HOST, value: '10.0.0.1' }]), p => rewritten(p)],
    ['init and ephemeral containers too', podWith([], both, both), p => rewritten(p)],
    [
      'a var set from valueFrom gets the value, valueFrom kept (YurtHub)',
      podWith([{ name: HOST, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } }]),
      p => rewritten(p),
    ],
    ['already the hub', rewritten(podWith(both)), 'same'],
    [
      'similar names left',
      podWith([
        { name: 'KUBERNETES_SERVICE_PORT_HTTPS', value: '443' },
        { name: 'KUBERNETES_PORT', value: 'tcp://10.96.0.1:443' },
      ]),
      'same',
    ],
    [
      'a recorded pod given env',
      { ...clone(recorded[1]), spec: { ...clone(recorded[1].spec), containers: [{ ...clone(recorded[1].spec.containers[0]), env: clone(both) }] } },
      p => rewritten(p),
    ],
    ['an IPv6 hub', podWith(both), p => rewritten(p, { host: 'fd00::10', port: 443 }), context({ hub: { host: 'fd00::10', port: 443 } })],
  ]
  for (const [name, object, expect, ctx, changed] of cases) t.test(name, async t => checkCase(t, filter, 'v1', object, expect, ctx, changed))
})

t.test('an unusable hub: unchanged, and said', async t => {
  const ctx = context({ hub: { host: hub.host, port: 0 } })
  checkCase(t, filter, 'v1', podWith([{ name: HOST, value: 'x' }]), 'same', ctx)
  t.match(ctx.warnings[0], /^serviceenvupdater: hub address/)
})

t.test('the recorded protobuf pods pass as they are; given env, only the values change', async t => {
  const u = decodeUnknown(fixtureBytes('list-pods-kind-worker2.pb'))
  const items = splitList(u.raw).items
  t.equal(items.length, recorded.length)
  for (const raw of items) t.equal(filter.protobuf(raw, 'Pod', context()), raw)
  // a recorded pod's bytes with an env field spliced into its first container: the rest stays byte for byte
  const pod = {
    ...clone(recorded[0]),
    spec: { ...clone(recorded[0].spec), containers: [{ ...clone(recorded[0].spec.containers[0]), env: [{ name: HOST, value: '10.96.0.1' }] }] },
  }
  const raw = encodeObject(pod, 'v1', 'Pod')
  const out = filter.protobuf(raw, 'Pod', context())!
  t.same(diffPaths(decodeObject(raw, 'v1', 'Pod'), decodeObject(out, 'v1', 'Pod')), ['spec.containers.0.env.0.value'])
  t.equal(out.length, raw.length + hub.host.length - '10.96.0.1'.length)
  const at = raw.indexOf('10.96.0.1')
  t.ok(out.subarray(out.length - (raw.length - at - 9)).equals(raw.subarray(at + 9)), 'every byte after the value as it was')
})

t.test('malformed protobuf on the path', async t => {
  const env = messageField(7, stringField(1, HOST), stringField(2, 'a'))
  const container = messageField(2, stringField(1, 'c'), env)
  t.throws(() => filter.protobuf(Buffer.concat([messageField(2, container), messageField(2, container)]), 'Pod', context()), ProtobufError, 'spec twice')
  t.throws(() => filter.protobuf(varintField(2, 1), 'Pod', context()), ProtobufError, 'spec not a message')
  t.throws(() => filter.protobuf(messageField(2, messageField(2, varintField(7, 1))), 'Pod', context()), ProtobufError, 'env not a message')
  t.throws(
    () => filter.protobuf(messageField(2, messageField(2, messageField(7, varintField(1, 1)))), 'Pod', context()),
    ProtobufError,
    'env name not a string',
  )
  t.throws(() => filter.protobuf(messageField(2, messageField(34, varintField(1, 1))), 'Pod', context()), ProtobufError, 'ephemeral common not a message')
  const ok = messageField(2, container)
  t.same((decodeObject(filter.protobuf(ok, 'Pod', context())!, 'v1', 'Pod') as Json).spec.containers[0].env, [{ name: HOST, value: hub.host }])
  const twice = messageField(2, messageField(2, messageField(7, stringField(1, PORT), stringField(2, 'a'), stringField(2, 'b'))))
  t.same(
    (decodeObject(filter.protobuf(twice, 'Pod', context())!, 'v1', 'Pod') as Json).spec.containers[0].env,
    [{ name: PORT, value: '10268' }],
    'a value written twice: one left',
  )
  t.equal(filter.protobuf(ok, 'Service', context()), ok, 'another kind')
})

t.test('fuzz', async t => {
  const pod = podWith([{ name: HOST, value: 'a' }], [{ name: PORT, value: '1' }], [{ name: HOST }])
  const small = {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name: 'p' },
    spec: {
      containers: [
        {
          name: 'c',
          env: [
            { name: HOST, value: 'a' },
            { name: PORT, value: '1' },
          ],
        },
      ],
    },
  }
  fuzzJson(
    t,
    filter,
    [small, { ...small, spec: { ...small.spec, initContainers: small.spec.containers, ephemeralContainers: small.spec.containers } }],
    [context(), context({ hub: { host: '', port: 0 } })],
  )
  t.doesNotThrow(() => filter.json(deepFreeze(pod), 'Pod', context()))
  fuzzProtobuf(
    t,
    filter,
    'Pod',
    [encodeObject(small, 'v1', 'Pod'), encodeObject({ ...small, spec: { ...small.spec, ephemeralContainers: small.spec.containers } }, 'v1', 'Pod')],
    context(),
  )
})
