// Leader hubs, two pools of three hubs in this process against the simulator (TLS, node client
// certificates): one leader per pool; the followers' pool-wide lists and watches go to their
// leader, so the apiserver holds one set of them per pool; node-specific reads still go from each
// hub to the apiserver; a kube-proxy informer on a follower sees what changes; what /debug/pool and
// the metrics say; and what the pool port turns away, as Status objects.
import t from 'tap'
import https from 'node:https'
import tls from 'node:tls'
import type { AddressInfo } from 'node:net'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { eventually } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { clientCertificate, poolCluster, poolState, startPoolHub } from './helpers/pool-hubs.ts'
import { createTestPki } from './helpers/pki.ts'
import type { Hub } from '../lib/hub.ts'

const kubeProxy = 'kube-proxy/v1.33.0 (linux/amd64) kubernetes/abc'
const slicesPath = '/apis/discovery.k8s.io/v1/endpointslices'
const poolWidePaths = ['/api/v1/services', '/api/v1/endpoints', '/api/v1/nodes', '/apis/discovery.k8s.io/v1/endpointslices']

const slice = (name: string, ip: string) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true } }],
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})

const cluster = await poolCluster({ east: ['e1', 'e2', 'e3'], west: ['w1', 'w2', 'w3'] })
t.teardown(() => cluster.close())
const { simulator } = cluster
simulator.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: { ports: [{ port: 80 }] } })
simulator.create(slice('web-1', '10.1.0.1'))
const hubs = new Map<string, Hub>()
for (const node of cluster.nodes) hubs.set(node.name, await startPoolHub(node))
t.teardown(() => Promise.all([...hubs.values()].map(h => h.close())))

const stateOf = (name: string) => poolState(hubs.get(name)!.adminUrl)
const rolesOf = async (names: string[]) => Promise.all(names.map(async n => (await stateOf(n)).role as string))

/** Each pool has its leader and two followers of it; returns the leaders' names. */
async function settled(): Promise<Record<string, string>> {
  const leaders: Record<string, string> = {}
  await eventually(
    async () => {
      for (const pool of ['east', 'west']) {
        const names = cluster.nodes.filter(n => n.pool === pool).map(n => n.name)
        const states = await Promise.all(names.map(stateOf))
        const leading = states.filter(s => s.role === 'leader')
        if (leading.length !== 1) return false
        leaders[pool] = leading[0].identity
        if (!states.every(s => s.role === 'leader' || s.leader?.identity === leaders[pool])) return false
      }
      return true
    },
    30_000,
    'one leader per pool, followed by the others',
  )
  return leaders
}

