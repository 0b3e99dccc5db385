// The recording path on what a real apiserver sent: protobuf lists and watch frames (the simulator
// speaks JSON only), recorded as kube-proxy's and served back offline byte for byte.
import t from 'tap'
import { Writable } from 'node:stream'
import { fixtureBytes, watchFrames } from './helpers/fixtures.ts'
import { pino } from 'pino'
import { classify } from '../lib/api/requestinfo.ts'
import { CacheStore } from '../lib/cache/store.ts'
import { Recorder, CachePolicy, maxCachedComponents } from '../lib/cache/recorder.ts'
import { decodeUnknown, encodeUnknown, splitList } from '../lib/codec/protobuf.ts'
import { scopeOf } from '../lib/cache/scope.ts'
import { resourceKeyOf } from '../lib/cache/types.ts'

const fixture = fixtureBytes
const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const log = pino({ level: 'silent' })

const frames = watchFrames

t.test('a protobuf list, then the recorded watch stream, leave the cache where the apiserver ended', async t => {
  let logged = ''
  const sink = new Writable({ write: (chunk, _encoding, done) => ((logged += chunk.toString()), done()) })
  const store = new CacheStore(undefined, log)
  const recorder = new Recorder(store, pino({ level: 'debug' }, sink))
  const list = classify('GET', '/apis/discovery.k8s.io/v1/endpointslices', kubeProxy)
  await recorder.recordListPage(list, 'protobuf', fixture('list-endpointslices.pb'))
  const key = resourceKeyOf(list)
  const listed = (await store.list(key, scopeOf(list)))!
  const original = splitList(decodeUnknown(fixture('list-endpointslices.pb')).raw)
  t.same(
    listed.items.map(o => o.body),
    original.items,
    'items stored as the raw messages the apiserver sent',
  )
  t.equal(listed.resourceVersion, original.resourceVersion)
  const listedNames = listed.items.map(o => `${o.namespace}/${o.name}`).sort()

  // the same events in JSON say what each protobuf frame is and what the end state is
  const events = fixture('watch-endpointslices.json')
    .toString()
    .trim()
    .split('\n')
    .map(l => JSON.parse(l))
  const protobufFrames = frames(fixture('watch-endpointslices.pb'))
  t.equal(protobufFrames.length, events.length, 'one protobuf frame per recorded event')
  /** every object the cache holds for kube-proxy's slices, with its version */
  const held = () => [...(store.find(key)?.entries.values() ?? [])].map(e => `${e.meta.namespace}/${e.meta.name}@${e.meta.resourceVersion}`).sort()
  const watch = classify('GET', `/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=${original.resourceVersion}`, kubeProxy)
  let bookmarks = 0
  for (const [i, frame] of protobufFrames.entries()) {
    const before = held()
    const recorded = await recorder.recordEvent(watch, 'protobuf', frame, scopeOf(watch))
    t.equal(recorded?.type, events[i].type, `frame ${i} recorded as a ${events[i].type}`)
    if (events[i].type !== 'BOOKMARK') continue
    bookmarks++
    t.equal(recorded?.object, undefined, `BOOKMARK ${i}: no object taken from it`)
    t.equal(recorded?.resourceVersion, events[i].object.metadata.resourceVersion, `BOOKMARK ${i}: its resourceVersion read`)
    t.same(held(), before, `BOOKMARK ${i}: passed over, the cache unchanged`)
  }
  t.ok(bookmarks >= 1, `${bookmarks} BOOKMARKs in the recorded stream went through the recorder`)
  t.notMatch(logged, /not recorded/, 'no frame was refused (logged as not recorded)')

  const modified = events.find(e => e.type === 'MODIFIED').object
  const stored = (await store.get(key, 'default', modified.metadata.name))!
  t.equal(stored.resourceVersion, modified.metadata.resourceVersion, 'MODIFIED replaced the object')
  const added = events.find(e => e.type === 'ADDED').object.metadata.name
  t.equal(await store.get(key, 'default', added), undefined, 'ADDED then DELETED: gone')
  t.same(
    held().map(h => h.replace(/@.*/, '')),
    listedNames,
    'the cache holds exactly the listed slices: nothing else came in with the stream',
  )

  // a stored object goes back out as the apiserver would send it
  const body = encodeUnknown({ apiVersion: stored.apiVersion, kind: stored.kind, raw: stored.body })
  t.equal(decodeUnknown(body).kind, 'EndpointSlice')
})

t.test('what is cached and what is not', async t => {
  const policy = new CachePolicy(['kubelet', 'kube-proxy'])
  const cacheable = (method: string, url: string, ua = kubeProxy) => policy.isCacheable(classify(method, url, ua))
  t.ok(cacheable('GET', '/api/v1/nodes/kind-worker2'))
  t.ok(cacheable('GET', '/api/v1/pods?watch=true'))
  t.ok(cacheable('GET', '/api/v1/namespaces/default/pods/p/status'), 'status is cached')
  t.notOk(cacheable('GET', '/api/v1/namespaces/default/pods/p/log'), 'logs are not')
  t.notOk(cacheable('POST', '/api/v1/namespaces/default/pods/p/exec'), 'exec is not')
  t.notOk(cacheable('POST', '/api/v1/namespaces/default/serviceaccounts/default/token'), 'tokens are not')
  t.notOk(cacheable('GET', '/apis/certificates.k8s.io/v1/certificatesigningrequests'), 'CSRs are not')
  t.notOk(cacheable('POST', '/apis/authentication.k8s.io/v1/tokenreviews'), 'reviews are not')
  t.notOk(cacheable('GET', '/api/v1/pods', 'kubectl/v1.32.4 (linux/amd64)'), 'components not configured are not')
  t.notOk(cacheable('PUT', '/api/v1/nodes/kind-worker2'), 'writes are not')
  t.ok(new CachePolicy(['*']).isCacheable(classify('GET', '/api/v1/pods', 'kubectl/v1.32.4')), '* caches every component')
})

