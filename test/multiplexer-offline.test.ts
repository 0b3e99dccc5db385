// Disk stays one truth (issue 26): what the shared watch caches hold is on disk once per format,
// whatever the clients' scopes, and a selector that worked online answers the same offline, from
// the running hub's memory and from a hub restarted with the cloud away (from disk alone), field
// selectors included; one the apiserver would refuse is its 400 offline too.
import t from 'tap'
import { request } from 'undici'
import { startHarness, eventually, goDark, hubConfig, quietLogger } from './helpers/hub.ts'
import { startHub } from '../lib/hub.ts'
import { parseScope } from '../lib/cache/scope.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'

const service = (namespace: string, name: string, labels: Record<string, string>, spec: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace, labels },
  spec: { ports: [{ port: 80, protocol: 'TCP' }], ...spec },
})

const queries = [
  '/api/v1/services?labelSelector=tier%3Dweb',
  '/api/v1/services?labelSelector=tier%20notin%20(web)',
  '/api/v1/services?labelSelector=!tier',
  '/api/v1/namespaces/off-a/services?labelSelector=env',
  '/api/v1/services?fieldSelector=spec.type%3DNodePort',
  '/api/v1/services?fieldSelector=spec.clusterIP%3DNone',
  '/api/v1/services?fieldSelector=metadata.namespace%3Doff-b,spec.type!%3DNodePort',
]

async function names(base: string, pathAndQuery: string): Promise<{ status: number; names: string[]; cache?: string }> {
  const sep = pathAndQuery.includes('?') ? '&' : '?'
  const res = await request(`${base}${pathAndQuery}${sep}resourceVersion=0`, { headers: { 'user-agent': kubeProxy, accept: 'application/json' } })
  const body = (await res.body.json()) as any
  return {
    status: res.statusCode,
    names: (body.items ?? []).map((o: any) => `${o.metadata.namespace}/${o.metadata.name}`),
    cache: res.headers['x-outpost-cache'] as string | undefined,
  }
}

t.test('selectors answered offline as online, from memory and after a restart from disk', async t => {
  const h = await startHarness({ demo: true, config: { healthIntervalMs: 100, nodeName: 'kind-worker2' } })
  t.teardown(() => h.close())
  h.simulator.create(service('off-a', 'web', { tier: 'web', env: 'prod' }))
  h.simulator.create(service('off-a', 'db', { tier: 'db', env: 'prod' }, { clusterIP: 'None' }))
  h.simulator.create(service('off-b', 'edge', { tier: 'web' }, { type: 'NodePort' }))
  h.simulator.create(service('off-b', 'plain', {}))
  await eventually(async () => (await names(h.url, queries[0])).status === 200, 20_000, 'the services cache to answer')

  const online = new Map<string, string[]>()
  for (const q of queries) {
    const got = await names(h.url, q)
    t.equal(got.status, 200, `online: ${q}`)
    online.set(q, got.names)
  }
  t.ok(online.get(queries[4])!.includes('off-b/edge'), 'the NodePort service is selected by its type')
  t.ok(online.get(queries[5])!.includes('off-a/db'), 'the headless one by its clusterIP')

  // one copy on disk, under the shared collection, whatever the clients' scopes
  const candidates = await h.hub.store.candidates({ component: 'kube-proxy', group: '', version: 'v1', resource: 'services' })
  t.same(
    candidates.map(c => c.key.component),
    ['shared-json'],
    'the services are kept once, by the shared cache, not again for kube-proxy',
  )
  const held = await h.hub.store.list(candidates[0].key, parseScope({ namespace: '', labelSelector: '', fieldSelector: 'spec.type=NodePort' }))
  t.ok(
    held?.items.some(o => o.name === 'edge'),
    'the store answers the field selector from the fields kept with each object',
  )

  await goDark(h)
  for (const q of queries) {
    const got = await names(h.url, q)
    t.same([got.status, got.names, got.cache], [200, online.get(q), 'hit'], `offline, from memory: ${q}`)
  }
  const refused = await request(`${h.url}/api/v1/services?fieldSelector=spec.foo%3Dbar&resourceVersion=0`, { headers: { 'user-agent': kubeProxy } })
  t.equal(refused.statusCode, 400, 'a field the apiserver cannot select on is its 400 offline too')
  t.match(await refused.body.json(), { kind: 'Status', reason: 'BadRequest', message: 'field label not supported: spec.foo' })

  await h.hub.close()
  const hub = await startHub(hubConfig([h.simulator.url], { nodeName: 'kind-worker2', cacheDir: h.cacheDir }), { logger: quietLogger() })
  t.teardown(() => hub.close())
  await eventually(() => hub.health.state === 'offline', 10_000, 'the restarted hub to find the cloud away')
  for (const q of queries) {
    const got = await names(hub.proxyUrl, q)
    t.same([got.status, got.names], [200, online.get(q)], `restarted offline, from disk: ${q}`)
  }
  const refusedAfterRestart = await request(`${hub.proxyUrl}/api/v1/services?fieldSelector=spec.bogus%3Dx`, { headers: { 'user-agent': kubelet } })
  t.equal(refusedAfterRestart.statusCode, 400, 'and refused the same way after the restart')
  await refusedAfterRestart.body.arrayBuffer()
})
