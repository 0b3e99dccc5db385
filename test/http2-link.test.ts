// One link to the cloud (issue 41): over HTTP/2 one connection carries every relayed request, relayed
// watch and shared-cache watch of the node; a server's stream limit opens a second; a GOAWAY lets
// the streams it carries finish; a silent link is found by PING and ends every stream on it at once;
// a server without h2 gets HTTP/1.1; and the hub is online again at the apiserver's first answer.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { startHarness, eventually, type Harness } from './helpers/hub.ts'
import { readWatch, type WatchReader } from './helpers/watch.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { kubectl } from './helpers/kubectl.ts'

const kubelet = { 'user-agent': 'kubelet/v1.32.0 (linux/amd64) kubernetes/abcdef' }

function secret(name: string, value = 'a') {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: 'default' }, data: { v: Buffer.from(value).toString('base64') } }
}

/** kubelet's watch of one mounted Secret: relayed (the node may read only its pods' Secrets), one per object */
async function watchSecret(h: Harness, name: string, from: string): Promise<WatchReader> {
  const path = `/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3D${name}&resourceVersion=${from}&watch=true&allowWatchBookmarks=true`
  const res = await request(`${h.url}${path}`, { headers: kubelet })
  if (res.statusCode !== 200) throw new Error(`watch ${name}: ${res.statusCode} ${await res.body.text()}`)
  return readWatch(res.body)
}

async function secretWatches(h: Harness, count: number): Promise<WatchReader[]> {
  for (let i = 0; i < count; i++) h.simulator.create(secret(`s${i}`))
  const from = h.simulator.currentResourceVersion()
  const watches: WatchReader[] = []
  for (let i = 0; i < count; i += 25)
    watches.push(...(await Promise.all(Array.from({ length: Math.min(25, count - i) }, (_, j) => watchSecret(h, `s${i + j}`, from)))))
  return watches
}

const closeAll = (watches: WatchReader[]) => watches.length // their bodies end when the harness closes

