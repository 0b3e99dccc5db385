// inclusterconfig: the kubeconfig line of ConfigMap kube-system/kube-proxy's config.conf is commented
// out, so kube-proxy uses the in-cluster config; in JSON and protobuf.
import t from 'tap'
import { commentKubeconfig, inClusterConfigFilter as filter } from '../filters/inclusterconfig.ts'
import { ProtobufError } from '../lib/codec/wire.ts'
import { decodeObject, encodeObject } from '../lib/codec/typed.ts'
import { messageField, stringField, varintField } from '../filters/protobuf-edit.ts'
import { type Json, checkCase, clone, context, fieldBytes, fuzzJson, fuzzProtobuf } from './helpers/object-filters.ts'

// as kubeadm writes it (v1.24)
const conf = [
  'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
  'bindAddress: 0.0.0.0',
  'bindAddressHardFail: false',
  'clientConnection:',
  '  acceptContentTypes: ""',
  '  burst: 0',
  '  contentType: ""',
  '  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf',
  '  qps: 0',
  'clusterCIDR: 10.244.0.0/16',
  'mode: iptables',
  '',
].join('\n')
const kubeconfigConf = 'apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://kind-control-plane:6443\n  name: default\n'
const kubeProxy: Json = {
  kind: 'ConfigMap',
  apiVersion: 'v1',
  metadata: {
    name: 'kube-proxy',
    namespace: 'kube-system',
    uid: 'a8c2',
    resourceVersion: '233',
    creationTimestamp: '2026-11-21T22:05:48Z',
    labels: { app: 'kube-proxy' },
    annotations: { 'kubeadm.kubernetes.io/component-config.hash': 'sha256:4f2e' },
  },
  data: { 'config.conf': conf, 'kubeconfig.conf': kubeconfigConf },
}
const commented = conf.replace('  kubeconfig:', '  #kubeconfig:')
const withData = (data: Json, metadata: Json = kubeProxy.metadata): Json => ({ ...clone(kubeProxy), metadata: clone(metadata), data })

t.test('commentKubeconfig', async t => {
  const table: [string, string][] = [
    [conf, commented],
    ['kubeconfig: /a', '#kubeconfig: /a'],
    ['kubeconfig:', '#kubeconfig:'],
    ['   kubeconfig: /a   ', '   #kubeconfig: /a   '],
    ['kubeconfig: /a\r\nqps: 0\r\n', '#kubeconfig: /a\r\nqps: 0\r\n'], // CRLF: the \r stays with the value
    ['kubeconfig: /a\nx: 1\n  kubeconfig: /b', '#kubeconfig: /a\nx: 1\n  #kubeconfig: /b'],
    ['ключ: значение\n  kubeconfig: /путь', 'ключ: значение\n  #kubeconfig: /путь'],
    ['kubeconfig: C:\\k\\config', 'kubeconfig: C:\\k\\config'], // three parts: as YurtHub
    ['kubeconfig: "https://x"', 'kubeconfig: "https://x"'],
    ['  #kubeconfig: /a', '  #kubeconfig: /a'],
    ['\tkubeconfig: /a', '\tkubeconfig: /a'], // only spaces are trimmed, as YurtHub
    ['kubeconfig : /a', 'kubeconfig : /a'],
    ['kubeconfigs: /a', 'kubeconfigs: /a'],
    ['x: kubeconfig', 'x: kubeconfig'],
    ['kubeconfig', 'kubeconfig'],
    ['', ''],
  ]
  for (const [input, want] of table) t.equal(commentKubeconfig(input), want, JSON.stringify(input))
  const same = 'a: b\n'
  t.equal(commentKubeconfig(same), same)
})

