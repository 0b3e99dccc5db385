// The read contract's consistent reads, through a hub whose shared watch caches serve the reads: a
// list or a watch's initial state with no resourceVersion shows every write acknowledged before it
// began, made through the hub or at the apiserver, as kube-apiserver's own reads do; what the hub
// cannot prove fresh it relays, never a state from a cache that may be behind.
import t from 'tap'
import type { Test } from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { startHarness, eventually } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { readWatch } from './helpers/watch.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

const service = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default', labels: { app: 'consistent' } },
  spec: { ports: [{ port: 80, protocol: 'TCP' }] },
})

/** Requests the hub's watch caches sent to prove a consistent read (a limit=1 list). */
const probes = (h: Harness) =>
  h.simulator.countRequests(r => r.verb === 'list' && r.query.limit === '1' && String(r.headers['user-agent']).startsWith('outpost/'))

async function consistentReads(h: Harness): Promise<Record<string, number>> {
  const metric = await h.hub.metrics.registry.getSingleMetric('outpost_consistent_reads_total')!.get()
  const out: Record<string, number> = {}
  for (const v of metric.values) out[String(v.labels.outcome)] = (out[String(v.labels.outcome)] ?? 0) + v.value
  return out
}

/** kube-proxy's JSON watch of the default namespace's Services through the hub. */
async function servicesWatch(t: Test, h: Harness, query: string) {
  const res = await request(`${h.url}/api/v1/namespaces/default/services?watch=true&${query}`, { headers: { 'user-agent': kubeProxy } })
  t.equal(res.statusCode, 200, `a watch with ${query}`)
  return { ...readWatch(res.body), stop: () => res.body.destroy() }
}

/** Creates a Service at the apiserver and waits until `watch` has told of it; the watch then ends. */
async function createAndSee(h: Harness, watch: Awaited<ReturnType<typeof servicesWatch>>, name: string): Promise<void> {
  h.simulator.create(service(name))
  await eventually(() => watch.events.some(e => e.object?.metadata?.name === name), 10_000, `the event of ${name}`)
  watch.stop()
}

t.test('a consistent list shows every write made before it, through the hub or at the apiserver', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const core = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.CoreV1Api)
  await core.listNamespacedService({ namespace: 'default' }) // the watch cache starts and syncs
  const rounds = 25
  const missed: string[] = []
  for (let i = 0; i < rounds; i++) {
    const through = `through-${i}`
    await core.createNamespacedService({ namespace: 'default', body: service(through) as k8s.V1Service })
    const afterOwnWrite = await core.listNamespacedService({ namespace: 'default' })
    if (!afterOwnWrite.items.some(s => s.metadata?.name === through)) missed.push(`${through}@${afterOwnWrite.metadata?.resourceVersion}`)
    const direct = `direct-${i}`
    h.simulator.create(service(direct))
    const afterTheirs = await core.listNamespacedService({ namespace: 'default' })
    if (!afterTheirs.items.some(s => s.metadata?.name === direct)) missed.push(`${direct}@${afterTheirs.metadata?.resourceVersion}`)
  }
  t.same(missed, [], `none of ${2 * rounds} lists missed the write before it`)
  const outcomes = await consistentReads(h)
  t.equal(
    (outcomes.cache ?? 0) + (outcomes.relayed ?? 0),
    2 * rounds + 1,
    'each was a consistent read of the watch cache, counted as answered from it or relayed',
  )
  t.ok(probes(h) > 0, "proven with the apiserver's revision (limit=1 lists)")
})

t.test('WatchList: the initial state shows a write made just before, and its end BOOKMARK is not older than the write', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const core = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.CoreV1Api)
  await core.listNamespacedService({ namespace: 'default' })
  for (let i = 0; i < 10; i++) {
    const made = h.simulator.create(service(`watchlist-${i}`))
    const res = await request(
      `${h.url}/api/v1/namespaces/default/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`,
      {
        headers: { 'user-agent': kubeProxy },
      },
    )
    const watch = readWatch(res.body)
    const end = await eventually(
      () => watch.events.find(e => e.type === 'BOOKMARK' && e.object.metadata.annotations?.['k8s.io/initial-events-end'] === 'true'),
      10_000,
      'the initial-events-end BOOKMARK',
    )
    res.body.destroy()
    const initial = watch.events.slice(0, watch.events.indexOf(end))
    t.ok(
      initial.some(e => e.type === 'ADDED' && e.object.metadata.name === `watchlist-${i}`),
      `round ${i}: the initial state holds the object written before the watch`,
    )
    t.ok(
      BigInt(end.object.metadata.resourceVersion) >= BigInt(made.metadata.resourceVersion),
      `round ${i}: the BOOKMARK's version is not older than the write's`,
    )
  }
})