t.test('100 per-object watches, a list and gets of a node share one HTTP/2 connection', async t => {
  const h = await startHarness({ secure: true, demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const watches = await secretWatches(h, 100)
  for (const name of ['s7', 's93']) {
    const res = await request(`${h.url}/api/v1/namespaces/default/secrets/${name}`, { headers: kubelet })
    t.equal(res.statusCode, 200, `GET ${name}`)
    await res.body.dump()
  }
  const sim = h.simulator.http2!
  t.equal(sim.openConnections, 1, 'one HTTP/2 connection at the apiserver')
  t.equal(h.simulator.openConnections(), 1, 'and no other TCP connection')
  t.ok(sim.mostConcurrentStreams >= 100, `it carried the 100 watches at once (${sim.mostConcurrentStreams} streams)`)
  t.equal(h.hub.upstream.connectionCounts.http1, 0, 'no HTTP/1.1 connection was needed')

  // every watch is live on it
  h.simulator.patch('v1', 'Secret', 'default', 's42', { data: { v: Buffer.from('b').toString('base64') } })
  h.simulator.patch('v1', 'Secret', 'default', 's99', { data: { v: Buffer.from('b').toString('base64') } })
  await eventually(() => watches[42].events.some(e => e.type === 'MODIFIED') && watches[99].events.some(e => e.type === 'MODIFIED'), 10_000, 'the events')
  t.notOk(
    watches.some((w, i) => i !== 42 && i !== 99 && w.events.some(e => e.type === 'MODIFIED')),
    'each watch saw only its own object',
  )
  closeAll(watches)
})

t.test('past the server SETTINGS_MAX_CONCURRENT_STREAMS a second connection opens', async t => {
  const h = await startHarness({ secure: true, demo: true, simulator: { http2: { maxConcurrentStreams: 20 } } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const watches = await secretWatches(h, 30)
  const sim = h.simulator.http2!
  t.equal(sim.openConnections, 2, 'two connections')
  t.ok(sim.mostConcurrentStreams <= 20, `never more streams on one than the server allows (${sim.mostConcurrentStreams})`)
  h.simulator.patch('v1', 'Secret', 'default', 's29', { data: { v: Buffer.from('b').toString('base64') } })
  await eventually(() => watches[29].events.some(e => e.type === 'MODIFIED'), 10_000, 'the last watch is live')
  t.ok(
    watches.every(w => w.isOpen()),
    'every watch open',
  )
})

t.test('a GOAWAY lets the open watches finish and moves new streams to a new connection', async t => {
  const h = await startHarness({ secure: true, demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const [watch] = await secretWatches(h, 1)
  const sim = h.simulator.http2!
  const accepted = sim.connectionsAccepted
  sim.goaway()
  const res = await request(`${h.url}/api/v1/namespaces/default/secrets/s0`, { headers: kubelet })
  t.equal(res.statusCode, 200, 'a request after the GOAWAY is answered')
  await res.body.dump()
  t.equal(sim.connectionsAccepted, accepted + 1, 'on a new connection')
  h.simulator.patch('v1', 'Secret', 'default', 's0', { data: { v: Buffer.from('b').toString('base64') } })
  await eventually(() => watch.events.some(e => e.type === 'MODIFIED'), 10_000, 'the event on the old connection')
  t.ok(watch.isOpen(), 'the watch begun before the GOAWAY still runs')
  t.equal(h.hub.health.state, 'online', 'a GOAWAY is not an outage')
})

t.test('2,000 relayed GETs on one connection: a response read to its end sends no RST_STREAM, which a server guarding against rapid reset counts', async t => {
  const h = await startHarness({ secure: true, demo: true, simulator: { tokens: ['user-token'], http2: { holdable: false } } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const headers = { 'user-agent': 'kubectl/v1.32.0', authorization: 'Bearer user-token' }
  const codes = new Map<number, number>()
  for (let i = 0; i < 2_000; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await request(`${h.url}/api/v1/namespaces/default/services/kubernetes`, { headers })
        await res.body.dump()
        codes.set(res.statusCode, (codes.get(res.statusCode) ?? 0) + 1)
      }),
    )
  }
  t.same(Object.fromEntries(codes), { 200: 2_000 }, 'every one answered')
  // node:http2's server closes a session after about a thousand resets: the node's and the token's connections are all there were
  t.equal(h.simulator.http2!.connectionsAccepted, 2, 'no connection was closed on the hub')
})

t.test('a server that does not offer h2 gets HTTP/1.1', async t => {
  const h = await startHarness({ secure: true, demo: true, simulator: { http2: false } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const [watch] = await secretWatches(h, 1)
  const res = await request(`${h.url}/api/v1/namespaces/default/secrets/s0`, { headers: kubelet })
  t.equal(res.statusCode, 200)
  await res.body.dump()
  h.simulator.patch('v1', 'Secret', 'default', 's0', { data: { v: Buffer.from('b').toString('base64') } })
  await eventually(() => watch.events.some(e => e.type === 'MODIFIED'), 10_000, 'the event')
  t.equal(h.hub.upstream.connectionCounts.h2, 0, 'no HTTP/2')
  t.ok(h.hub.upstream.connectionCounts.http1 >= 1, 'HTTP/1.1 it is')
})

t.test('a link gone silent: its PING unanswered ends every stream on it at once, and the hub is offline', async t => {
  const h = await startHarness({
    secure: true,
    demo: true,
    // the probes alone would take a minute: only the PING can tell
    config: { http2ReadIdleTimeoutMs: 500, http2PingTimeoutMs: 2_000, healthIntervalMs: 60_000, healthTimeoutMs: 60_000 },
  })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const watches = await secretWatches(h, 10)
  await h.simulator.setFault('blackhole')
  await eventually(() => h.hub.health.state === 'offline', 15_000, 'the hub to go offline')
  await eventually(() => watches.every(w => !w.isOpen()), 10_000, 'every relayed watch to end')
  t.pass('offline, and every watch on the dead link ended')

  // back: the hub is online at the apiserver's first answer, not at its next probe interval (a minute)
  await h.simulator.setFault('none')
  await eventually(() => h.hub.health.state === 'online', 15_000, 'the hub to come back')
  t.ok(h.hub.upstream.connectionCounts.resumed >= 1, `the TLS session was resumed (${JSON.stringify(h.hub.upstream.connectionCounts)})`)
})

t.test('kubectl and a client-node informer through the hub over HTTP/2, online and offline', async t => {
  const h = await startHarness({ secure: true, demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const kc = kubeConfigFor(h.url, 'kube-proxy/v1.32.0 (linux/amd64) kubernetes/abcdef')
  const core = kc.makeApiClient(k8s.CoreV1Api)
  const informer = k8s.makeInformer(kc, '/api/v1/namespaces/default/configmaps', () => core.listNamespacedConfigMap({ namespace: 'default' }))
  const seen: string[] = []
  informer.on('add', cm => seen.push(`add ${cm.metadata?.name}`))
  await informer.start()
  t.teardown(() => informer.stop())
  h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'over-h2', namespace: 'default' } })
  await eventually(() => seen.includes('add over-h2'), 10_000, 'the informer to see it')
  const online = await kubectl(h.url, ['get', 'configmaps', '-n', 'default', '-o', 'name'])
  t.equal(online.code, 0, online.stderr)
  t.match(online.stdout, /configmap\/over-h2/)
  t.equal(h.simulator.http2!.openConnections, 1, 'all of it on one HTTP/2 connection')

  await h.simulator.setFault('refuse')
  await eventually(() => h.hub.health.state === 'offline', 15_000, 'offline')
  const offline = await kubectl(h.url, ['get', 'configmaps', '-n', 'default', '-o', 'name'])
  t.equal(offline.code, 0, offline.stderr)
  t.match(offline.stdout, /configmap\/over-h2/, 'kubectl reads the cache offline')
  t.ok(
    informer.list('default').some(cm => cm.metadata?.name === 'over-h2'),
    'the informer keeps its store',
  )
})
