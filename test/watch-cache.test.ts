// The shared watch caches through a running hub: one upstream watch per scope and format however
// many local clients; the apiserver's resourceVersion semantics; and an outage that no local client
// has to relist after.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { pipeline } from 'node:stream'
import { startHarness, eventually, goDark, comeBack } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { readWatch } from './helpers/watch.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { decodeBody, decodeWatchFrame } from '../lib/codec/typed.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const coredns = 'coredns/1.9.3 (linux/amd64) kubernetes/abc'
const protobuf = 'application/vnd.kubernetes.protobuf, */*'

const slice = (name: string, ip: string, node = 'kind-worker2') => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'svc-plain', app: 'cache-test' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true }, nodeName: node }],
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})

/** A protobuf list+watch client of kube-proxy's shape: its own state, from events only after its list. */
async function protobufReflector(h: Harness, path: string) {
  const list = await request(`${h.url}${path}`, { headers: { 'user-agent': kubeProxy, accept: protobuf } })
  const body = Buffer.from(await list.body.arrayBuffer())
  const decoded = decodeBody(body) as any
  const state = new Map<string, any>(decoded.items.map((i: any) => [i.metadata.name, i]))
  const watch = await request(`${h.url}${path}?watch=true&allowWatchBookmarks=true&resourceVersion=${decoded.metadata.resourceVersion}`, {
    headers: { 'user-agent': kubeProxy, accept: protobuf },
  })
  const events: string[] = []
  /** each event's object's version, as a client-go reflector takes its resume point from it */
  const versions: bigint[] = []
  let open = true
  void (async () => {
    try {
      for await (const frame of pipeline(watch.body, new WatchFrameSplitter('protobuf'), () => {})) {
        const event = decodeWatchFrame(frame as Buffer) as any
        events.push(event.type)
        versions.push(BigInt(event.object.metadata.resourceVersion))
        if (event.type === 'DELETED') state.delete(event.object.metadata.name)
        else if (event.type !== 'BOOKMARK') state.set(event.object.metadata.name, event.object)
      }
    } catch {
      // cut
    }
    open = false
  })()
  return { contentType: list.headers['content-type'], state, events, versions, isOpen: () => open, stop: () => watch.body.destroy() }
}

