// No local client can exhaust the hub (issue 31): against one hub in a process of its own, caching
// 10,000 EndpointSlices (~14 MB as JSON), at once: 50 watchers and 50 lists that never read, 30
// paged lists never continued, 20 reading watches as kubelet (half of them WatchList's
// sendInitialEvents), then 2,000 distinct User-Agents. The hub lives through it and serves as before,
// the clients that never read are ended, and kubelet's GET of its Node and kube-proxy's watch event
// keep answering. What the attack costs in memory is the bench's to measure (npm run bench, the
// attack.* rows: the built hub on a quiet box); here the figures are only printed.
import t from 'tap'
import { readdirSync } from 'node:fs'
import { Agent, request } from 'undici'
import { SimProcess } from './bench/processes.ts'
import * as objects from './bench/objects.ts'
import { AttackHub } from './helpers/attack-hub.ts'
import { inBatches, kubeletAgent, kubeProxyAgent, rawClient } from './helpers/attack-clients.ts'
import type { RawClient } from './helpers/attack-clients.ts'
import { eventually } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { readWatch } from './helpers/watch.ts'
import { maxCachedComponents } from '../lib/cache/recorder.ts'
import { notACollection } from '../lib/cache/disk-paths.ts'

const MiB = 1024 * 1024
/** smaller than the defaults (4 MiB, 60 s) so that the test is short */
const watchBacklog = 1 * MiB
const stallMs = 10_000
/** the label cap of lib/observe/metrics.ts's components: past it, `other` */
const metricComponents = 64

const slices = 10_000
/** the attack: clients that never read (watches, lists), first pages never continued, reading watches, User-Agents */
const attack = { stalledWatches: 50, stalledLists: 50, pages: 30, readers: 20, userAgents: 2_000 }
const allSlices = '/apis/discovery.k8s.io/v1/endpointslices'
const nodePath = `/api/v1/nodes/${objects.hubNode}`
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

const setupStarted = performance.now()
const sim = await SimProcess.start()
t.teardown(() => sim.close())
await sim.call('seed', { slices, pods: 0, configMaps: 0 })
const cacheDir = tempDir(t, 'outpost-attack-')
const hub = await AttackHub.start(sim.url, objects.hubNode, cacheDir, [
  '--cache-components=*',
  '--max-watch-backlog',
  String(watchBacklog),
  '--stall-timeout',
  `${stallMs / 1000}s`,
])
t.teardown(() => hub.kill())

// kube-proxy's informer: the list fills the hub's cache of all slices, the watch from its version is
// the one whose events must keep coming while the hub is attacked
// (a 429 until the hub's watch cache has its first list, which client-go retries)
const listVersion = await eventually(
  async () => {
    const res = await request(`${hub.url}${allSlices}?resourceVersion=0`, { headers: { 'user-agent': kubeProxyAgent } })
    const list = (await res.body.json()) as any
    return res.statusCode === 200 && (list.metadata.resourceVersion as string)
  },
  60_000,
  'the hub to list the slices',
)
const proxyWatch = await request(`${hub.url}${allSlices}?watch=true&resourceVersion=${listVersion}&allowWatchBookmarks=true`, {
  headers: { 'user-agent': kubeProxyAgent },
})
const proxyEvents = readWatch(proxyWatch.body)
t.teardown(() => proxyWatch.body.destroy())

/** kubelet's GET of its Node, ms */
async function kubeletGet(): Promise<number> {
  const started = performance.now()
  const res = await request(`${hub.url}${nodePath}`, { headers: { 'user-agent': kubeletAgent } })
  await res.body.dump()
  if (res.statusCode !== 200) throw new Error(`kubelet's GET: ${res.statusCode}`)
  return performance.now() - started
}

let modified = 0
/** a slice modified in the apiserver until kube-proxy's watch has the event, ms */
async function proxyEvent(): Promise<number> {
  const seq = String(++modified) // the simulator's slice writes number themselves from 1
  const started = performance.now()
  await sim.call('modifySlices', { count: 1 })
  await eventually(
    () => proxyEvents.events.some(e => e.type === 'MODIFIED' && e.object.metadata.annotations?.[objects.seqAnnotation] === seq),
    30_000,
    `event ${seq}`,
  )
  return performance.now() - started
}

