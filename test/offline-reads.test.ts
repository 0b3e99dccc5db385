// Offline reads through a running hub, for what clients do beyond a plain list: paging with
// limit/continue, WatchList (sendInitialEvents), tokens the hub cannot check, formats it cannot
// give; and a hub whose own code throws still answers.
import t from 'tap'
import { request } from 'undici'
import { startHarness, goDark, comeBack } from './helpers/hub.ts'
import { fixtureBytes, fixtureJson } from './helpers/fixtures.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { assembleList, decodeUnknown, decodeWatchEvent, encodeUnknown, objectMeta, splitList } from '../lib/codec/protobuf.ts'
import { createMetrics } from '../lib/observe/metrics.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { pipeline } from 'node:stream'

const kubeletUA = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const kubeProxyUA = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

const configMap = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default' }, data: { v: name } })

async function getJson(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { headers: { 'user-agent': kubeletUA, ...headers } })
  const text = await res.body.text()
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined, headers: res.headers }
}

/** The first `count` frames of a watch, then the connection is dropped. */
async function watchFrames(
  url: string,
  headers: Record<string, string>,
  framing: 'json' | 'protobuf',
  count: number,
): Promise<{ status: number; frames: Buffer[] }> {
  const res = await request(url, { headers })
  const frames: Buffer[] = []
  if (res.statusCode !== 200) {
    await res.body.dump()
    return { status: res.statusCode, frames }
  }
  for await (const frame of pipeline(res.body, new WatchFrameSplitter(framing), () => {})) {
    frames.push(frame as Buffer)
    if (frames.length >= count) break
  }
  res.body.destroy()
  return { status: res.statusCode, frames }
}

t.test('offline paging: limit and continue as the apiserver pages, tokens included', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (let i = 0; i < 5; i++) h.simulator.create(configMap(`cm-${i}`))
  const base = `${h.url}/api/v1/namespaces/default/configmaps`
  const online = await getJson(`${base}?limit=2`)
  t.equal(online.status, 200)
  const cloudToken = online.body.metadata.continue
  // the client reads the rest of the list so the whole scope is cached
  let token = cloudToken
  while (token) token = (await getJson(`${base}?limit=2&continue=${encodeURIComponent(token)}`)).body.metadata.continue
  await goDark(h)

  const first = await getJson(`${base}?limit=2`)
  t.equal(first.status, 200)
  t.same(
    first.body.items.map((i: any) => i.metadata.name),
    ['cm-0', 'cm-1'],
    'a page, not the whole list',
  )
  t.equal(first.body.metadata.remainingItemCount, 3)
  t.ok(first.body.metadata.continue, 'with a token for the rest')
  const names: string[] = first.body.items.map((i: any) => i.metadata.name)
  for (let next = first.body.metadata.continue; next;) {
    const page = await getJson(`${base}?limit=2&continue=${encodeURIComponent(next)}`)
    t.equal(page.status, 200)
    names.push(...page.body.items.map((i: any) => i.metadata.name))
    next = page.body.metadata.continue
  }
  t.same(names, ['cm-0', 'cm-1', 'cm-2', 'cm-3', 'cm-4'], 'the pages join into the list, each object once')
  const resumed = await getJson(`${base}?limit=2&continue=${encodeURIComponent(cloudToken)}`)
  t.same(
    resumed.body.items.map((i: any) => i.metadata.name),
    ['cm-2', 'cm-3'],
    "a token the cloud issued goes on from the cloud's page",
  )
  const bad = await getJson(`${base}?limit=2&continue=bm90LWEtdG9rZW4`)
  t.equal(bad.status, 400)
  t.match(bad.body, { kind: 'Status', reason: 'BadRequest', message: /^invalid continue token/ })
  const watchCache = await getJson(`${base}?limit=2&resourceVersion=0`)
  t.equal(watchCache.body.items.length, 5, 'resourceVersion=0 reads the watch cache, which ignores limit')
})

t.test('offline WatchList: the cached state as ADDED events, then the BOOKMARK that ends them (JSON)', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (let i = 0; i < 3; i++) h.simulator.create(configMap(`wl-${i}`))
  const list = await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)
  await goDark(h)
  const url = `${h.url}/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`
  const { status, frames } = await watchFrames(url, { 'user-agent': kubeletUA }, 'json', 4)
  t.equal(status, 200)
  const events = frames.map(f => JSON.parse(f.toString()))
  t.same(
    events.slice(0, 3).map(e => [e.type, e.object.metadata.name]),
    [
      ['ADDED', 'wl-0'],
      ['ADDED', 'wl-1'],
      ['ADDED', 'wl-2'],
    ],
  )
  t.equal(events[3].type, 'BOOKMARK')
  t.same(events[3].object.metadata.annotations, { 'k8s.io/initial-events-end': 'true' }, 'a client-go reflector is in sync after this')
  t.equal(events[3].object.metadata.resourceVersion, list.body.metadata.resourceVersion)
})