t.test('cases, JSON and protobuf', async t => {
  const cm = (s: Json): Json => ((s.data['config.conf'] = commentKubeconfig(s.data['config.conf'])), s)
  const cases: [string, Json, Parameters<typeof checkCase>[4], string[]?][] = [
    ['kube-system/kube-proxy', kubeProxy, cm, ['data.config.conf']],
    ['only config.conf', withData({ 'config.conf': conf }), cm],
    [
      'immutable, binaryData',
      { ...withData({ 'config.conf': conf }), immutable: true, binaryData: { 'config.conf': 'a3ViZWNvbmZpZzogeAo=' } },
      cm,
      ['data.config.conf'],
    ],
    ['already commented', withData({ 'config.conf': commented }), 'same'],
    ['no kubeconfig line', withData({ 'config.conf': 'mode: ipvs\n' }), 'same'],
    ['no config.conf', withData({ 'kubeconfig.conf': kubeconfigConf }), 'same'],
    ['only in binaryData', { ...withData({}), binaryData: { 'config.conf': Buffer.from('kubeconfig: /a').toString('base64') } }, 'same'],
    ['no data', { ...withData({}), data: undefined }, 'same'],
    ['another namespace', withData({ 'config.conf': conf }, { name: 'kube-proxy', namespace: 'default' }), 'same'],
    ['another ConfigMap', withData({ 'config.conf': conf }, { name: 'kube-proxy-windows', namespace: 'kube-system' }), 'same'],
  ]
  for (const [name, object, expect, changed] of cases) t.test(name, async t => checkCase(t, filter, 'v1', object, expect, context(), changed))
})

t.test('protobuf: every byte but the one inserted kept, invalid UTF-8 included', async t => {
  const meta = messageField(1, stringField(1, 'kube-proxy'), stringField(3, 'kube-system'))
  const value = Buffer.concat([Buffer.from('a: \xff\xfe\n  kubeconfig: /\xc3', 'latin1'), Buffer.from('\n')])
  const other = messageField(2, stringField(1, 'z'), stringField(2, 'kubeconfig: x'))
  const raw = Buffer.concat([meta, messageField(2, stringField(1, 'config.conf'), stringField(2, value)), other, varintField(4, 1)])
  const out = filter.protobuf(raw, 'ConfigMap', context())!
  const at = raw.indexOf('kubeconfig')
  t.equal(out.length, raw.length + 1)
  t.ok(out.subarray(out.length - (raw.length - at)).equals(raw.subarray(at)), 'everything from the word on as it was')
  t.equal(out[out.length - (raw.length - at) - 1], 0x23, '#')
  const outFields = fieldBytes(out)
  const inFields = fieldBytes(raw)
  t.same(
    [outFields[0].bytes, ...outFields.slice(2).map(f => f.bytes)],
    [inFields[0].bytes, ...inFields.slice(2).map(f => f.bytes)],
    'metadata, the other entry, immutable byte for byte',
  )

  const twice = Buffer.concat([
    meta,
    messageField(2, stringField(1, 'config.conf'), stringField(2, 'kubeconfig: a')),
    messageField(2, stringField(1, 'config.conf'), stringField(2, 'x: y')),
  ])
  t.equal(filter.protobuf(twice, 'ConfigMap', context()), twice, 'a key twice: the last counts (and needs nothing)')
  const twice2 = Buffer.concat([
    meta,
    messageField(2, stringField(1, 'config.conf'), stringField(2, 'x: y')),
    messageField(2, stringField(1, 'config.conf'), stringField(2, 'kubeconfig: a')),
  ])
  t.equal((decodeObject(filter.protobuf(twice2, 'ConfigMap', context())!, 'v1', 'ConfigMap') as Json).data['config.conf'], '#kubeconfig: a')
  t.equal(filter.protobuf(raw, 'Secret', context()), raw, 'another kind')
  t.throws(() => filter.protobuf(Buffer.concat([meta, varintField(2, 1)]), 'ConfigMap', context()), ProtobufError, 'a data entry not a message')
  t.throws(() => filter.protobuf(Buffer.concat([meta, messageField(2, varintField(1, 1))]), 'ConfigMap', context()), ProtobufError, 'a key not a string')
  t.throws(
    () => filter.protobuf(Buffer.concat([meta, messageField(2, stringField(1, 'config.conf'), varintField(2, 1))]), 'ConfigMap', context()),
    ProtobufError,
    'the value not a string',
  )
})

t.test('fuzz', async t => {
  const small = withData({ 'config.conf': 'a: 1\n  kubeconfig: /k\n', other: 'x' })
  fuzzJson(t, filter, [small], [context()])
  fuzzProtobuf(t, filter, 'ConfigMap', [encodeObject(small, 'v1', 'ConfigMap'), encodeObject(kubeProxy, 'v1', 'ConfigMap')], context())
})
