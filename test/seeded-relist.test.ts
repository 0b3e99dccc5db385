// A hub restarted while the cloud is away seeds its watch cache from disk; once the cloud is back
// its first list asks for a state not older than the seed, so a watch opened offline carries on
// (no 410, no new history) and is told what changed meanwhile.
import t from 'tap'
import { request } from 'undici'
import { startHarness, eventually, goDark, hubConfig, quietLogger } from './helpers/hub.ts'
import { startHub } from '../lib/hub.ts'
import { readWatch } from './helpers/watch.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

const service = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'seeded' },
  spec: { ports: [{ port: 80, protocol: 'TCP' }], clusterIP: '10.96.7.7', type: 'ClusterIP' },
})

t.test('restarted offline from disk, the first list back online asks for no older than the seed', async t => {
  const h = await startHarness({ demo: true, config: { healthIntervalMs: 100 } })
  t.teardown(() => h.close())
  h.simulator.create(service('one'))
  const path = '/api/v1/services'
  await eventually(
    async () => {
      const res = await request(`${h.url}${path}`, { headers: { 'user-agent': kubeProxy } })
      const body = (await res.body.json()) as any
      return res.statusCode === 200 && body.items.some((s: any) => s.metadata.name === 'one')
    },
    20_000,
    'the services cache',
  )

  await goDark(h)
  await h.hub.close()
  const hub = await startHub(hubConfig([h.simulator.url], { cacheDir: h.cacheDir, healthIntervalMs: 100 }), { logger: quietLogger() })
  t.teardown(() => hub.close())
  await eventually(() => hub.health.state === 'offline', 10_000, 'the restarted hub to find the cloud away')
  const listed = (await (await request(`${hub.proxyUrl}${path}`, { headers: { 'user-agent': kubeProxy } })).body.json()) as any
  const seed = listed.metadata.resourceVersion as string
  t.ok(
    listed.items.some((s: any) => s.metadata.name === 'one'),
    'served from disk',
  )
  const res = await request(`${hub.proxyUrl}${path}?watch=true&resourceVersion=${seed}`, { headers: { 'user-agent': kubeProxy } })
  t.equal(res.statusCode, 200)
  const watch = readWatch(res.body)
  t.teardown(() => res.body.destroy())

  h.simulator.create(service('two'))
  const listsBefore = h.simulator.requests.length
  await h.simulator.setFault('none')
  await eventually(() => hub.health.state === 'online', 10_000, 'the cloud back')
  await eventually(() => watch.events.some(e => e.type === 'ADDED' && e.object.metadata.name === 'two'), 15_000, 'what changed meanwhile')
  const lists = h.simulator.requests
    .slice(listsBefore)
    .filter(
      r =>
        r.url.startsWith('/api/v1/services') &&
        !r.url.includes('watch=true') &&
        String(r.headers['user-agent']).startsWith('outpost/') &&
        !String(r.headers.accept).includes('PartialObjectMetadata'),
    )
  t.ok(lists.length > 0, 'the watch cache listed (the topology context lists metadata only, unseeded: left out)')
  t.match(lists[0].url, new RegExp(`resourceVersion=${seed}&resourceVersionMatch=NotOlderThan`), 'its first list asks for no older than the seed')
  t.ok(watch.isOpen(), 'the watch opened offline carries on')
  t.notOk(
    watch.events.some(e => e.type === 'ERROR'),
    'no 410: the list was not taken as a new history',
  )
})