await kubeletGet()
await proxyEvent()
// cache full, first requests served, a moment to settle
await sleep(2_000)
const idleRss = hub.rssMiB()
const idleConnections = hub.connections()
const metricLines = async () => (await hub.metrics()).split('\n').filter(l => l !== '' && !l.startsWith('#')).length
const idleMetrics = await metricLines()
t.comment(`setup ${((performance.now() - setupStarted) / 1000).toFixed(1)} s`)

t.test('under attack', async t => {
  const rss: number[] = []
  const gets: number[] = []
  const events: number[] = []
  let attacking = true
  const sampler = (async () => {
    while (attacking) {
      rss.push(hub.rssMiB())
      await sleep(200)
    }
  })()
  const prober = (async () => {
    while (attacking) {
      gets.push(await kubeletGet().catch(() => Infinity))
      events.push(await proxyEvent().catch(() => Infinity))
      await sleep(300)
    }
  })()

  const started = performance.now()
  const stalled: RawClient[] = []
  const stalledLists: RawClient[] = []
  for (let i = 0; i < Math.max(attack.stalledWatches, attack.stalledLists); i++) {
    const agent = i % 2 ? kubeProxyAgent : `noisy-pod/1.${i}`
    if (i < attack.stalledWatches) stalled.push(await rawClient(hub.port, `${allSlices}?watch=true&resourceVersion=0`, agent, { reading: false }))
    if (i < attack.stalledLists) stalledLists.push(await rawClient(hub.port, `${allSlices}?resourceVersion=0`, agent, { reading: false }))
  }
  stalled.push(...stalledLists)
  t.teardown(() => stalled.forEach(c => c.socket.destroy()))
  const readers: RawClient[] = []
  for (let i = 0; i < attack.readers; i++) {
    const watchList = i % 2 === 1
    const query = watchList ? 'watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true' : 'watch=true&resourceVersion=0'
    readers.push(await rawClient(hub.port, `${allSlices}?${query}`, kubeletAgent, { reading: true, marker: watchList ? 'k8s.io/initial-events-end' : '' }))
  }
  t.teardown(() => readers.forEach(c => c.socket.destroy()))
  const pager = new Agent()
  const pages = await Promise.all(
    Array.from({ length: attack.pages }, async (_, i) => {
      const res = await request(`${hub.url}${allSlices}?limit=500`, { dispatcher: pager, headers: { 'user-agent': `pager-${i % 3}/1.0` } })
      return ((await res.body.json()) as any).metadata?.continue as string | undefined
    }),
  )
  await pager.close()
  t.equal(pages.filter(Boolean).length, attack.pages, 'the first pages each came with a continue token, never used')
  const opened = performance.now()
  t.comment(`attack open ${((opened - started) / 1000).toFixed(1)} s in`)

  await t.test('2,000 distinct User-Agents: the metrics and cache directories stay bounded', async t => {
    const one = await request(`${hub.url}${nodePath}`, { headers: { 'user-agent': 'first-of-many/1.0' } })
    await one.body.dump()
    const oneList = await request(`${hub.url}/api/v1/namespaces`, { headers: { 'user-agent': 'first-of-many/1.0' } })
    await oneList.body.dump()
    const perComponent = (await metricLines()) - idleMetrics
    const codes = new Map<number, number>()
    const agents = new Agent()
    await inBatches(
      Array.from({ length: attack.userAgents }, (_, i) => i),
      16,
      async i => {
        // half of them get the Node, half list the namespaces: both are recorded per component
        const target = i % 2 ? nodePath : '/api/v1/namespaces'
        const agent = i % 10 === 0 ? `spaced agent ${i}` : `agent-${i}/v1.${i} (linux/amd64)`
        const res = await request(`${hub.url}${target}`, { dispatcher: agents, headers: { 'user-agent': agent } })
        await res.body.dump()
        codes.set(res.statusCode, (codes.get(res.statusCode) ?? 0) + 1)
      },
    )
    await agents.close()
    t.comment(`2,000 User-Agents served ${((performance.now() - started) / 1000).toFixed(1)} s in`)
    t.same(Object.fromEntries(codes), { 200: attack.userAgents }, 'every one answered')
    const growth = (await metricLines()) - idleMetrics
    t.ok(
      growth <= metricComponents * perComponent,
      `metric series grew by ${growth}, at most ${metricComponents} components × ${perComponent} (one component's)`,
    )
    const components = readdirSync(cacheDir).filter(name => !notACollection(name))
    t.ok(components.length <= maxCachedComponents, `${components.length} component directories, at most ${maxCachedComponents}`)
  })

  await t.test('the clients that never read are ended once they stall', async t => {
    // kube-proxy's and kubelet's connections, the reading watches, slack: not the 100 stalled
    const expected = idleConnections + readers.length + 3
    let connections = hub.connections()
    const ended = await eventually(() => {
      connections = hub.connections()
      return connections <= expected || performance.now() - opened > stallMs + 20_000
    }, stallMs + 25_000).then(() => connections <= expected)
    const seconds = Math.round((performance.now() - opened) / 1000)
    t.ok(ended, `the hub holds ${connections} client connections ${seconds} s after the attack opened, at most ${expected} once the stalled ones are ended`)
    if (!ended) return // reading them now would pull 100 × 14 MB through this process
    for (const c of stalled) c.read()
    await eventually(() => stalled.every(c => c.isClosed()), 20_000, 'the stalled clients to see the end of their connections')
    t.equal(stalledLists.filter(c => c.sawLastChunk()).length, 0, 'no unread list was sent whole: each was cut')
  })

  attacking = false
  await Promise.all([sampler, prober])
  const peak = Math.max(...rss)

  t.test('reading clients are not affected', async t => {
    t.ok(
      readers.every(c => !c.isClosed()),
      'the reading watches are still open',
    )
    const watchLists = readers.filter((_, i) => i % 2 === 1)
    t.ok(
      watchLists.every(c => c.sawMarker()),
      'each WatchList got its initial events and their end',
    )
    const least = Math.min(...readers.map(c => c.bytes()))
    t.ok(least > 5 * MiB, `each reading watch read its initial events (the least: ${(least / MiB).toFixed(1)} MiB)`)
  })

  // what the limits keep the attack to in memory (each unread watch at most --max-watch-backlog,
  // unread lists written with backpressure, first pages kept to record, a reading watch's own share)
  // is measured by the bench's attack.unread.rss, attack.paged.rss, attack.watches.*.per-watch and
  // attack.connections.rss rows; here, that the hub lives through it and serves as it did
  t.test('the hub lives through it and serves as before', async t => {
    t.ok(hub.child.exitCode === null && hub.child.signalCode === null, 'the hub process is still running (not ended for its memory, not crashed)')
    t.notMatch(hub.log, /heap out of memory|FATAL ERROR|Allocation failed/, 'it never ran out of heap')
    const res = await request(`${hub.url}${nodePath}`, { headers: { 'user-agent': kubeletAgent } })
    t.equal(res.statusCode, 200, "kubelet's GET of its Node answers")
    t.equal(((await res.body.json()) as any).metadata?.name, objects.hubNode, 'with its Node')
    await proxyEvent()
    t.pass('the kube-proxy watch opened before the attack still delivers a change made after it')
    await sleep(1_000)
    t.comment(`hub RSS (VmRSS): idle ${idleRss.toFixed(0)} MiB, at most ${peak.toFixed(0)} MiB under attack, ${hub.rssMiB().toFixed(0)} MiB after`)
  })

  // the bound is a second; the bench's attack rows measure it on the built hub. Here the hub
  // runs under tsx on a box this test itself loads (100 clients, the simulator), so twice that:
  // a hub that blocked kubelet behind the attack (before the caps: up to 2.9 s) still fails it
  t.test('kubelet’s GET and kube-proxy’s watch events answered within two seconds throughout', async t => {
    const slowestGet = Math.max(...gets)
    const slowestEvent = Math.max(...events)
    t.comment(`kubelet GETs: ${gets.length}, slowest ${slowestGet.toFixed(0)} ms; kube-proxy events: ${events.length}, slowest ${slowestEvent.toFixed(0)} ms`)
    t.ok(gets.length >= 5 && events.length >= 5, 'probed all along')
    t.ok(slowestGet < 2_000, `slowest kubelet GET ${slowestGet.toFixed(0)} ms`)
    t.ok(slowestEvent < 2_000, `slowest kube-proxy event ${slowestEvent.toFixed(0)} ms`)
  })
  t.comment(`attack phase ${((performance.now() - started) / 1000).toFixed(1)} s`)
})
