// The admin port as an operator uses it with curl.
import t from 'tap'
import { request } from 'undici'
import { startHarness, eventually } from './helpers/hub.ts'
import { ApiServerSimulator } from './simulator/index.ts'
import { startHub } from '../lib/hub.ts'
import { hubConfig, quietLogger } from './helpers/hub.ts'

const get = async (url: string) => {
  const res = await request(url)
  return { status: res.statusCode, text: await res.body.text() }
}

t.test('healthz, readyz, /debug/cache and /debug/topology against the demo cluster', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  t.equal((await get(`${h.hub.adminUrl}/v1/healthz`)).text, 'ok\n')
  await eventually(async () => (await get(`${h.hub.adminUrl}/v1/readyz`)).status === 200, 10_000, 'ready')

  await (await request(`${h.url}/api/v1/namespaces/default/pods?labelSelector=app%3Dweb`, { headers: { 'user-agent': 'kubelet/v1.24.0' } })).body.dump()
  await (await request(`${h.url}/api/v1/namespaces/default/pods`, { headers: { 'user-agent': 'kubelet/v1.24.0' } })).body.dump()
  await (await request(`${h.url}/apis/discovery.k8s.io/v1/endpointslices`, { headers: { 'user-agent': 'kube-proxy/v1.24.0' } })).body.dump()
  const cache = JSON.parse((await get(`${h.hub.adminUrl}/debug/cache`)).text)
  const pods = cache.collections.find((c: any) => c.component === 'kubelet' && c.resource === 'pods.v1.core')
  t.match(
    pods,
    { objects: 3, listed: true, origin: 'cloud', scopes: ['namespace=default', 'namespace=default labelSelector=app=web'] },
    'kubelet’s pods, counted, with the scopes listed',
  )
  const podBytes = h.simulator
    .list('v1', 'Pod')
    .filter((p: any) => p.metadata.namespace === 'default')
    .reduce((sum: number, p: unknown) => sum + Buffer.byteLength(JSON.stringify(p)), 0)
  t.ok(pods.bytes > podBytes / 2 && pods.bytes < podBytes * 2, `bytes as stored (${pods.bytes}, the objects serialize to ${podBytes})`)
  t.notOk(
    cache.collections.some((c: any) => c.component === 'outpost'),
    'the hub keeps no copies of Nodes or Services of its own, only what the filter reads',
  )

  const topology = JSON.parse((await get(`${h.hub.adminUrl}/debug/topology`)).text)
  t.match(topology, {
    node: 'kind-worker2',
    known: true,
    pool: 'shanghai',
    poolNodes: ['kind-worker2', 'kind-worker3'],
    reflected: { resourceVersion: /^[1-9]\d*$/ },
  })
  const endpointNodes: string[] = h.simulator
    .list('discovery.k8s.io/v1', 'EndpointSlice')
    .filter((s: any) => s.metadata.labels?.['kubernetes.io/service-name'] === 'svc-ud1')
    .flatMap((s: any) => s.endpoints.map((e: any) => e.nodeName))
  const report = topology.services['default/svc-ud1']
  t.match(report, {
    annotation: 'openyurt.io/nodepool',
    endpoints: endpointNodes.length,
    applied: 'openyurt.io/nodepool',
    keys: [{ key: 'openyurt.io/nodepool' }],
  })
  t.same(
    [...report.keys[0].keeps].sort(),
    [...new Set(endpointNodes.filter(n => n === 'kind-worker2' || n === 'kind-worker3'))].sort(),
    'per key, the endpoints it keeps (those in pool shanghai), from the cached slices',
  )
  t.ok(report.keys[0].keeps.length < endpointNodes.length, 'and it keeps fewer than there are')
  t.match(topology.services['default/svc-host'], { annotation: 'kubernetes.io/hostname', keys: [{ key: 'kubernetes.io/hostname' }] })
})

