// A pool's leader SIGKILLed in the middle of a burst of EndpointSlice changes, three hubs as node
// processes: every follower's clients (a client-node informer as kube-proxy, JSON; a protobuf
// list+watch as coredns, as client-go's reflector makes it) end equal to the apiserver's state with
// no list after the kill, and another hub leads within the lease duration, followed by the other.
import t from 'tap'
import { pipeline } from 'node:stream'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { eventually } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { poolCluster, poolState, poolTimings, startPoolHubProcess } from './helpers/pool-hubs.ts'
import type { PoolHubProcess } from './helpers/pool-hubs.ts'
import { decodeEvent, decodeList } from '../lib/cache/decode.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'

const slices = '/apis/discovery.k8s.io/v1/endpointslices'
const protobuf = 'application/vnd.kubernetes.protobuf'

const slice = (name: string, ip: string) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true } }],
  ports: [{ name: 'dns', port: 53, protocol: 'UDP' }],
})

/** A protobuf list, then watches resumed from the last version seen (a list again only on a 410), as client-go's reflector. */
function protobufClient(base: string, userAgent: string) {
  const objects = new Map<string, string>()
  let version = ''
  let lists = 0
  let stopped = false
  let body: { destroy(): void } | undefined
  const headers = { 'user-agent': userAgent, accept: protobuf }
  const list = async () => {
    const res = await request(`${base}${slices}`, { headers })
    const bytes = Buffer.from(await res.body.arrayBuffer())
    if (res.statusCode !== 200) throw new Error(`list ${res.statusCode}`)
    lists++
    const decoded = decodeList('protobuf', bytes)
    objects.clear()
    for (const item of decoded.items) objects.set(item.name, item.resourceVersion)
    version = decoded.resourceVersion
  }
  const watch = async () => {
    const res = await request(`${base}${slices}?watch=true&allowWatchBookmarks=true&resourceVersion=${version}`, { headers })
    body = res.body
    if (res.statusCode !== 200) {
      await res.body.dump()
      if (res.statusCode === 410) version = ''
      throw new Error(`watch ${res.statusCode}`)
    }
    for await (const frame of pipeline(res.body, new WatchFrameSplitter('protobuf'), () => {})) {
      const event = decodeEvent('protobuf', frame as Buffer)
      if (event.type === 'ERROR') {
        version = ''
        return
      }
      if (event.type === 'BOOKMARK') version = event.resourceVersion || version
      else if (event.object) {
        if (event.type === 'DELETED') objects.delete(event.object.name)
        else objects.set(event.object.name, event.object.resourceVersion)
        version = event.object.resourceVersion
      }
    }
  }
  const run = async () => {
    while (!stopped) {
      try {
        if (!version) await list()
        await watch()
      } catch {
        if (!stopped) await new Promise(resolve => setTimeout(resolve, 200))
      }
    }
  }
  void run()
  return {
    objects,
    lists: () => lists,
    synced: () => version !== '',
    stop() {
      stopped = true
      body?.destroy()
    },
  }
}