t.test('with *, made-up User-Agents get at most maxCachedComponents caches; the first ones keep theirs', async t => {
  const policy = new CachePolicy(['*', 'kubelet'])
  const read = (ua: string) => policy.isCacheable(classify('GET', '/api/v1/pods', `${ua}/1.0`))
  const made = Array.from({ length: 200 }, (_, i) => `agent-${i}`)
  t.equal(made.filter(read).length, maxCachedComponents, `${maxCachedComponents} of 200 cached`)
  t.ok(read('agent-0') && read(`agent-${maxCachedComponents - 1}`), 'the first ones still are')
  t.notOk(read(`agent-${maxCachedComponents}`), 'later ones are relayed, not cached')
  t.ok(read('kubelet'), 'a component named in --cache-components always is')
})

t.test('a recorded WatchList watch replaces its scope at the end of its initial events; one from an apiserver without WatchList does not', async t => {
  const kubelet = 'kubelet/v1.35.0 (linux/amd64) kubernetes/0'
  const configMap = (name: string, rv: number) => ({
    kind: 'ConfigMap',
    apiVersion: 'v1',
    metadata: { name, namespace: 'ns', resourceVersion: String(rv) },
    data: {},
  })
  const frame = (type: string, object: object) => Buffer.from(JSON.stringify({ type, object }) + '\n')
  const end = (rv: number) =>
    frame('BOOKMARK', { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: String(rv), annotations: { 'k8s.io/initial-events-end': 'true' } } })
  const listPath = '/api/v1/namespaces/ns/configmaps'
  const watchPath = `${listPath}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`
  const setup = async () => {
    const store = new CacheStore(undefined, log)
    const recorder = new Recorder(store, log)
    const list = classify('GET', listPath, kubelet)
    const body = { kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: '10' }, items: ['a', 'b', 'gone'].map(n => configMap(n, 5)) }
    await recorder.recordListPage(list, 'json', Buffer.from(JSON.stringify(body)))
    const names = async () => (await store.list(resourceKeyOf(list), scopeOf(list)))!.items.map(o => o.name).sort()
    t.same(await names(), ['a', 'b', 'gone'], 'listed first')
    return { store, recorder, watch: recorder.watch(classify('GET', watchPath, kubelet), 'json'), names, list }
  }

  const withList = await setup()
  for (const f of [frame('ADDED', configMap('a', 5)), frame('ADDED', configMap('b', 12)), end(20)]) await withList.watch.record(f)
  t.same(await withList.names(), ['a', 'b'], 'deleted while nobody watched: gone once the initial events end')
  t.equal((await withList.store.get(resourceKeyOf(withList.list), 'ns', 'b'))?.resourceVersion, '12', 'each object as its initial event had it')
  t.equal((await withList.store.list(resourceKeyOf(withList.list), scopeOf(withList.list)))!.complete, true, 'the scope is whole')

  // v1.24 ignores sendInitialEvents: the state, then changes, and no end; a stray end after a change replaces nothing
  const without = await setup()
  for (const f of [frame('ADDED', configMap('a', 5)), frame('ADDED', configMap('b', 5)), frame('MODIFIED', configMap('b', 13)), end(20)])
    await without.watch.record(f)
  t.same(await without.names(), ['a', 'b', 'gone'], 'no list was seen: nothing is taken for deleted')
  t.equal((await without.store.get(resourceKeyOf(without.list), 'ns', 'b'))?.resourceVersion, '13', 'the change recorded')
})

t.test('a get answered with the bytes the cache holds confirms them; any other answer is recorded', async t => {
  const kubelet = 'kubelet/v1.35.0 (linux/amd64) kubernetes/0'
  const store = new CacheStore(undefined, log)
  const recorder = new Recorder(store, log)
  const get = classify('GET', '/api/v1/namespaces/ns/configmaps/settings', kubelet)
  const key = resourceKeyOf(get)
  const body = (rv: number, value: string) =>
    Buffer.from(
      JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'settings', namespace: 'ns', resourceVersion: String(rv) }, data: { value } }),
    )
  t.equal(store.confirms(key, 'ns', 'settings', body(5, 'a')), false, 'nothing held: nothing to confirm')
  await recorder.recordObject(get, 'json', body(5, 'a'))
  t.equal((await store.get(key, 'ns', 'settings'))?.resourceVersion, '5', 'the first answer recorded')
  const collection = store.find(key)!
  collection.lastUpdate = 0
  t.equal(store.confirms(key, 'ns', 'settings', body(5, 'a')), true, 'the same bytes: confirmed')
  t.ok(collection.lastUpdate > 0, 'and the copy counted as fresh from the cloud')
  t.equal(store.confirms(key, 'ns', 'settings', body(5, 'b')), false, 'other bytes at the same version: not confirmed')
  await recorder.recordObject(get, 'json', body(6, 'b'))
  const held = (await store.get(key, 'ns', 'settings'))!
  t.equal(held.resourceVersion, '6', 'a changed answer is recorded')
  t.same(JSON.parse(held.body.toString()).data, { value: 'b' })
})
