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