function informer(h: Harness, userAgent: string) {
  const kc = kubeConfigFor(h.url, userAgent)
  const api = kc.makeApiClient(k8s.DiscoveryV1Api)
  return k8s.makeInformer(kc, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', () => api.listNamespacedEndpointSlice({ namespace: 'default' }))
}

t.test('five informers and two protobuf clients on one scope: one upstream watch per wire format', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const informers = [kubeProxy, kubeProxy, kubeProxy, coredns, coredns].map(ua => informer(h, ua))
  for (const i of informers) await i.start()
  t.teardown(() => Promise.all(informers.map(i => i.stop())))
  const pb = [
    await protobufReflector(h, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices'),
    await protobufReflector(h, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices'),
  ]
  t.teardown(() => pb.forEach(c => c.stop()))
  t.equal(pb[0].contentType, 'application/vnd.kubernetes.protobuf', 'protobuf clients get protobuf')
  h.simulator.create(slice('cache-test-a', '10.0.0.1'))
  await eventually(
    () => informers.every(i => i.list('default').some(s => s.metadata?.name === 'cache-test-a')) && pb.every(c => c.state.has('cache-test-a')),
    10_000,
    'every client to see the new slice',
  )
  const upstreamWatches = (format: string) =>
    h.simulator.countRequests(
      r =>
        r.watch &&
        r.path === '/apis/discovery.k8s.io/v1/endpointslices' &&
        String(r.headers['user-agent']).startsWith('outpost/') &&
        (format === 'protobuf') === String(r.headers.accept).startsWith('application/vnd.kubernetes.protobuf'),
    )
  t.equal(upstreamWatches('json'), 1, 'one upstream JSON watch for five informers')
  t.equal(upstreamWatches('protobuf'), 1, 'one upstream protobuf watch for two protobuf clients')
  t.equal(
    h.simulator.countRequests(r => r.watch && String(r.headers['user-agent']).startsWith('kube-proxy')),
    0,
    "no client's own watch reaches the apiserver",
  )
})

t.test('resourceVersion semantics: replay from the window, 410 when too old, BOOKMARKs, WatchList, selector transitions', async t => {
  const h = await startHarness({ demo: true, start: { cacheBookmarkIntervalMs: 100 } })
  t.teardown(() => h.close())
  const base = `${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices`
  const headers = { 'user-agent': kubeProxy }
  const list = (await (await request(base, { headers })).body.json()) as any
  const from = list.metadata.resourceVersion
  h.simulator.create(slice('cache-test-b', '10.0.0.2'))
  h.simulator.create(slice('cache-test-c', '10.0.0.3'))
  await eventually(
    async () => ((await (await request(base, { headers })).body.json()) as any).items.some((s: any) => s.metadata.name === 'cache-test-c'),
    10_000,
    'the cache to have the writes',
  )

  const replay = await request(`${base}?watch=true&resourceVersion=${from}`, { headers })
  const replayed = readWatch(replay.body)
  t.teardown(() => replay.body.destroy())
  await eventually(() => replayed.events.length >= 2, 10_000, 'the replay')
  t.same(
    replayed.events.map(e => `${e.type} ${e.object.metadata.name}`),
    ['ADDED cache-test-b', 'ADDED cache-test-c'],
    'exactly the events after the version',
  )

  const expired = await request(`${base}?watch=true&resourceVersion=1`, { headers })
  const tooOld = readWatch(expired.body)
  await tooOld.ended
  t.equal(expired.statusCode, 200)
  t.match(tooOld.events, [{ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } }], 'a version older than the window: the in-stream 410')

  const bookmarks = await request(`${base}?watch=true&allowWatchBookmarks=true&resourceVersion=${from}`, { headers })
  const withBookmarks = readWatch(bookmarks.body)
  t.teardown(() => bookmarks.body.destroy())
  await eventually(() => withBookmarks.bookmarks() >= 2, 10_000, 'BOOKMARKs')
  t.pass('BOOKMARKs arrive when asked for')

  const initial = await request(`${base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`, { headers })
  const watchList = readWatch(initial.body)
  t.teardown(() => initial.body.destroy())
  await eventually(
    () => watchList.events.some(e => e.type === 'BOOKMARK' && e.object.metadata.annotations?.['k8s.io/initial-events-end'] === 'true'),
    10_000,
    'the end of the initial events',
  )
  const end = watchList.events.findIndex(e => e.type === 'BOOKMARK' && e.object.metadata.annotations?.['k8s.io/initial-events-end'] === 'true')
  t.ok(
    watchList.events.slice(0, end).every(e => e.type === 'ADDED'),
    'initial events are ADDED',
  )
  t.ok(
    watchList.events.slice(0, end).some(e => e.object.metadata.name === 'cache-test-c'),
    'and hold the current state',
  )

  const selected = await request(`${base}?watch=true&labelSelector=app%3Dcache-test`, { headers })
  const bySelector = readWatch(selected.body)
  t.teardown(() => selected.body.destroy())
  await eventually(() => bySelector.events.filter(e => e.type === 'ADDED').length >= 2, 10_000, 'the selected state')
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'cache-test-b', { metadata: { labels: { app: 'moved' } } })
  await eventually(() => bySelector.events.some(e => e.type === 'DELETED' && e.object.metadata.name === 'cache-test-b'), 10_000, 'the DELETED')
  t.pass('an object leaving the selector is a DELETED to that watcher')
})