t.test('one leader per pool; the followers list and watch the pool-wide resources from it', async t => {
  const leaders = await settled()
  t.not(leaders.east, leaders.west)
  t.ok(leaders.east.startsWith('e') && leaders.west.startsWith('w'), `each pool elected one of its own (${leaders.east}, ${leaders.west})`)

  // local clients of every hub: kube-proxy's lists and watches of the pool-wide resources, kubelet's of its pods
  const clients: { stop(): void }[] = []
  t.teardown(() => clients.forEach(c => c.stop()))
  const informers = new Map<string, k8s.Informer<k8s.V1EndpointSlice> & k8s.ObjectCache<k8s.V1EndpointSlice>>()
  let lists = 0
  for (const [name, hub] of hubs) {
    const kc = kubeConfigFor(hub.proxyUrl, kubeProxy)
    const api = kc.makeApiClient(k8s.DiscoveryV1Api)
    const informer = k8s.makeInformer(kc, '/apis/discovery.k8s.io/v1/endpointslices', () => {
      lists++
      return api.listEndpointSliceForAllNamespaces()
    })
    await informer.start()
    clients.push({ stop: () => void informer.stop() })
    informers.set(name, informer)
    for (const path of ['/api/v1/services', '/api/v1/nodes']) {
      const res = await request(`${hub.proxyUrl}${path}?watch=true&allowWatchBookmarks=true`, { headers: { 'user-agent': kubeProxy } })
      clients.push({ stop: () => res.body.destroy() })
    }
    const pods = await request(`${hub.proxyUrl}/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3D${name}`, { headers: { 'user-agent': 'kubelet/v1.33.0' } })
    t.equal(pods.statusCode, 200, `${name}: kubelet's pod watch`)
    clients.push({ stop: () => pods.body.destroy() })
  }
  const listsAtStart = lists

  simulator.create(slice('web-2', '10.1.0.2'))
  simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'web-1', { endpoints: [{ addresses: ['10.1.0.9'], conditions: { ready: true } }] })
  const sees = (name: string) => {
    const items = informers.get(name)!.list()
    return items.some(s => s.metadata?.name === 'web-2') && items.some(s => s.metadata?.name === 'web-1' && s.endpoints?.[0]?.addresses[0] === '10.1.0.9')
  }
  await eventually(() => [...hubs.keys()].every(sees), 15_000, 'every hub to show kube-proxy both changes')
  t.equal(lists, listsAtStart, 'no informer listed again')

  // what reached the apiserver: the pool-wide watches of each pool come from its leader alone
  const watchers = (path: string) =>
    new Set(simulator.requests.filter(r => r.watch && r.path === path && r.user?.startsWith('system:node:')).map(r => r.user!.slice('system:node:'.length)))
  // the requests made before the followers found their leader (the hubs start before the election) are not the steady state
  await eventually(
    async () => {
      const states = await Promise.all([...hubs.keys()].map(stateOf))
      return states.every(s => s.role === 'leader' || s.resources.every((r: { from: string }) => r.from === 'leader'))
    },
    15_000,
    "every follower's pool-wide caches reading from the leader",
  )
  const before = simulator.requests.length
  // a burst of changes while everything is settled: any watch of the apiserver opened now would show
  for (let i = 3; i < 8; i++) simulator.create(slice(`web-${i}`, `10.1.0.${i}`))
  await eventually(() => [...hubs.keys()].every(n => informers.get(n)!.list().length === 7), 15_000, 'the burst everywhere')
  const later = simulator.requests.slice(before)
  const followers = [...hubs.keys()].filter(n => n !== leaders.east && n !== leaders.west)
  t.strictSame(
    later.filter(r => poolWidePaths.includes(r.path) && followers.some(f => r.user === `system:node:${f}`)).map(r => `${r.user} ${r.verb} ${r.path}`),
    [],
    'no follower listed or watched a pool-wide resource at the apiserver',
  )
  for (const path of poolWidePaths.filter(p => p !== '/api/v1/endpoints')) {
    const open = watchers(path)
    for (const f of followers) {
      // a follower may have watched before it found its leader; since, only the leaders hold these watches
      const latest = [...simulator.requests].reverse().find(r => r.watch && r.path === path && r.user === `system:node:${f}`)
      t.ok(!latest || simulator.requests.indexOf(latest) < before, `${f} holds no watch of ${path} at the apiserver now`)
    }
    t.ok(open.has(leaders.east) && open.has(leaders.west), `${path}: watched by both leaders`)
  }
  for (const name of hubs.keys()) {
    t.ok(
      simulator.requests.some(r => r.watch && r.path === '/api/v1/pods' && r.user === `system:node:${name}`),
      `${name}: kubelet's pods watched from the apiserver by the hub itself`,
    )
  }

  const follower = followers[0]
  const state = await stateOf(follower)
  t.match(state, { enabled: true, role: 'follower', identity: follower, lease: { holder: follower.startsWith('e') ? leaders.east : leaders.west } })
  t.ok(state.bytes.leader > 0, `bytes from the leader: ${state.bytes.leader}`)
  t.ok(state.resources.length > 0 && state.resources.every((r: { from: string }) => r.from === 'leader'), 'every pool-wide cache reads from the leader')
  const metrics = async (name: string) => (await request(`${hubs.get(name)!.adminUrl}/metrics`)).body.text()
  t.match(await metrics(follower), /^outpost_pool_following 1$/m, 'the follower says so in its metrics')
  t.match(await metrics(follower), /^outpost_pool_leader 0$/m)
  t.match(await metrics(leaders.east), /^outpost_pool_leader 1$/m, 'and the leader in its')
  t.match(await metrics(follower), /^outpost_pool_received_bytes_total\{from="leader"\} [1-9]/m)
  const ready = await request(`${hubs.get(follower)!.adminUrl}/v1/readyz`)
  t.equal(ready.statusCode, 200, 'a follower with a leader is ready')
  t.equal(await ready.body.text(), 'ok', 'with nothing to note')
})

