// A pool's leader SIGKILLed in the middle of a burst of EndpointSlice changes, three hubs as
// `outpost` processes, as on nodes: on every follower, kube-proxy's and coredns's views (a
// client-node informer in JSON, a list+watch in protobuf, each) end equal to the apiserver's, with
// no list after the kill and no event twice or out of order; another hub takes the Lease (how soon:
// the bench's row pool.resync; lease-election.test.ts times it on a clock of its own) and the last
// one follows it.
import t from 'tap'
import { eventually } from './helpers/hub.ts'
import { seededRandom } from './helpers/random.ts'
import {
  holds,
  metric,
  metricSamples,
  poolState,
  poolTimings,
  protobufReflector,
  settledLeader,
  sliceInformer,
  sliceVersions,
  spawnPoolHub,
  startPoolCluster,
} from './helpers/pool.ts'
import type { LocalClient, PoolHubProcess } from './helpers/pool.ts'

const kubeProxy = 'kube-proxy/v1.33.0 (linux/amd64) kubernetes/abc1234'
const coredns = 'coredns/1.11.3 (linux/amd64) kubernetes/abc1234'
const proxySelector = '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name'
const slicesPath = '/apis/discovery.k8s.io/v1/endpointslices'
const ns = 'burst'

const slice = (name: string, ips: string[]) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  endpoints: ips.map(ip => ({ addresses: [ip], conditions: { ready: true } })),
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})