t.test('metrics change with traffic', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const metrics = async () => (await get(`${h.hub.adminUrl}/metrics`)).text
  const before = await metrics()
  t.notMatch(before, /outpost_requests_total\{component="kube-proxy"/, 'no kube-proxy requests yet')

  const proxy = { 'user-agent': 'kube-proxy/v1.24.0' }
  await (await request(`${h.url}/apis/discovery.k8s.io/v1/endpointslices`, { headers: proxy })).body.dump()
  await (await request(`${h.url}/api/v1/namespaces/default/pods/nope`, { headers: proxy })).body.dump()
  const watch = await request(`${h.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=0`, { headers: proxy })

  const during = await eventually(
    async () => {
      const text = await metrics()
      return /outpost_open_watches\{component="kube-proxy",source="cache"\} 1/.test(text) && text
    },
    10_000,
    'the open watch counted',
  )
  // slices are what kube-proxy watches all day: the shared watch cache answers them
  t.match(during, /outpost_requests_total\{component="kube-proxy",verb="list",resource="endpointslices.discovery.k8s.io",code="200",source="cache"\} 1/)
  t.match(during, /outpost_requests_total\{component="kube-proxy",verb="get",resource="pods",code="404",source="cloud"\} 1/)
  t.match(during, /outpost_request_duration_seconds_count\{component="kube-proxy",verb="list",resource="endpointslices.discovery.k8s.io",source="cache"\} 1/)
  t.match(during, /outpost_cache_objects\{component="shared-json",resource="endpointslices.v1.discovery.k8s.io"\} [1-9]/)
  t.match(during, /outpost_cache_bytes\{component="shared-json",resource="endpointslices.v1.discovery.k8s.io"\} [1-9]\d+/)
  t.match(during, /outpost_upstream_watches\{resource="endpointslices.discovery.k8s.io",format="json"\} 1/, 'one upstream watch for the scope')
  t.match(during, /outpost_watch_cache_watchers\{resource="endpointslices.discovery.k8s.io",scope="all",format="json"\} 1/)
  t.match(during, /outpost_upstream_up\{server="http:\/\/127.0.0.1:\d+"\} 1/)
  t.match(during, /outpost_filter_changed_objects_total\{filter="servicetopology"\} [1-9]/, 'the topology filter rewrote slices for kube-proxy')
  t.match(during, /outpost_filter_invocations_total\{filter="servicetopology"\} [1-9]/, 'and ran on its list')
  t.match(during, /outpost_cloud_online 1/)

  watch.body.destroy()
  const after = await eventually(
    async () => {
      const text = await metrics()
      return /outpost_open_watches\{component="kube-proxy",source="cache"\} 0/.test(text) && text
    },
    10_000,
    'the watch no longer open',
  )
  t.match(after, /outpost_requests_total\{component="kube-proxy",verb="watch",resource="endpointslices.discovery.k8s.io",code="200",source="cache"\} 1/)
})

t.test('readyz says what is missing', async t => {
  const simulator = await ApiServerSimulator.start() // no Node kind-worker2 in this cluster
  const hub = await startHub(hubConfig([simulator.url]), { logger: quietLogger() })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  const ready = await get(`${hub.adminUrl}/v1/readyz`)
  t.equal(ready.status, 503)
  t.match(ready.text, /node kind-worker2 not seen yet/)
})