t.test('the pool port: node certificates of the cluster CA only, list and watch of the pool-wide resources only', async t => {
  const leaders = await settled()
  const leaderState = await stateOf(leaders.east)
  const url = new URL(leaderState.poolPort)
  const caOfServer = (
    await new Promise<string>((resolve, reject) => {
      const probe = https.get({ host: url.hostname, port: url.port, path: '/', rejectUnauthorized: false }, res => {
        res.resume()
        resolve((res.socket as import('node:tls').TLSSocket).getPeerX509Certificate()!.toString())
      })
      probe.on('error', reject)
    })
  ).toString()
  const ask = (path: string, options: { cert?: { cert: string; key: string }; token?: string; method?: string } = {}) =>
    new Promise<{ code: number; body: any }>((resolve, reject) => {
      const req = https.request(
        {
          host: url.hostname,
          port: Number(url.port),
          path,
          method: options.method ?? 'GET',
          ca: caOfServer,
          checkServerIdentity: () => undefined,
          cert: options.cert?.cert,
          key: options.cert?.key,
          headers: { accept: 'application/json', ...(options.token ? { authorization: `Bearer ${options.token}` } : {}) },
        },
        res => {
          let text = ''
          res.on('data', chunk => (text += chunk))
          res.on('end', () => resolve({ code: res.statusCode!, body: text ? JSON.parse(text) : undefined }))
        },
      )
      req.on('error', reject)
      req.end()
    })
  const node = await clientCertificate(cluster.pki.ca, 'system:node:e9', ['system:nodes'])
  const listed = await ask('/api/v1/services', { cert: node })
  t.equal(listed.code, 200, 'a node certificate lists services')
  t.equal(listed.body.kind, 'ServiceList')
  t.ok(
    listed.body.items.some((s: any) => s.metadata.name === 'web'),
    'from the leader, as the apiserver has them',
  )

  const status = (r: { code: number; body: any }, code: number, reason: string, what: string) => {
    t.equal(r.code, code, `${what}: ${code}`)
    t.match(r.body, { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason }, `${what}: a Status saying ${reason}`)
  }
  status(await ask('/api/v1/services'), 401, 'Unauthorized', 'no certificate')
  status(await ask('/api/v1/services', { token: 'a-node-token' }), 401, 'Unauthorized', 'a bearer token')
  const otherCa = await createTestPki()
  status(await ask('/api/v1/services', { cert: otherCa.client }), 401, 'Unauthorized', 'a node certificate of another CA')
  const notANode = await clientCertificate(cluster.pki.ca, 'jane', ['developers'])
  status(await ask('/api/v1/services', { cert: notANode }), 403, 'Forbidden', 'a certificate of the CA that is not a node')
  const nodeNameButNoGroup = await clientCertificate(cluster.pki.ca, 'system:node:e9')
  status(await ask('/api/v1/services', { cert: nodeNameButNoGroup }), 403, 'Forbidden', 'a node name without the group system:nodes')
  status(await ask('/api/v1/pods', { cert: node }), 403, 'Forbidden', 'pods')
  status(await ask('/api/v1/namespaces/kube-system/secrets', { cert: node }), 403, 'Forbidden', 'secrets')
  status(await ask('/api/v1/namespaces/default/services/web', { cert: node }), 403, 'Forbidden', 'a get (only list and watch)')
  status(await ask('/api/v1/namespaces/default/services', { cert: node, method: 'POST' }), 403, 'Forbidden', 'a create')
  status(await ask('/api/v1/namespaces/default/services/web', { cert: node, method: 'DELETE' }), 403, 'Forbidden', 'a delete')
  const follower = cluster.nodes.find(n => n.pool === 'east' && n.name !== leaders.east)!.name
  const followerPort = new URL((await stateOf(follower)).poolPort)
  const atFollower = await new Promise<{ code: number; body: any }>((resolve, reject) => {
    const req = https.request(
      { host: followerPort.hostname, port: Number(followerPort.port), path: '/api/v1/services', rejectUnauthorized: false, cert: node.cert, key: node.key },
      res => {
        let text = ''
        res.on('data', chunk => (text += chunk))
        res.on('end', () => resolve({ code: res.statusCode!, body: JSON.parse(text) }))
      },
    )
    req.on('error', reject)
    req.end()
  })
  status(atFollower, 503, 'ServiceUnavailable', "a follower's pool port")
  t.match(atFollower.body.message, /does not lead pool east/)
  t.equal(simulator.requests.filter(r => r.user === 'jane' || r.user === 'system:node:e9').length, 0, 'nothing the pool port was asked reached the apiserver')
})

