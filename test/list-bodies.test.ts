// Whole lists from the shared watch caches kept as their bytes (lib/watch/list-bodies.ts): written
// again only while nothing they were made from has changed. A kept list that outlived a write, or
// a change to what the filters read, would show a client an old state as new: these tests change
// each input and read the list again.
import t from 'tap'
import { request } from 'undici'
import { ListBodies } from '../lib/watch/list-bodies.ts'
import { startHarness, eventually } from './helpers/hub.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'
const slices = '/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0'

t.test('a kept body is given only for the stamp it was made at, within its bytes and while it is read', async t => {
  const bodies = new ListBodies({ maxBytes: 1_000, idleMs: 100 })
  const filters = {}
  const stamp = { generation: 1, resourceVersion: 10n, filters }
  let replays = 0
  bodies.set('a', stamp, Buffer.alloc(400), () => replays++)
  t.equal(bodies.get('a', { ...stamp })?.length, 400, 'the same state: the kept bytes')
  t.equal(replays, 1, "and the filters' reports told again")
  t.equal(bodies.get('a', { ...stamp, generation: 2 }), undefined, 'an object changed: not given')
  t.equal(bodies.get('a', stamp), undefined, 'and no longer kept')
  bodies.set('a', stamp, Buffer.alloc(400), () => {})
  t.equal(bodies.get('a', { ...stamp, resourceVersion: 11n }), undefined, 'a BOOKMARK moved the version: not given')
  bodies.set('a', stamp, Buffer.alloc(400), () => {})
  t.equal(bodies.get('a', { ...stamp, filters: {} }), undefined, 'what the filters read changed: not given')
  for (const key of ['b', 'c', 'd']) bodies.set(key, stamp, Buffer.alloc(400), () => {})
  t.ok(bodies.bytes <= 1_000, `at most the bytes allowed are kept (${bodies.bytes})`)
  await new Promise(resolve => setTimeout(resolve, 300))
  t.equal(bodies.bytes, 0, 'nothing kept once no list has been read for a while')
})

/** A JSON list through the hub, as `userAgent`: its bytes and parsed body. */
async function list(url: string, userAgent: string): Promise<{ bytes: Buffer; body: any }> {
  const res = await request(`${url}${slices}`, { headers: { 'user-agent': userAgent, accept: 'application/json' } })
  const bytes = Buffer.from(await res.body.arrayBuffer())
  if (res.statusCode !== 200) throw new Error(`${res.statusCode}: ${bytes}`)
  return { bytes, body: JSON.parse(bytes.toString()) }
}

const endpointsOf = (body: any, name: string): string =>
  (body.items.find((s: any) => s.metadata.name === name)?.endpoints ?? [])
    .flatMap((e: any) => e.addresses)
    .sort()
    .join(',')

t.test("a kept list follows every write, and kube-proxy's follows what its filter reads", async t => {
  const h = await startHarness({ demo: true, simulator: { bookmarkIntervalMs: 600_000 } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.annotationOf('default', 'svc-ud1') !== undefined, 10_000, 'the topology context')
  await eventually(async () => (await list(h.url, kubeProxy).catch(() => undefined)) !== undefined, 10_000, 'the shared cache')

  const first = await list(h.url, kubeProxy)
  const again = await list(h.url, kubeProxy)
  t.ok(
    again.bytes.equals(first.bytes) || BigInt(again.body.metadata.resourceVersion) > BigInt(first.body.metadata.resourceVersion),
    'nothing changed: the same list',
  )
  t.equal(endpointsOf(first.body, 'svc-ud1-abcde'), '10.244.1.3,10.244.3.2', 'svc-ud1 (openyurt.io/nodepool): the shanghai endpoints only')

  // what the filter reads changes, and no slice is written
  h.simulator.patch('v1', 'Service', 'default', 'svc-ud1', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'kubernetes.io/hostname' } } })
  await eventually(async () => endpointsOf((await list(h.url, kubeProxy)).body, 'svc-ud1-abcde') === '10.244.1.3', 10_000, 'the annotation change in the list')
  t.pass("kube-proxy's list follows the annotation change")
  t.equal(endpointsOf((await list(h.url, kubelet)).body, 'svc-ud1-abcde').split(',').length, 4, 'an unfiltered component still gets every endpoint')

  // a write to a slice: the next lists show it, and versions never go back
  const before = await list(h.url, kubelet)
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-abcde', { metadata: { labels: { marker: 'written' } } })
  const written = h.simulator.get('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-abcde').metadata.resourceVersion
  let seen = BigInt(before.body.metadata.resourceVersion)
  await eventually(
    async () => {
      const now = (await list(h.url, kubelet)).body
      const version = BigInt(now.metadata.resourceVersion)
      if (version < seen) throw new Error(`the list's version went back from ${seen} to ${version}`)
      seen = version
      return now.items.find((s: any) => s.metadata.name === 'svc-ud1-abcde')?.metadata.resourceVersion === written
    },
    10_000,
    'the write in the list',
  )
  t.pass('the written slice is in the next lists, and no list went back')
})

t.test('each kept list a filter answers counts as one more run of it', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'the topology context')
  await eventually(async () => (await list(h.url, kubeProxy).catch(() => undefined)) !== undefined, 10_000, 'the shared cache')
  const ran = async () => {
    const debug = (await (await request(`${h.hub.adminUrl}/debug/filters`)).body.json()) as { filters: { name: string; ran: number }[] }
    return debug.filters.find(f => f.name === 'servicetopology')!.ran
  }
  const start = await ran()
  const { body } = await list(h.url, kubeProxy)
  const once = (await ran()) - start
  t.ok(once >= body.items.length, `the first list ran the filter on each slice (${once})`)
  await list(h.url, kubeProxy)
  await list(h.url, kubeProxy)
  t.equal((await ran()) - start, 3 * once, 'and each list after it as many times again')
})
