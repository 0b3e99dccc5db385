// Offline autonomy through real sockets: the cloud goes dark, the hub answers from its cache, the
// cloud comes back and clients converge without a restart.
import t from 'tap'
import { request } from 'undici'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import * as k8s from '@kubernetes/client-node'
import type { Dispatcher } from 'undici'
import { startHarness, eventually, goDark, comeBack } from './helpers/hub.ts'
import { readWatch as readJsonWatch } from './helpers/watch.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { decodeUnknown, splitList } from '../lib/codec/protobuf.ts'

const kubeletUA = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const fixture = (name: string) => readFileSync(new URL(`./fixtures/apiserver-v1.24/${name}`, import.meta.url))

/**
 * Probes of a cloud that hangs fail only when they time out: the harness's 5 s would take 15 s to
 * go offline. A second per probe, still three in a row.
 */
const hangDetection = { healthTimeoutMs: 1_000 }

/**
 * The hub declares the cloud offline while the simulator still accepts every connection and logs
 * every request (it answers none: its probes time out), so anything the hub sends it is counted.
 * The harness must have been started with hangDetection.
 */
async function goDarkButListening(h: Harness): Promise<void> {
  await h.simulator.setFault('hang')
  await eventually(() => h.hub.health.state === 'offline', 15_000, 'the hub to declare the hanging cloud offline')
}

/** The simulator and the hub with short BOOKMARK periods, both online and offline; a hanging cloud noticed in seconds (hangDetection). */
function startWithBookmarks(periodMs: number): Promise<Harness> {
  return startHarness({ simulator: { bookmarkIntervalMs: periodMs }, start: { offlineBookmarkIntervalMs: periodMs }, config: hangDetection })
}

/** A watch read as it arrives; `ended` also says the hub's cloud state at the moment it ended. */
function readWatch(body: Dispatcher.ResponseData['body'], h: Harness) {
  const reader = readJsonWatch(body)
  return { ...reader, ended: reader.ended.then(end => ({ ...end, state: h.hub.health.state })) }
}

async function getJson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: any }> {
  const res = await request(url, { headers: { 'user-agent': kubeletUA, ...headers } })
  const text = await res.body.text()
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined, headers: res.headers }
}

const configMap = (name: string, labels: Record<string, string> = {}, data: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'default', labels },
  data,
})

t.test('an informer keeps its objects through an outage and converges to the cloud afterwards', async t => {
  const h = await startHarness({ config: { cacheComponents: ['*'] }, simulator: { bookmarkIntervalMs: 200 } })
  t.teardown(() => h.close())
  for (const name of ['keep', 'change', 'drop']) h.simulator.create(configMap(name, {}, { v: '1' }))

  const kc = kubeConfigFor(h.url, kubeletUA)
  const core = kc.makeApiClient(k8s.CoreV1Api)
  const informer = k8s.makeInformer(kc, '/api/v1/namespaces/default/configmaps', () => core.listNamespacedConfigMap({ namespace: 'default' }))
  const deletes: string[] = []
  informer.on('delete', cm => deletes.push(cm.metadata!.name!))
  let stopped = false
  // client-node's informer stops on a watch error instead of retrying like client-go; retry as client-go would
  informer.on('error', () => setTimeout(() => stopped || informer.start().catch(() => {}), 100))
  await informer.start()
  t.teardown(async () => {
    stopped = true
    await informer.stop()
  })
  const names = () =>
    informer
      .list('default')
      .map(o => `${o.metadata?.name}=${o.data?.v ?? ''}`)
      .sort()
      .join(',')
  await eventually(() => names() === 'change=1,drop=1,keep=1', 10_000, 'the initial list')

  await goDark(h)
  // the cloud changes while the node cannot see it
  h.simulator.patch('v1', 'ConfigMap', 'default', 'change', { data: { v: '2' } })
  h.simulator.remove('v1', 'ConfigMap', 'default', 'drop')
  h.simulator.create(configMap('new', {}, { v: '1' }))
  // The hub ended the informer's upstream watch; the informer has watched again, against the cache.
  await eventually(() => h.hub.streams.counts.offline >= 1, 15_000, 'the informer to re-watch against the cache')
  // a round trip through the hub, so whatever the offline watch sent at its start has reached the informer
  t.equal((await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)).headers['x-outpost-cache'], 'hit', 'the hub answers from its cache')
  t.equal(names(), 'change=1,drop=1,keep=1', 'offline: the informer still has every object, unchanged')
  t.same(deletes, [], 'offline: nothing was deleted under the informer')

  await comeBack(h)
  await eventually(() => names() === 'change=2,keep=1,new=1', 20_000, 'the informer to converge to the cloud')
  t.equal(names(), 'change=2,keep=1,new=1', 'converged without a restart')
})