for (const longOutage of [false, true]) {
  const title = longOutage
    ? "an outage longer than the apiserver's window: the hub relists its scope once, and every client converges without a list of its own"
    : 'an outage: watches stay open, the hub resumes its watch from its version, and every client converges without a single list'
  t.test(title, async t => {
    const h = await startHarness({ demo: true, config: { healthIntervalMs: 100 }, start: { cacheBookmarkIntervalMs: 200 } })
    t.teardown(() => h.close())
    h.simulator.create(slice('outage-keep', '10.1.0.1'))
    h.simulator.create(slice('outage-change', '10.1.0.2'))
    h.simulator.create(slice('outage-drop', '10.1.0.3'))
    const informers = [informer(h, kubeProxy), informer(h, coredns)]
    for (const i of informers) await i.start()
    t.teardown(() => Promise.all(informers.map(i => i.stop())))
    const pb = await protobufReflector(h, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices')
    t.teardown(() => pb.stop())
    await eventually(() => informers.every(i => i.list('default').some(s => s.metadata?.name === 'outage-drop')), 10_000, 'the initial lists')
    const lists = () =>
      h.hub.metrics.registry
        .getSingleMetric('outpost_requests_total')!
        .get()
        .then(m => m.values.filter(v => v.labels.verb === 'list').reduce((n, v) => n + v.value, 0))
    const listsBefore = await lists()

    await goDark(h)
    h.simulator.create(slice('outage-new', '10.1.0.4'))
    h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'outage-change', {
      endpoints: [{ addresses: ['10.1.9.9'], conditions: { ready: true }, nodeName: 'kind-worker2' }],
    })
    h.simulator.remove('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'outage-drop')
    if (longOutage) h.simulator.compact() // the events of the outage are gone from the apiserver's window: a resumed watch gets 410
    await new Promise(resolve => setTimeout(resolve, 500))
    t.ok(pb.isOpen(), 'the protobuf watch is held open through the outage')
    const hubLists = () =>
      h.simulator.countRequests(
        r => !r.watch && r.verb === 'list' && r.path.endsWith('/endpointslices') && String(r.headers['user-agent']).startsWith('outpost/'),
      )
    const hubListsBefore = hubLists()
    await comeBack(h)

    // the outage-* slices belong to a Service without topology: every client sees them as they are
    const mine = (s: any) => s.metadata.name.startsWith('outage-')
    const want = () =>
      h.simulator
        .list('discovery.k8s.io/v1', 'EndpointSlice')
        .filter(mine)
        .map((s: any) => `${s.metadata.name}=${s.endpoints?.[0]?.addresses?.[0]}`)
        .sort()
        .join(' ')
    const have = (objects: any[]) =>
      objects
        .filter(mine)
        .map(s => `${s.metadata.name}=${s.endpoints?.[0]?.addresses?.[0]}`)
        .sort()
        .join(' ')
    await eventually(() => informers.every(i => have([...i.list('default')]) === want()), 15_000, 'the informers to converge')
    await eventually(() => have([...pb.state.values()]) === want(), 15_000, 'the protobuf client to converge')
    t.ok(pb.events.includes('DELETED') && pb.events.includes('ADDED') && pb.events.includes('MODIFIED'), 'told as ADDED, MODIFIED and DELETED')
    t.ok(pb.isOpen(), 'on the same watch')
    const back = pb.versions.findIndex((v, i) => i > 0 && v < pb.versions[i - 1])
    t.equal(back, -1, `every event's object carries a version not older than the one before (${pb.events.map((e, i) => `${e}@${pb.versions[i]}`).join(' ')})`)
    t.equal(await lists(), listsBefore, 'no local client listed again')
    if (longOutage) t.ok(hubLists() > hubListsBefore, 'the hub relisted its scope itself')
    else t.equal(hubLists(), hubListsBefore, 'nor did the hub: its watch resumed, and the apiserver replayed what it missed')
  })
}

t.test('two scopes of one component: an object leaving one is still served by the other, online and offline', async t => {
  const h = await startHarness({ demo: true, config: { healthIntervalMs: 100 } })
  t.teardown(() => h.close())
  h.simulator.create(slice('two-scopes', '10.2.0.1'))
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'two-scopes', { metadata: { labels: { tier: 'web' } } })
  const base = `${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices`
  const names = async (selector: string) => {
    // as an informer lists (resourceVersion=0): the shared watch cache answers, online and offline
    const res = await request(`${base}?resourceVersion=0&labelSelector=${encodeURIComponent(selector)}`, { headers: { 'user-agent': kubeProxy } })
    return ((await res.body.json()) as any).items.map((s: any) => s.metadata.name)
  }
  t.ok((await names('app=cache-test')).includes('two-scopes'))
  t.ok((await names('tier=web')).includes('two-scopes'))
  // it leaves the app=cache-test scope (a DELETED there), and stays in tier=web
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'two-scopes', { metadata: { labels: { app: 'elsewhere' } } })
  await eventually(async () => !(await names('app=cache-test')).includes('two-scopes'), 10_000, 'the object to leave the first scope')
  t.ok((await names('tier=web')).includes('two-scopes'), 'online, the other scope still serves it')
  await goDark(h)
  t.notOk((await names('app=cache-test')).includes('two-scopes'), 'offline, not in the scope it left')
  t.ok((await names('tier=web')).includes('two-scopes'), 'offline, still in the other')
  const held = await h.hub.store.list(
    { component: 'shared-json', group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices' },
    (await import('../lib/cache/scope.ts')).parseScope({ namespace: 'default', labelSelector: 'tier=web', fieldSelector: '' }),
  )
  t.ok(
    held?.items.some(o => o.name === 'two-scopes'),
    'and the disk cache holds it for that scope',
  )
})

t.test("online, a watch from a version newer than any event of its resource is the apiserver's to answer, not a 504", async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const slices = '/apis/discovery.k8s.io/v1/endpointslices'
  const first = await request(`${h.url}${slices}?resourceVersion=0`, { headers: { 'user-agent': kubeProxy } })
  t.equal(first.statusCode, 200)
  await first.body.dump()
  // a write to another resource moves the apiserver's version on; no slice event carries it
  h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'elsewhere', namespace: 'default' }, data: {} })
  const rv = h.simulator.currentResourceVersion()
  const started = Date.now()
  const watch = await request(`${h.url}${slices}?watch=1&resourceVersion=${rv}`, { headers: { 'user-agent': kubeProxy } })
  t.equal(watch.statusCode, 200, `the watch from ${rv} is answered (in ${Date.now() - started} ms)`)
  watch.body.destroy()
})