t.test('the pool port bounds what one peer holds: 64 connections per node certificate; no certificate, no keep-alive', async t => {
  const leaders = await settled()
  const url = new URL((await stateOf(leaders.east)).poolPort)
  const node = await clientCertificate(cluster.pki.ca, 'system:node:greedy', ['system:nodes'])
  const connect = (cert?: { cert: string; key: string }) =>
    new Promise<import('node:tls').TLSSocket>((resolve, reject) => {
      const socket = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false, cert: cert?.cert, key: cert?.key }, () =>
        resolve(socket),
      )
      socket.on('error', reject)
    })
  const sockets: import('node:tls').TLSSocket[] = []
  t.teardown(() => sockets.forEach(s => s.destroy()))
  for (let i = 0; i < 70; i++) sockets.push(await connect(node))
  await eventually(() => sockets.filter(s => s.destroyed || s.readyState !== 'open').length === 6, 10_000, 'the connections past 64 closed')
  const other = await connect(await clientCertificate(cluster.pki.ca, 'system:node:modest', ['system:nodes']))
  sockets.push(other)
  await new Promise(resolve => setTimeout(resolve, 200))
  t.equal(other.readyState, 'open', "another node's connection is not counted against the first")

  const anonymous = await connect()
  sockets.push(anonymous)
  let answer = ''
  anonymous.on('data', chunk => (answer += chunk))
  const closed = new Promise(resolve => anonymous.once('close', resolve))
  anonymous.write(`GET /api/v1/services HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`)
  await closed
  t.match(answer, /^HTTP\/1\.1 401/, 'no certificate: the 401')
  t.match(answer, /connection: close/i, '… and the connection ends, whatever the client asked')
})

t.test('the cloud away: every hub serves from its own caches, the leader steps down, and the pool elects again once it is back', async t => {
  const leaders = await settled()
  const follower = cluster.nodes.find(n => n.pool === 'east' && n.name !== leaders.east)!.name
  await simulator.setFault('refuse')
  t.teardown(() => simulator.setFault('none'))
  await eventually(() => [...hubs.values()].every(h => h.health.state === 'offline'), 15_000, 'every hub offline')
  for (const name of [leaders.east, follower]) {
    const res = await request(`${hubs.get(name)!.proxyUrl}${slicesPath}`, { headers: { 'user-agent': kubeProxy } })
    const list = (await res.body.json()) as { items: { metadata: { name: string } }[] }
    t.equal(res.statusCode, 200, `${name}: kube-proxy's list answered offline`)
    t.ok(
      list.items.some(s => s.metadata.name === 'web-1'),
      `${name}: from its own cache`,
    )
  }
  await eventually(async () => (await stateOf(leaders.east)).role !== 'leader', 15_000, 'the leader to step down: it cannot renew')
  await simulator.setFault('none')
  await settled()
  t.pass('one leader per pool again, followed, once the cloud is back')
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
  const leaders = await settled()
  const old = leaders.west
  const informer = (() => {
    const kc = kubeConfigFor(hubs.get(cluster.nodes.find(n => n.pool === 'west' && n.name !== old)!.name)!.proxyUrl, kubeProxy)
    const api = kc.makeApiClient(k8s.DiscoveryV1Api)
    let lists = 0
    const inf = k8s.makeInformer(kc, '/apis/discovery.k8s.io/v1/endpointslices', () => {
      lists++
      return api.listEndpointSliceForAllNamespaces()
    })
    return { inf, lists: () => lists }
  })()
  await informer.inf.start()
  t.teardown(() => informer.inf.stop())
  const listsBefore = informer.lists()
  const stopped = Date.now()
  await hubs.get(old)!.close()
  hubs.delete(old)
  const westNames = cluster.nodes.filter(n => n.pool === 'west' && n.name !== old).map(n => n.name)
  await eventually(
    async () => {
      const roles = await rolesOf(westNames)
      return roles.includes('leader') && roles.includes('follower')
    },
    15_000,
    'a new leader in pool west, followed',
  )
  const handover = Date.now() - stopped
  t.ok(handover < 5_000, `handed over in ${handover} ms, well within the lease (5 s): the Lease was released`)
  simulator.create(slice('web-after', '10.1.1.1'))
  await eventually(() => informer.inf.list().some(s => s.metadata?.name === 'web-after'), 15_000, 'the change after the handover')
  t.equal(informer.lists(), listsBefore, 'the informer never listed again')
  const lease = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-west')
  t.ok(lease.spec.leaseTransitions >= 1, `the Lease counts the transition (${lease.spec.leaseTransitions})`)
  t.not(lease.spec.holderIdentity, old)
})