t.test('kubelet-shaped protobuf list answered offline, byte for byte what the apiserver sent', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const url = '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2&limit=500&resourceVersion=0'
  const body = fixture('list-pods-kind-worker2.pb')
  // What the apiserver sent kubelet (recorded), through the hub's own recording path.
  await h.hub.recorder.recordListPage(classify('GET', url, kubeletUA), 'protobuf', body)
  await goDark(h)
  const res = await request(h.url + url, { headers: { 'user-agent': kubeletUA, accept: 'application/vnd.kubernetes.protobuf, */*' } })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'application/vnd.kubernetes.protobuf')
  const served = Buffer.from(await res.body.arrayBuffer())
  t.same(served, body, 'identical bytes: envelope, list metadata and every item')
  const items = splitList(decodeUnknown(served).raw).items
  t.equal(items.length, JSON.parse(fixture('list-pods-kind-worker2.json').toString()).items.length)

  const other = await request(h.url + '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker', {
    headers: { 'user-agent': kubeletUA, accept: 'application/vnd.kubernetes.protobuf, */*' },
  })
  t.equal(other.statusCode, 503, "another node's pods were never listed: no answer, rather than an empty list that looks whole")
  t.match(await other.body.json(), {
    kind: 'Status',
    reason: 'ServiceUnavailable',
    message:
      /pods only as .* \(spec\.nodeName=kind-worker2\); this request asks for pods in all namespaces with spec\.nodeName=kind-worker, which that does not cover$/,
  })
  const all = await request(h.url + '/api/v1/pods', { headers: { 'user-agent': kubeletUA } })
  t.equal(all.statusCode, 503, 'nor are all pods: kubelet listed only its own')
  await all.body.dump()
})

t.test('two selectors on one resource from one component, offline, each answered correctly', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  h.simulator.create(configMap('a1', { app: 'a' }))
  h.simulator.create(configMap('a2', { app: 'a' }))
  h.simulator.create(configMap('b1', { app: 'b' }))
  const base = `${h.url}/api/v1/namespaces/default/configmaps`
  const a = await getJson(`${base}?labelSelector=app%3Da`)
  const b = await getJson(`${base}?labelSelector=app%3Db`)
  t.equal(a.body.items.length, 2)
  t.equal(b.body.items.length, 1)
  await goDark(h)
  const names = (list: any) => list.items.map((i: any) => i.metadata.name).sort()
  const offA = await getJson(`${base}?labelSelector=app%3Da`)
  const offB = await getJson(`${base}?labelSelector=app%3Db`)
  t.equal(offA.headers['x-outpost-cache'], 'hit')
  t.same(names(offA.body), ['a1', 'a2'])
  t.same(names(offB.body), ['b1'], 'the second scope did not overwrite the first, nor the first the second')
  t.same(
    names((await getJson(`${base}?labelSelector=app%3Da,tier+notin+(db)`)).body),
    ['a1', 'a2'],
    'a narrower selector of a listed scope is evaluated offline',
  )
  const unlisted = await getJson(`${base}?labelSelector=app+in+(a,b)`)
  t.equal(unlisted.status, 503, 'a scope no whole list answers for is not answered')
  t.match(
    unlisted.body.message,
    /configmaps only as .* \(namespace default, app=a; namespace default, app=b\); this request asks for configmaps in namespace default with app in \(a,b\), which that does not cover/,
  )
  t.equal((await getJson(`${base}/a2`)).body.metadata.name, 'a2', 'get of a listed object')
  t.equal((await getJson(`${base}/nope`)).status, 503, 'an object no listed scope could hold is not said to be missing')
  await comeBack(h)
  await getJson(`${h.url}/api/v1/configmaps?labelSelector=app`)
  await goDark(h)
  t.equal((await getJson(`${base}/nope`)).status, 503, 'a selector that could not hold it does not either')
  await comeBack(h)
  await getJson(`${h.url}/api/v1/configmaps`)
  await goDark(h)
  const missing = await getJson(`${base}/nope`)
  t.equal(missing.status, 404, 'after a whole list, a missing object is NotFound')
  t.equal(missing.body.reason, 'NotFound')
  t.same(names((await getJson(`${base}?labelSelector=app+in+(a,b),app!%3Da`)).body), ['b1'], 'set-based selectors evaluated offline')
})

