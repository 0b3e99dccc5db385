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
  t.equal((await get(`${h.hub.adminUrl}/v1/healthz`)).text, 'ok')
  await eventually(async () => (await get(`${h.hub.adminUrl}/v1/readyz`)).status === 200, 10_000, 'ready')

  await (await request(`${h.url}/api/v1/namespaces/default/pods`, { headers: { 'user-agent': 'kubelet/v1.24.0' } })).body.dump()
  const cache = JSON.parse((await get(`${h.hub.adminUrl}/debug/cache`)).text)
  const pods = cache.collections.find((c: any) => c.component === 'kubelet' && c.resource === 'pods.v1.core')
  t.match(pods, { objects: 3, listed: true, origin: 'cloud' }, 'kubelet’s pods, counted')
  t.ok(cache.collections.some((c: any) => c.component === 'outpost' && c.resource === 'nodes.v1.core'), 'the hub’s own Node cache')

  const topology = JSON.parse((await get(`${h.hub.adminUrl}/debug/topology`)).text)
  t.match(topology, { node: 'kind-worker2', known: true, pool: 'shanghai', poolNodes: ['kind-worker2', 'kind-worker3'] })
  t.equal(topology.services['default/svc-ud1'], 'openyurt.io/nodepool')
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

  for (const path of ['/kubelet/..%2F..%2Fetc/passwd', '/..%2F..%2F/secrets.v1.core', '/kubelet/secrets.v1.core/default/..', '/kubelet/secrets.v1.core/..%2Fkube-system/x', '/nobody/pods.v1.core']) {
    const res = await get(base + path)
    t.equal(res.status, 404, `${path}: 404`)
    t.equal(JSON.parse(res.text).kind, 'Status', `${path}: a Status`)
  }
})