t.test("a consistent list while the cache's upstream watch is stalled is relayed, not answered stale", async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const core = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.CoreV1Api)
  await core.listNamespacedService({ namespace: 'default' })
  // the cache's watch is open once an object made at the apiserver reaches a resourceVersion=0 list (the cache's own state)
  h.simulator.create(service('before-the-stall'))
  await eventually(
    async () => {
      const res = await request(`${h.url}/api/v1/namespaces/default/services?resourceVersion=0`, { headers: { 'user-agent': kubeProxy } })
      return ((await res.body.json()) as any).items.some((s: any) => s.metadata.name === 'before-the-stall')
    },
    10_000,
    "the cache's watch",
  )
  h.simulator.stallWatches() // the apiserver answers, the cache's watch tells it nothing more
  h.simulator.create(service('after-the-stall'))
  const relayedBefore = (await consistentReads(h)).relayed ?? 0
  const list = await core.listNamespacedService({ namespace: 'default' })
  t.ok(
    list.items.some(s => s.metadata?.name === 'after-the-stall'),
    'the list shows the write',
  )
  t.equal((await consistentReads(h)).relayed ?? 0, relayedBefore + 1, 'it was relayed')
  const anyState = async (userAgent: string) => {
    const res = await request(`${h.url}/api/v1/namespaces/default/services?resourceVersion=0`, { headers: { 'user-agent': userAgent } })
    return ((await res.body.json()) as any).items.some((s: any) => s.metadata.name === 'after-the-stall')
  }
  t.ok(await anyState(kubeProxy), 'a resourceVersion=0 list by the same client is not older than what it was given (relayed too)')
  t.notOk(await anyState('coredns/1.9.3'), "another client's is the cache's to answer: any state will do")
})

t.test('sendInitialEvents=false with no resourceVersion starts at the most recent version, with no initial state', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const core = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.CoreV1Api)
  h.simulator.create(service('already-there'))
  await core.listNamespacedService({ namespace: 'default' })
  const watch = await servicesWatch(t, h, 'sendInitialEvents=false&allowWatchBookmarks=true')
  await createAndSee(h, watch, 'made-after')
  t.same(
    watch.events.filter(e => e.type === 'ADDED').map(e => e.object.metadata.name),
    ['made-after'],
    'only what happened after the watch began',
  )
})

t.test("a watch from a version the apiserver has and the cache has not reached is the cache's; a made-up one is the apiserver's", async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const core = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.CoreV1Api)
  await core.listNamespacedService({ namespace: 'default' })
  // another resource's write moves etcd's revision on with no event for Services
  h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'moves-etcd-on', namespace: 'default' }, data: {} })
  const real = h.simulator.currentResourceVersion()
  const relayedWatches = () =>
    h.simulator.countRequests(r => r.watch && r.path.endsWith('/services') && String(r.headers['user-agent']).startsWith('kube-proxy'))
  const watch = await servicesWatch(t, h, `allowWatchBookmarks=true&resourceVersion=${real}`)
  await createAndSee(h, watch, 'after-the-version')
  t.equal(relayedWatches(), 0, 'served from the watch cache')
  t.ok(
    watch.events.every(e => BigInt(e.object.metadata.resourceVersion) > BigInt(real)),
    'nothing at or before the version it watches from',
  )

  const future = (BigInt(real) + 1_000_000n).toString()
  const madeUp = await request(`${h.url}/api/v1/namespaces/default/services?watch=true&resourceVersion=${future}&timeoutSeconds=1`, {
    headers: { 'user-agent': kubeProxy },
  })
  await madeUp.body.dump()
  t.equal(relayedWatches(), 1, 'a version the apiserver has not reached is relayed, for the apiserver to answer')
})