t.test('a three-page list is cached once the last page arrives and served whole offline', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (let i = 0; i < 6; i++) h.simulator.create(configMap(`page-${i}`))
  const base = `${h.url}/api/v1/namespaces/default/configmaps`
  let token = ''
  let pages = 0
  do {
    const page = await getJson(`${base}?limit=2${token ? `&continue=${encodeURIComponent(token)}` : ''}`)
    token = page.body.metadata.continue ?? ''
    pages++
  } while (token)
  t.equal(pages, 3)
  await goDark(h)
  const whole = await getJson(base)
  t.same(whole.body.items.map((i: any) => i.metadata.name).sort(), ['page-0', 'page-1', 'page-2', 'page-3', 'page-4', 'page-5'])
  t.equal(whole.body.kind, 'ConfigMapList')
  t.ok(Number(whole.body.metadata.resourceVersion) > 0, 'list resourceVersion is the highest cached')
})

t.test('offline writes: a clear 503 Status and nothing written; the node Lease renewal is answered locally', async t => {
  const h = await startHarness({ config: hangDetection })
  t.teardown(() => h.close())
  h.simulator.create(configMap('steady', {}, { v: '1' }))
  await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)
  const lease = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'kind-worker2', namespace: 'kube-node-lease' },
    spec: { holderIdentity: 'kind-worker2', leaseDurationSeconds: 40 },
  }
  h.simulator.create(lease)
  const leaseUrl = `${h.url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kind-worker2`
  const cachedLease = await getJson(leaseUrl)
  await goDarkButListening(h)
  const mark = h.simulator.requests.length
  const before = await h.hub.store.get({ component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }, 'default', 'steady')

  for (const [method, path, body] of [
    ['POST', '/api/v1/namespaces/default/configmaps', configMap('offline-new')],
    ['PUT', '/api/v1/namespaces/default/configmaps/steady', configMap('steady', {}, { v: '2' })],
    ['PATCH', '/api/v1/namespaces/default/configmaps/steady', { data: { v: '3' } }],
    ['DELETE', '/api/v1/namespaces/default/configmaps/steady', undefined],
  ] as const) {
    const res = await request(h.url + path, {
      method,
      headers: { 'user-agent': kubeletUA, 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
      // a write sent on to the hanging cloud would never be answered
      signal: AbortSignal.timeout(20_000),
    })
    const status = (await res.body.json()) as any
    t.equal(res.statusCode, 503, `${method}: 503`)
    t.match(status, { kind: 'Status', reason: 'ServiceUnavailable', code: 503 }, `${method}: a Status`)
    t.match(status.message, /nothing was written/)
  }
  const after = await h.hub.store.get({ component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }, 'default', 'steady')
  t.same(after?.body, before?.body, 'the cached object is unchanged')
  t.ok(before, 'it was cached in the first place')

  const renewed = { ...cachedLease.body, spec: { ...cachedLease.body.spec, renewTime: '2026-11-21T23:59:00.000000Z' } }
  const renewal = await request(leaseUrl, {
    method: 'PUT',
    headers: { 'user-agent': kubeletUA, 'content-type': 'application/json' },
    body: JSON.stringify(renewed),
    signal: AbortSignal.timeout(20_000),
  })
  t.equal(renewal.statusCode, 200, 'the Lease renewal is acknowledged offline')
  t.same(((await renewal.body.json()) as any).spec.renewTime, renewed.spec.renewTime)

  // The simulator listened all along: it logged the hub's health probes, and keeps logging them
  // after the last write, so a write the hub had sent would be in its log.
  const answered = h.simulator.requests.length
  await eventually(() => h.simulator.requests.slice(answered).some(r => r.url.startsWith('/readyz')), 15_000, 'a health probe logged after the writes')
  const received = h.simulator.requests.slice(mark)
  t.ok(
    received.some(r => r.url.startsWith('/readyz')),
    'the cloud was reachable and counting requests',
  )
  t.same(
    received.filter(r => !r.url.startsWith('/readyz')).map(r => `${r.method} ${r.url}`),
    [],
    'nothing but health probes reached the cloud',
  )
  // Requests held by the hanging cloud are answered once it is back: none of them was a write.
  await comeBack(h)
  t.equal(
    h.simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-node-lease', 'kind-worker2')?.spec.renewTime,
    undefined,
    'the Lease in the cloud was not renewed',
  )
  t.same(h.simulator.get('v1', 'ConfigMap', 'default', 'steady')?.data, { v: '1' }, 'the ConfigMap in the cloud was neither replaced, patched nor deleted')
  t.equal(h.simulator.get('v1', 'ConfigMap', 'default', 'offline-new'), undefined, 'nor was one created')
})