t.test('cached objects for curl: filtered view, Secrets redacted, traversal refused', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'topology')
  const proxy = { 'user-agent': 'kube-proxy/v1.24.0' }
  await (await request(`${h.url}/apis/discovery.k8s.io/v1/endpointslices`, { headers: proxy })).body.dump()
  // kubectl apply keeps what it applied, values included, in an annotation
  const applied = JSON.stringify({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'applied-secret', namespace: 'default' },
    data: { password: 'c2VjcmV0LXZhbHVlLTQy' },
  })
  h.simulator.create({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'applied-secret', namespace: 'default', annotations: { 'kubectl.kubernetes.io/last-applied-configuration': applied } },
    data: { password: 'c2VjcmV0LXZhbHVlLTQy' },
  })
  await (await request(`${h.url}/api/v1/namespaces/default/secrets`, { headers: { 'user-agent': 'kubelet/v1.24.0' } })).body.dump()
  const base = `${h.hub.adminUrl}/debug/cache`

  const raw = JSON.parse((await get(`${base}/kube-proxy/endpointslices.v1.discovery.k8s.io/default/svc-ud1-abcde`)).text)
  const filtered = JSON.parse((await get(`${base}/kube-proxy/endpointslices.v1.discovery.k8s.io/default/svc-ud1-abcde?filtered=true`)).text)
  t.equal(raw.endpoints.length, 4, 'the cache holds what the apiserver said')
  t.equal(filtered.endpoints.length, 2, '?filtered=true shows what kube-proxy receives')
  const all = JSON.parse((await get(`${base}/kube-proxy/endpointslices.v1.discovery.k8s.io`)).text)
  t.ok(all.items.length >= 4, 'the whole resource')

  const secretText = (await get(`${base}/kubelet/secrets.v1.core/default/app-secret`)).text
  const realData = h.simulator.get('v1', 'Secret', 'default', 'app-secret').data
  for (const value of Object.values(realData) as string[]) t.notOk(secretText.includes(value), 'no Secret value in /debug output')
  t.match(JSON.parse(secretText).data, Object.fromEntries(Object.keys(realData).map(k => [k, /redacted/])))
  const appliedText = (await get(`${base}/kubelet/secrets.v1.core/default/applied-secret`)).text
  t.notOk(appliedText.includes('c2VjcmV0LXZhbHVlLTQy'), 'nor in its last-applied-configuration')
  t.match(JSON.parse(appliedText).metadata.annotations, { 'kubectl.kubernetes.io/last-applied-configuration': /^<redacted, \d+ bytes>$/ })

  for (const path of [
    '/kubelet/..%2F..%2Fetc/passwd',
    '/..%2F..%2F/secrets.v1.core',
    '/kubelet/secrets.v1.core/default/..',
    '/kubelet/secrets.v1.core/..%2Fkube-system/x',
    '/nobody/pods.v1.core',
  ]) {
    const res = await get(base + path)
    t.equal(res.status, 404, `${path}: 404`)
    t.equal(JSON.parse(res.text).kind, 'Status', `${path}: a Status`)
  }
})

t.test('/debug/* is indented for curl and for ?pretty=true, as kube-apiserver writes JSON for people', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const read = async (path: string, userAgent?: string) => {
    const res = await request(`${h.hub.adminUrl}${path}`, { headers: userAgent ? { 'user-agent': userAgent } : {} })
    return res.body.text()
  }
  for (const path of ['/debug/cache', '/debug/topology', '/debug/filters', '/debug/pool']) {
    const asCurl = await read(path, 'curl/8.5.0')
    t.match(asCurl, /^\{\n {2}"/, `${path} for curl: indented`)
    t.ok(asCurl.endsWith('}\n'), `${path} for curl: ends with a newline, so the shell prompt starts on a line of its own`)
    const compact = await read(path, 'outpost-test/1.0')
    t.notMatch(compact, /\n/, `${path} for a program: one line`)
    t.same(JSON.parse(asCurl), JSON.parse(compact), `${path}: the same document either way`)
  }
  t.match(await read('/debug/cache?pretty=true', 'outpost-test/1.0'), /^\{\n/, '?pretty=true: indented for anyone')
  t.notMatch(await read('/debug/cache?pretty=false', 'curl/8.5.0'), /\n/, '?pretty=false: one line, curl or not')
  t.notMatch(await read('/debug/cache?pretty=yes', 'curl/8.5.0'), /\n/, "?pretty=yes is no boolean to Go's ParseBool: false, as the apiserver takes it")
})