t.test('the leader SIGKILLed mid-burst: every follower ends equal to the apiserver with no list, and another hub leads', async t => {
  const t0 = Date.now()
  const phase = (what: string) => t.comment(`${what} at ${Date.now() - t0} ms`)
  const cluster = await startPoolCluster({ edge: ['n1', 'n2', 'n3'] }, { bookmarkIntervalMs: 1_000 })
  t.teardown(() => cluster.close())
  const { simulator } = cluster
  simulator.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })
  simulator.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: ns }, spec: { ports: [{ port: 80 }] } })
  const random = seededRandom(27)
  const ip = () => `10.2.${Math.floor(random() * 250)}.${Math.floor(random() * 250) + 1}`
  let made = 0
  for (; made < 20; made++) simulator.create(slice(`web-${made}`, [ip()]))

  const started = await Promise.allSettled(cluster.nodes.map(n => spawnPoolHub(n)))
  const hubs = started.flatMap(s => (s.status === 'fulfilled' ? [s.value] : []))
  t.teardown(() => Promise.all(hubs.map(h => h.kill())))
  for (const s of started) if (s.status === 'rejected') throw s.reason
  t.teardown(() => {
    if (t.passing()) return
    for (const h of hubs) t.comment(`${h.name} said:\n${h.logs()}`)
  })
  phase('hubs listening')
  const byName = (name: string) => hubs.find(h => h.name === name)!

  const leader = await settledLeader(
    hubs.map(h => h.adminUrl),
    45_000,
  )
  const followers = hubs.filter(h => h.name !== leader)
  phase(`${leader} leads`)
  const clients = new Map<PoolHubProcess, LocalClient[]>()
  t.teardown(() => [...clients.values()].flat().forEach(c => c.stop()))
  for (const f of followers) {
    clients.set(f, [
      await sliceInformer(f.proxyUrl, kubeProxy, proxySelector),
      await sliceInformer(f.proxyUrl, coredns),
      await protobufReflector(f.proxyUrl, slicesPath, kubeProxy, proxySelector),
      await protobufReflector(f.proxyUrl, slicesPath, coredns),
    ])
  }
  const all = () => [...clients.entries()].flatMap(([f, cs]) => cs.map(c => ({ f, c })))
  for (const f of followers) {
    await eventually(
      async () => {
        const resources = (await poolState(f.adminUrl)).resources.filter((r: any) => r.resource.includes('endpointslices'))
        return resources.length === 2 && resources.every((r: any) => r.from === 'leader')
      },
      15_000,
      `${f.name}'s EndpointSlice caches (JSON and protobuf) reading from ${leader}`,
    )
  }
  await eventually(() => all().every(({ c }) => holds(c, sliceVersions(simulator, ns), ns)), 15_000, 'every client to hold the slices')
  phase('clients synced')
  const before = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-edge')
  t.equal(before.spec.holderIdentity, leader, `the Lease names ${leader}`)

  // the burst: creates, updates and deletes every 20 ms; the leader dies a quarter of the way in
  const live = new Set([...Array(made).keys()].map(i => `web-${i}`))
  const pick = () => [...live][Math.floor(random() * live.size)]
  let killedAt = 0
  let listsAtKill: number[] = []
  const burst = (async () => {
    for (let i = 0; i < 300; i++) {
      const roll = random()
      if (roll < 0.25 || live.size < 10) {
        const name = `web-${made++}`
        simulator.create(slice(name, [ip()]))
        live.add(name)
      } else if (roll < 0.4) {
        const name = pick()
        simulator.remove('discovery.k8s.io/v1', 'EndpointSlice', ns, name)
        live.delete(name)
      } else {
        simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', ns, pick(), { endpoints: [{ addresses: [ip()], conditions: { ready: random() < 0.8 } }] })
      }
      if (i === 75) {
        listsAtKill = all().map(({ c }) => c.lists())
        await byName(leader).kill()
        killedAt = Date.now()
        simulator.create(slice('after-kill', ['10.3.0.1']))
      }
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  })()

  // no hub can lead before the dead leader's term runs out: a change the followers' clients see
  // before another hub holds the Lease came to them from the cloud
  const holder = () => simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-edge')?.spec?.holderIdentity
  let [seenAt, takenAt] = [0, 0]
  await eventually(
    () => {
      if (!seenAt && killedAt && all().every(({ c }) => c.versions().has(`${ns}/after-kill`))) seenAt = Date.now()
      if (!takenAt && killedAt && holder() !== leader && followers.some(f => f.name === holder())) takenAt = Date.now()
      return seenAt && takenAt
    },
    30_000,
    "the followers' clients to see a change made after the kill, and another hub to take the Lease",
  )
  t.comment(
    `${holder()} took the Lease ${takenAt - killedAt} ms after the kill (lease ${poolTimings.poolLeaseDurationMs} ms, retry ${poolTimings.poolRetryPeriodMs} ms)`,
  )
  t.ok(seenAt < takenAt, `every follower's clients saw a change made after the kill ${seenAt - killedAt} ms after it, before another hub led`)
  await burst
  phase('burst done')

  const expected = sliceVersions(simulator, ns)
  await eventually(
    () => all().every(({ c }) => holds(c, sliceVersions(simulator, ns), ns)),
    20_000,
    "every follower's clients to end equal to the apiserver",
  ).catch(error => {
    for (const { f, c } of all()) if (!holds(c, expected, ns)) t.comment(`${f.name} ${c.name} holds ${c.versions().size} of ${expected.size}`)
    throw error
  })
  phase('clients equal to the apiserver')
  all().forEach(({ f, c }, i) => {
    t.equal(c.lists(), listsAtKill[i], `${f.name} ${c.name}: no list after the kill`)
    t.equal(c.lists(), 1, `${f.name} ${c.name}: listed once, at its start`)
    t.same(c.problems, [], `${f.name} ${c.name}: no event twice or out of order`)
  })

  const newLeader = holder()
  const survivors = followers.map(f => f.adminUrl)
  t.equal(await settledLeader(survivors, 15_000), newLeader, `the pool settles on ${newLeader}, followed by the other`)
  const after = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-edge')
  t.equal(after.spec.leaseTransitions, before.spec.leaseTransitions + 1, 'one transition: one takeover, no flapping')
  for (const f of followers) {
    const state = await poolState(f.adminUrl)
    t.ok(state.fallbacks >= 1, `${f.name} fell back to the cloud when its leader died (${state.fallbacks} fallbacks)`)
    t.equal((await metric(f.adminUrl, 'outpost_pool_leader_changes_total'))! >= 1, true, `${f.name} counted the change of leader`)
    t.ok((await metric(f.adminUrl, 'outpost_pool_fallbacks_total'))! >= 1, `${f.name}: outpost_pool_fallbacks_total counts it`)
    const relists = (await metricSamples(f.adminUrl, 'outpost_upstream_relists_total')).filter(s => s.labels.includes('endpointslices') && s.value > 0)
    t.same(relists, [], `${f.name}: its EndpointSlice caches never listed again (each move resumed where it was)`)
  }
})