t.test('open upstream watches are closed when the cloud goes down; offline watches end when it returns', async t => {
  const periodMs = 100
  const h = await startWithBookmarks(periodMs)
  t.teardown(() => h.close())
  await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)
  const rv = h.simulator.currentResourceVersion()
  const online = await request(`${h.url}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`, {
    headers: { 'user-agent': kubeletUA },
  })
  t.equal(online.statusCode, 200)
  const upstream = readWatch(online.body, h)
  await eventually(() => upstream.bookmarks() >= 3 || !upstream.isOpen(), 15_000, "three of the apiserver's BOOKMARKs through the hub")
  t.ok(upstream.isOpen(), `the upstream watch is open after ${upstream.bookmarks()} BOOKMARK periods`)
  await h.simulator.setFault('hang') // the link is dead but nothing tells the socket
  const onlineEnd = await upstream.ended
  t.equal(onlineEnd.error, undefined, 'the watch on the dead link ended cleanly, so the client re-watches')
  t.equal(onlineEnd.state, 'offline', 'it was ended by the hub when it declared the cloud offline')
  await eventually(() => h.hub.health.state === 'offline', 15_000, 'the hub to declare the hanging cloud offline')

  const offline = await request(`${h.url}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`, {
    headers: { 'user-agent': kubeletUA },
  })
  t.equal(offline.statusCode, 200, 'an offline watch is answered')
  t.equal(offline.headers['x-outpost-cache'], 'hit', 'from the cache')
  const cached = readWatch(offline.body, h)
  await eventually(() => cached.bookmarks() >= 3 || !cached.isOpen(), 15_000, "three of the hub's own BOOKMARKs")
  t.ok(cached.isOpen(), `the offline watch is held open (${cached.bookmarks()} BOOKMARK periods)`)
  t.same(
    cached.events.filter(e => e.type !== 'BOOKMARK'),
    [],
    'it sends nothing but BOOKMARKs',
  )
  t.ok(
    cached.events.every(e => e.object.metadata.resourceVersion === rv),
    'at the version the client has',
  )
  await h.simulator.setFault('none')
  const offlineEnd = await cached.ended
  t.equal(offlineEnd.error, undefined, 'the offline watch ended cleanly')
  t.equal(offlineEnd.state, 'online', 'once the cloud was back, so the client re-watches upstream')
})