t.test("the leader killed mid-burst: followers' clients converge with no list, and a new leader within the lease", async t => {
  const cluster = await poolCluster({ edge: ['k1', 'k2', 'k3'] })
  t.teardown(() => cluster.close())
  const { simulator } = cluster
  for (let i = 0; i < 5; i++) simulator.create(slice(`dns-${i}`, `10.2.0.${i}`))
  const hubs: PoolHubProcess[] = []
  t.teardown(() => Promise.all(hubs.map(h => h.stop())))
  for (const node of cluster.nodes) hubs.push(await startPoolHubProcess(node))

  let leader: PoolHubProcess | undefined
  await eventually(
    async () => {
      const states = await Promise.all(hubs.map(h => poolState(h.adminUrl)))
      const leading = states.filter(s => s.role === 'leader')
      if (leading.length !== 1) return false
      leader = hubs.find(h => h.node.name === leading[0].identity)
      return states.every(s => s.role === 'leader' || (s.leader?.identity === leading[0].identity && s.resources.every((r: any) => r.from === 'leader')))
    },
    30_000,
    'one leader, followed',
  )
  const followers = hubs.filter(h => h !== leader)

  const clients = followers.map(hub => {
    const kc = kubeConfigFor(hub.proxyUrl, 'kube-proxy/v1.33.0 (linux/amd64) kubernetes/abc')
    const api = kc.makeApiClient(k8s.DiscoveryV1Api)
    let lists = 0
    const informer = k8s.makeInformer(kc, slices, () => {
      lists++
      return api.listEndpointSliceForAllNamespaces()
    })
    const coredns = protobufClient(hub.proxyUrl, 'coredns/1.11.3')
    return { hub, informer, informerLists: () => lists, coredns }
  })
  t.teardown(() => clients.forEach(c => (c.coredns.stop(), void c.informer.stop())))
  for (const c of clients) await c.informer.start()
  await eventually(() => clients.every(c => c.coredns.synced() && c.informer.list().length === 5), 15_000, 'every client synced')
  const listsBefore = clients.map(c => [c.informerLists(), c.coredns.lists()])

  // the burst: creates, updates and deletes, 10 ms apart; the leader dies a third of the way in
  let killedAt = 0
  for (let i = 0; i < 60; i++) {
    if (i % 3 === 0) simulator.create(slice(`burst-${i}`, `10.3.0.${i}`))
    else if (i % 3 === 1)
      simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', `dns-${i % 5}`, {
        endpoints: [{ addresses: [`10.4.0.${i}`], conditions: { ready: true } }],
      })
    else if (i > 30) simulator.remove('discovery.k8s.io/v1', 'EndpointSlice', 'default', `burst-${i - 29}`)
    if (i === 20) {
      await leader!.kill()
      killedAt = Date.now()
    }
    await new Promise(resolve => setTimeout(resolve, 10))
  }

  const truth = () =>
    new Map(simulator.list('discovery.k8s.io/v1', 'EndpointSlice').map((s: any) => [s.metadata.name as string, s.metadata.resourceVersion as string]))
  const same = (seen: Map<string, string>) => {
    const want = truth()
    return seen.size === want.size && [...want].every(([name, rv]) => seen.get(name) === rv)
  }
  const informerState = (c: (typeof clients)[number]) => new Map(c.informer.list().map(s => [s.metadata!.name!, s.metadata!.resourceVersion!]))
  await eventually(() => clients.every(c => same(informerState(c)) && same(c.coredns.objects)), 20_000, "every follower's clients equal to the apiserver")
  t.pass(`every follower's kube-proxy (JSON) and coredns (protobuf) hold the apiserver's ${truth().size} slices at their versions`)
  t.strictSame(
    clients.map(c => [c.informerLists(), c.coredns.lists()]),
    listsBefore,
    'no client listed again after the kill',
  )

  let newLeader = ''
  await eventually(
    async () => {
      const states = await Promise.all(followers.map(h => poolState(h.adminUrl)))
      const leading = states.find(s => s.role === 'leader')
      if (!leading) return false
      newLeader = leading.identity
      return states.every(s => s.role === 'leader' || s.leader?.identity === newLeader)
    },
    30_000,
    'a new leader, followed',
  )
  const took = Date.now() - killedAt
  // a follower takes over once the record has not changed for a lease duration on its own clock; it
  // reads the Lease every retry period once its leader failed it
  const bound = poolTimings.poolLeaseDurationMs + 2 * poolTimings.poolRetryPeriodMs + 2_000
  t.ok(took <= bound, `a new leader (${newLeader}) followed ${took} ms after the kill (lease ${poolTimings.poolLeaseDurationMs} ms; at most ${bound})`)
  const lease = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-edge')
  t.equal(lease.spec.holderIdentity, newLeader)
  t.equal(lease.spec.leaseTransitions, 1, 'one transition')

  // and after the failover the pool still works through the new leader
  simulator.create(slice('after', '10.5.0.1'))
  await eventually(() => clients.every(c => same(informerState(c)) && same(c.coredns.objects)), 15_000, 'a change after the failover')
  const follower = followers.find(h => h.node.name !== newLeader)!
  const state = await poolState(follower.adminUrl)
  t.ok(state.fallbacks >= 1, `the follower fell back to the cloud when its leader died (${state.fallbacks} requests)`)
  const metrics = await (await request(`${follower.adminUrl}/metrics`)).body.text()
  t.match(metrics, /^outpost_pool_following 1$/m, 'and follows the new leader')
})
