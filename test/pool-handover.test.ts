// Leader hubs beyond the steady state (test/pool.test.ts) and a leader's SIGKILL
// (test/pool-failover.test.ts): what one peer may hold of a leader's pool port; the cloud away
// (every hub serves from its own caches, the leader steps down, the pool elects again once the
// cloud is back); and a leader that stops handing over at once, with no relist for anyone.
import t from 'tap'
import tls from 'node:tls'
import type { TLSSocket } from 'node:tls'
import { request } from 'undici'
import { eventually } from './helpers/hub.ts'
import { issueClientCertificate } from './helpers/pki.ts'
import { holds, poolState, settledLeader, sliceInformer, sliceVersions, startPoolCluster, startPoolHub } from './helpers/pool.ts'
import type { Hub } from '../lib/hub.ts'

const kubeProxy = 'kube-proxy/v1.33.0 (linux/amd64) kubernetes/abc1234'
const slicesPath = '/apis/discovery.k8s.io/v1/endpointslices'

const slice = (name: string, ip: string) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true } }],
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})

const cluster = await startPoolCluster({ north: ['n1', 'n2', 'n3'] })
t.teardown(() => cluster.close())
const { simulator } = cluster
simulator.create(slice('web-1', '10.1.0.1'))
const hubs = new Map<string, Hub>()
for (const node of cluster.nodes) hubs.set(node.name, await startPoolHub(node))
t.teardown(() => Promise.all([...hubs.values()].map(h => h.close())))
const leaderNow = () => settledLeader([...hubs.values()].map(h => h.adminUrl))
const stateOf = (name: string) => poolState(hubs.get(name)!.adminUrl)

t.test('the pool port bounds what one peer holds: 64 connections per node certificate; no certificate, no keep-alive', async t => {
  const leader = await leaderNow()
  const url = new URL((await stateOf(leader)).poolPort)
  const connect = (cert?: { cert: string; key: string }) =>
    new Promise<TLSSocket>((resolve, reject) => {
      const socket = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false, cert: cert?.cert, key: cert?.key }, () =>
        resolve(socket),
      )
      socket.on('error', reject)
    })
  const sockets: TLSSocket[] = []
  t.teardown(() => sockets.forEach(s => s.destroy()))
  const greedy = await issueClientCertificate(cluster.pki.ca, 'system:node:greedy', ['system:nodes'])
  for (let i = 0; i < 70; i++) sockets.push(await connect(greedy))
  await eventually(() => sockets.filter(s => s.destroyed || s.readyState !== 'open').length === 6, 10_000, 'the connections past 64 closed')
  const modest = await connect(await issueClientCertificate(cluster.pki.ca, 'system:node:modest', ['system:nodes']))
  sockets.push(modest)
  await new Promise(resolve => setTimeout(resolve, 200))
  t.equal(modest.readyState, 'open', "another node's connection is not counted against the first")

  const anonymous = await connect()
  sockets.push(anonymous)
  let answer = ''
  anonymous.on('data', chunk => (answer += chunk))
  const closed = new Promise(resolve => anonymous.once('close', resolve))
  anonymous.write('GET /api/v1/services HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n')
  await closed
  t.match(answer, /^HTTP\/1\.1 401/, 'no certificate: the 401')
  t.match(answer, /connection: close/i, '… and the connection ends, whatever the client asked')
})

t.test('the cloud away: every hub serves from its own caches, the leader steps down, and the pool elects again once it is back', async t => {
  const leader = await leaderNow()
  const follower = [...hubs.keys()].find(n => n !== leader)!
  // kube-proxy has listed through both before: that is what a hub keeps for the time the cloud is away
  for (const name of [leader, follower]) {
    const informer = await sliceInformer(hubs.get(name)!.proxyUrl, kubeProxy)
    t.teardown(() => informer.stop())
  }
  await simulator.setFault('refuse')
  t.teardown(() => simulator.setFault('none'))
  await eventually(() => [...hubs.values()].every(h => h.health.state === 'offline'), 15_000, 'every hub offline')
  for (const name of [leader, follower]) {
    const res = await request(`${hubs.get(name)!.proxyUrl}${slicesPath}`, { headers: { 'user-agent': kubeProxy } })
    const list = (await res.body.json()) as { items: { metadata: { name: string } }[] }
    t.equal(res.statusCode, 200, `${name}: kube-proxy's list answered offline`)
    t.ok(
      list.items.some(s => s.metadata.name === 'web-1'),
      `${name}: from its own cache`,
    )
  }
  await eventually(async () => (await stateOf(leader)).role !== 'leader', 15_000, 'the leader to step down: it cannot renew')
  await simulator.setFault('none')
  await leaderNow()
  t.pass('one leader again, followed, once the cloud is back')
  simulator.create(slice('web-back', '10.1.2.1'))
  await eventually(
    async () => {
      const res = await request(`${hubs.get(follower)!.proxyUrl}${slicesPath}`, { headers: { 'user-agent': kubeProxy } })
      return ((await res.body.json()) as { items: { metadata: { name: string } }[] }).items.some(s => s.metadata.name === 'web-back')
    },
    15_000,
    'a change after the outage, on a follower',
  )
})

t.test('a leader that stops hands over: a follower leads at once, the other follows it, and nothing is listed again', async t => {
  const old = await leaderNow()
  const stays = [...hubs.keys()].filter(n => n !== old)
  const informer = await sliceInformer(hubs.get(stays[0])!.proxyUrl, kubeProxy)
  t.teardown(() => informer.stop())
  const listsBefore = informer.lists()
  const transitionsBefore = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-north').spec.leaseTransitions
  // every write of the Lease from here on, by whom it names
  const holders: string[] = []
  const stopWatching = simulator.store.subscribe(event => {
    if (event.object?.kind === 'Lease' && event.object.metadata?.name === 'outpost-pool-north') holders.push(event.object.spec?.holderIdentity ?? '')
  })
  t.teardown(stopWatching)
  const stopped = Date.now()
  await hubs.get(old)!.close()
  hubs.delete(old)
  const next = await leaderNow()
  t.not(next, old)
  // released, the Lease is taken at once (lease-election.test.ts); not released, only once its 3 s ran out
  const released = holders.indexOf('')
  t.ok(
    released !== -1 && released < holders.indexOf(next),
    `${old} released the Lease, then ${next} took it (the Lease's writes: ${holders.map(h => h || 'released').join(' → ')})`,
  )
  t.comment(`handed over in ${Date.now() - stopped} ms (lease 3 s)`)
  simulator.create(slice('web-after', '10.1.1.1'))
  await eventually(() => holds(informer, sliceVersions(simulator)), 15_000, 'the change after the handover')
  t.equal(informer.lists(), listsBefore, 'the informer never listed again')
  t.strictSame(informer.problems, [], 'no event twice or out of order')
  const lease = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-north')
  t.equal(lease.spec.leaseTransitions, transitionsBefore + 1, 'one more transition')
  t.equal(lease.spec.holderIdentity, next)
})