t.test('a damaged cache journal is reported (log and metric); lists it may have shortened answer 503, the rest is served', async t => {
  const first = await startHarness()
  first.simulator.create(configMap('good-1'))
  first.simulator.create(configMap('good-2'))
  await getJson(`${first.url}/api/v1/namespaces/default/configmaps`)
  const cacheDir = first.cacheDir
  await first.close({ keepCacheDir: true })
  const journal = path.join(cacheDir, 'kubelet', 'configmaps.v1.core', 'journal.0')
  const bytes = readFileSync(journal)
  bytes[bytes.indexOf('"name":"good-2"') + 10] ^= 0xff // a flipped byte inside good-2's record, records follow it
  writeFileSync(journal, bytes)

  const second = await startHarness({ config: { cacheDir } })
  t.teardown(() => second.close())
  await goDark(second)
  // the hub serves while its cache loads: the count is set once the load is done
  const scrape = async () => (await request(`${second.hub.adminUrl}/metrics`)).body.text()
  await eventually(async () => !second.hub.store.loading && /^outpost_cache_loaded_objects [1-9]/m.test(await scrape()), 10_000, 'the load to finish')
  t.match(await scrape(), /^outpost_cache_load_errors_total 1$/m, 'the damaged journal is counted')
  const list = await getJson(`${second.url}/api/v1/namespaces/default/configmaps`)
  t.equal(list.status, 503, 'a list that may miss what came after the damage is not passed off as whole')
  t.match(list.body.message, /the hub's copy of configmaps in namespace default is incomplete, .*its cache file was damaged/)
  t.equal((await getJson(`${second.url}/api/v1/namespaces/default/configmaps/good-1`)).body.metadata.name, 'good-1', 'what came before the damage is served')
  t.equal((await getJson(`${second.url}/api/v1/namespaces/default/configmaps/good-2`)).status, 503, 'the damaged one is not said to be missing')
  t.match(
    await (await request(`${second.hub.adminUrl}/metrics`)).body.text(),
    /outpost_served_from_cache_total\{component="kubelet",verb="get",resource="configmaps"\} 2/,
  )
})

t.test('a gzip list is cached decoded and still reaches the client gzip-encoded', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (let i = 0; i < 300; i++) h.simulator.create(configMap(`big-${i}`, {}, { blob: 'x'.repeat(600) }))
  const online = await request(`${h.url}/api/v1/namespaces/default/configmaps`, { headers: { 'user-agent': kubeletUA, 'accept-encoding': 'gzip' } })
  t.equal(online.headers['content-encoding'], 'gzip', 'the client gets what the apiserver sent')
  await online.body.dump()
  await goDark(h)
  const offline = await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)
  t.equal(offline.body.items.length, 300, 'the cache holds every item of the gzip list')
})

t.test('reads waiting on a dead link are answered from the cache as soon as the hub declares the cloud offline', async t => {
  const h = await startHarness({ config: hangDetection })
  t.teardown(() => h.close())
  // each waiting read listens for the cloud's verdict: 20 of them are no "memory leak" on stderr
  const warnings: string[] = []
  const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
  process.on('warning', onWarning)
  t.teardown(() => void process.off('warning', onWarning))
  const path = `${h.url}/api/v1/namespaces/default/configmaps`
  const first = await request(path, { headers: { 'user-agent': kubeletUA } })
  t.equal(first.statusCode, 200)
  await first.body.dump()
  await h.simulator.setFault('hang') // connections accepted, nothing answered: the request would wait its full timeout (300 s)
  const started = Date.now()
  // each answer with the hub's verdict on the cloud when it came
  const waiting = Array.from({ length: 20 }, () =>
    request(path, { headers: { 'user-agent': kubeletUA } }).then(res => ({ res, cloud: h.hub.health.state, ms: Date.now() - started })),
  )
  await eventually(() => h.hub.health.state === 'offline', 15_000, 'the hub to declare the hanging cloud offline')
  const declaredMs = Date.now() - started
  // a guard, not the measure: an answer waiting for the request timeout would end the test here, not at tap's
  const guardMs = 60_000
  let guard: NodeJS.Timeout | undefined
  const answers = await Promise.race([
    Promise.all(waiting),
    new Promise<never>((_, reject) => {
      guard = setTimeout(() => reject(new Error(`reads still waiting ${guardMs} ms after the cloud was declared offline`)), guardMs)
    }),
  ]).finally(() => clearTimeout(guard))
  t.same(
    answers.map(({ res }) => [res.statusCode, res.headers['x-outpost-cache']]),
    answers.map(() => [200, 'hit']),
    'every one answered from the cache',
  )
  // the apiserver never answers: the verdict, not a timeout, let them go
  t.same(
    answers.map(({ cloud }) => cloud),
    answers.map(() => 'offline'),
    'each once the hub had declared the cloud offline, none before',
  )
  t.comment(`declared offline ${declaredMs} ms in; answered ${Math.min(...answers.map(a => a.ms))}-${Math.max(...answers.map(a => a.ms))} ms in`)
  const bodies = await Promise.all(answers.map(({ res }) => res.body.json() as Promise<{ kind?: string }>))
  t.ok(
    bodies.every(body => body.kind === 'ConfigMapList'),
    'each a ConfigMapList',
  )
  await new Promise(resolve => setImmediate(resolve)) // process warnings are emitted on the next tick
  t.same(
    warnings.filter(w => w.startsWith('MaxListenersExceededWarning')),
    [],
    'no MaxListenersExceededWarning',
  )
})