t.test("offline WatchList in protobuf, from kube-proxy's recorded slices", async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const listInfo = classify('GET', '/apis/discovery.k8s.io/v1/endpointslices', kubeProxyUA)
  await h.hub.recorder.recordListPage(listInfo, 'protobuf', fixtureBytes('list-endpointslices.pb'))
  const recorded = splitList(decodeUnknown(fixtureBytes('list-endpointslices.pb')).raw)
  await goDark(h)
  const url = `${h.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`
  // kube-proxy is filtered by service topology; the events are counted, not compared byte for byte
  const { status, frames } = await watchFrames(
    url,
    { 'user-agent': kubeProxyUA, accept: 'application/vnd.kubernetes.protobuf, */*' },
    'protobuf',
    recorded.items.length + 1,
  )
  t.equal(status, 200)
  const events = frames.map(f => decodeWatchEvent(f))
  t.same(
    events.map(e => e.type),
    [...recorded.items.map(() => 'ADDED'), 'BOOKMARK'],
  )
  const bookmark = objectMeta(Buffer.from(decodeUnknown(events[events.length - 1].object).raw))
  t.equal(bookmark.annotations['k8s.io/initial-events-end'], 'true')
  t.equal(bookmark.resourceVersion, recorded.resourceVersion)
})

t.test('offline, a request with its own bearer token is never answered from the cache', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  h.simulator.create(configMap('secret-ish'))
  t.equal((await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)).status, 200, 'kubelet lists, as the node')
  const withToken = await getJson(`${h.url}/api/v1/namespaces/default/configmaps`, { authorization: 'Bearer made-up' })
  t.equal(withToken.status, 200, 'online, a token goes to the apiserver')
  await goDark(h)
  const refused = await getJson(`${h.url}/api/v1/namespaces/default/configmaps`, { authorization: 'Bearer made-up' })
  t.equal(refused.status, 503)
  t.match(refused.body, { kind: 'Status', reason: 'ServiceUnavailable', message: /its own credentials/ })
  t.equal((await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)).status, 200, 'the node itself is still answered')
  t.equal((await getJson(`${h.url}/api/v1/namespaces/default/configmaps/secret-ish`, { authorization: 'Bearer made-up' })).status, 503)
})

t.test("online, a token-bearing client's answers are not recorded for the node", async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  h.simulator.create(configMap('only-for-the-token'))
  t.equal((await getJson(`${h.url}/api/v1/namespaces/default/configmaps`, { authorization: 'Bearer made-up' })).status, 200)
  await goDark(h)
  const asNode = await getJson(`${h.url}/api/v1/namespaces/default/configmaps`)
  t.equal(asNode.status, 503, 'nothing the token read stands for what the node may read')
})

t.test(
  'JSON from what kube-proxy cached in protobuf: a watch of a kind the hub knows is translated; one it does not know is refused, not sent empty',
  async t => {
    const h = await startHarness()
    t.teardown(() => h.close())
    await h.hub.recorder.recordListPage(
      classify('GET', '/apis/discovery.k8s.io/v1/endpointslices', kubeProxyUA),
      'protobuf',
      fixtureBytes('list-endpointslices.pb'),
    )
    // a kind the hub does not know field by field, cached as protobuf (an object with ObjectMeta only)
    const deployment = Buffer.concat([Buffer.from([0x0a, 0x0d, 0x0a, 0x03]), Buffer.from('web'), Buffer.from([0x1a, 0x06]), Buffer.from('prod-a')])
    const deployments = encodeUnknown({
      apiVersion: 'apps/v1',
      kind: 'DeploymentList',
      raw: assembleList({ resourceVersion: '7', continue: '', items: [deployment] }),
    })
    await h.hub.recorder.recordListPage(classify('GET', '/apis/apps/v1/deployments', kubeProxyUA), 'protobuf', deployments)
    await goDark(h)
    const recorded = splitList(decodeUnknown(fixtureBytes('list-endpointslices.pb')).raw)
    const { status, frames } = await watchFrames(
      `${h.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=0`,
      { 'user-agent': 'kubectl/v1.32.0', accept: 'application/json' },
      'json',
      recorded.items.length,
    )
    t.equal(status, 200)
    const recordedJson = fixtureJson('list-endpointslices.json').items.map((i: any) => i.metadata.name)
    t.same(
      frames.map(f => JSON.parse(f.toString()).object.metadata.name),
      recordedJson,
      "kube-proxy's protobuf slices, as JSON, to kubectl",
    )
    const refused = await getJson(`${h.url}/apis/apps/v1/deployments?watch=true&resourceVersion=0`, {
      'user-agent': 'kubectl/v1.32.0',
      accept: 'application/json',
    })
    t.equal(refused.status, 503)
    t.match(refused.body.message, /cached as protobuf.*kube-proxy holds them, see \/debug\/cache\/kube-proxy\/deployments/)
    await comeBack(h)
  },
)

t.test('metric labels from User-Agents and paths are bounded', async t => {
  const metrics = createMetrics()
  for (let i = 0; i < 2_000; i++) {
    metrics.requestDone(classify('GET', `/api/v1/made-up-${i}`, `client-${i}/1.0`), 404, 'cloud', 0.001)
  }
  const text = await metrics.registry.metrics()
  const series = text.split('\n').filter(l => l.startsWith('outpost_requests_total{'))
  t.ok(series.length <= 300, `${series.length} series, not 2000`)
  t.match(text, /component="other"/)
  t.match(text, /resource="other"/)
})
