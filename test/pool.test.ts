// Leader hubs in this process: two pools of three hubs against the simulator over TLS with node
// client certificates. One leader per pool; the followers' pool-wide lists and watches go to their
// leader, so the apiserver holds one set of pool-wide watches per pool (resources x formats the
// pool's clients use), while node-specific reads and writes still go from each hub to the
// apiserver; local clients on a follower see every change; /debug/pool and /metrics say who is
// what; the pool port refuses everything but nodes' list and watch of pool-wide resources.
import t from 'tap'
import type { Readable } from 'node:stream'
import https from 'node:https'
import { X509Certificate } from 'node:crypto'
import { request } from 'undici'
import { eventually } from './helpers/hub.ts'
import { createTestPki, issueClientCertificate } from './helpers/pki.ts'
import type { Pem } from './helpers/pki.ts'
import { readWatch } from './helpers/watch.ts'
import {
  formatOf,
  holds,
  metric,
  metricSamples,
  poolState,
  protobufReflector,
  settledLeader,
  sliceInformer,
  sliceVersions,
  startPoolCluster,
  startPoolHub,
} from './helpers/pool.ts'
import type { LocalClient } from './helpers/pool.ts'
import type { Hub } from '../lib/hub.ts'

const kubeProxy = 'kube-proxy/v1.33.0 (linux/amd64) kubernetes/abc1234'
const kubelet = 'kubelet/v1.33.0 (linux/amd64) kubernetes/abc1234'
// kube-proxy's own selector for EndpointSlices
const proxySelector = '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name'
const poolWidePaths = [
  '/api/v1/services',
  '/api/v1/endpoints',
  '/api/v1/nodes',
  '/apis/discovery.k8s.io/v1/endpointslices',
  '/apis/discovery.k8s.io/v1beta1/endpointslices',
]

const slice = (name: string, ip: string) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true } }],
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})

const cluster = await startPoolCluster({ east: ['e1', 'e2', 'e3'], west: ['w1', 'w2', 'w3'] })
t.teardown(() => cluster.close())
const { simulator } = cluster
simulator.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } })
simulator.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'shop' }, spec: { ports: [{ port: 80 }] } })
simulator.create(slice('web-1', '10.1.0.1'))

// east learns its address from its Nodes' InternalIP, west is told it
const started = await Promise.allSettled(
  cluster.nodes.map(n => startPoolHub(n, n.pool === 'west' ? { poolAdvertiseAddress: '127.0.0.1' } : {}).then(hub => [n.name, hub] as const)),
)
const hubs = new Map(started.flatMap(s => (s.status === 'fulfilled' ? [s.value] : [])))
t.teardown(() => Promise.all([...hubs.values()].map(h => h.close())))
for (const s of started) if (s.status === 'rejected') throw s.reason
const hub = (name: string): Hub => hubs.get(name)!
const pools = ['east', 'west']
const leaders: Record<string, string> = {}
const followers = () => [...hubs.keys()].filter(n => !Object.values(leaders).includes(n))

t.test('exactly one leader per pool, on its pool Lease, followed by the pool', async t => {
  for (const pool of pools) leaders[pool] = await settledLeader(cluster.namesOf(pool).map(n => hub(n).adminUrl))
  t.ok(cluster.namesOf('east').includes(leaders.east) && cluster.namesOf('west').includes(leaders.west), `leaders ${leaders.east}, ${leaders.west}`)
  for (const pool of pools) {
    const lease = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', `outpost-pool-${pool}`)
    t.equal(lease?.spec?.holderIdentity, leaders[pool], `kube-system/outpost-pool-${pool} names the leader`)
    const leader = await poolState(hub(leaders[pool]).adminUrl)
    t.match(leader.poolPort, /^https:\/\/127\.0\.0\.1:\d+$/, 'the pool port at the advertised address')
    t.equal(lease.metadata.annotations['outpost.io/pool-address'], leader.poolPort, 'published on the Lease')
    t.match(lease.metadata.annotations['outpost.io/pool-certificate'], /^-----BEGIN CERTIFICATE-----/, 'with the certificate to pin')
    for (const name of cluster.namesOf(pool)) {
      const state = await poolState(hub(name).adminUrl)
      t.match(
        state,
        {
          enabled: true,
          pool,
          identity: name,
          lease: { namespace: 'kube-system', name: `outpost-pool-${pool}`, holder: leaders[pool], leaseDurationSeconds: 3 },
        },
        `${name}'s view`,
      )
      if (name !== leaders[pool]) t.same(state.leader, { identity: leaders[pool], url: leader.poolPort }, `${name} follows ${leaders[pool]}`)
    }
  }
})

t.test("the followers' pool-wide reads go to their leader; node-specific reads and writes still go to the apiserver", async t => {
  // clients start once the pools have settled: every pool-wide list and watch they cause from now on
  // is the leaders' alone (the topology sources started earlier, before anyone led)
  const mark = simulator.requests.length
  const clients = new Map<string, LocalClient[]>()
  const kubelets: Readable[] = []
  t.teardown(() => {
    for (const c of [...clients.values()].flat()) c.stop()
    // an unread watch body errors when destroyed: nobody else listens any more
    for (const k of kubelets) k.on('error', () => {}).destroy()
  })
  for (const [name, h] of hubs) {
    clients.set(name, [await sliceInformer(h.proxyUrl, kubeProxy, proxySelector), await protobufReflector(h.proxyUrl, '/api/v1/services', kubeProxy)])
    const pods = await request(`${h.proxyUrl}/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3D${name}`, { headers: { 'user-agent': kubelet } })
    t.equal(pods.statusCode, 200, `${name}: kubelet's pods watched`)
    kubelets.push(pods.body)
    const node = await request(`${h.proxyUrl}/api/v1/nodes/${name}`, { headers: { 'user-agent': kubelet } })
    await node.body.dump()
    t.equal(node.statusCode, 200, `${name}: kubelet reads its Node`)
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace: 'kube-node-lease' }, spec: { holderIdentity: name } }
    const write = await request(`${h.proxyUrl}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases`, {
      method: 'POST',
      headers: { 'user-agent': kubelet, 'content-type': 'application/json' },
      body: JSON.stringify(lease),
    })
    await write.body.dump()
    t.equal(write.statusCode, 201, `${name}: kubelet writes its Lease`)
  }

  // every hub's clients see what changes at the apiserver, without listing again
  simulator.create(slice('web-2', '10.1.0.2'))
  simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'shop', 'web-1', { endpoints: [{ addresses: ['10.1.0.9'], conditions: { ready: true } }] })
  simulator.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'api', namespace: 'shop' }, spec: { ports: [{ port: 81 }] } })
  const services = () => new Map(simulator.list('v1', 'Service').map(s => [`${s.metadata.namespace}/${s.metadata.name}`, s.metadata.resourceVersion]))
  await eventually(
    () => [...clients.values()].every(([slices, svc]) => holds(slices, sliceVersions(simulator)) && holds(svc, services())),
    15_000,
    'every hub to show its clients the changes',
  )
  for (const [name, [slices, svc]] of clients) {
    t.same([slices.lists(), svc.lists()], [1, 1], `${name}: kube-proxy listed once (JSON slices, protobuf services)`)
    t.same([...slices.problems, ...svc.problems], [], `${name}: no event twice or out of order`)
  }

  const since = simulator.requests.slice(mark)
  // what a follower may read at the apiserver: a consistent read's proof (a limit=1 list of the cloud's revision), and
  // a client's consistent list (no resourceVersion: client-node's informers) its memory could not prove fresh, relayed
  const proof = (r: { verb: string; query: Record<string, string> }) => r.query.limit === '1' || (r.verb === 'list' && !r.query.resourceVersion)
  const poolWide = (r: { path: string; verb: string; query: Record<string, string> }) =>
    poolWidePaths.includes(r.path) && (r.verb === 'list' || r.verb === 'watch') && !proof(r)
  const byFollowers = since.filter(r => poolWide(r) && followers().some(f => r.user === `system:node:${f}`))
  t.same(
    byFollowers.map(r => `${r.user} ${r.verb} ${r.path}`),
    [],
    'no follower listed or watched a pool-wide resource at the apiserver once its pool had a leader',
  )
  for (const name of hubs.keys()) {
    const by = (verb: string, path: string, method = 'GET') =>
      since.some(r => r.user === `system:node:${name}` && r.verb === verb && r.path === path && r.method === method)
    t.ok(by('watch', '/api/v1/pods'), `${name}: kubelet's pods watched at the apiserver by its own hub`)
    t.ok(by('get', `/api/v1/nodes/${name}`), `${name}: its Node read at the apiserver`)
    t.ok(by('create', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', 'POST'), `${name}: its Lease written at the apiserver`)
  }

  // which watches the apiserver holds: cut them all, and see who watches again
  for (const name of followers()) {
    await eventually(
      async () => (await poolState(hub(name).adminUrl)).resources.every((r: any) => r.from === 'leader'),
      15_000,
      `${name} reading from its leader`,
    )
  }
  const cut = simulator.requests.length
  simulator.dropStreams()
  const rewatched = () => simulator.requests.slice(cut).filter(r => r.watch)
  const key = (r: { path: string; headers: Record<string, any> }) => `${r.path} ${formatOf(r.headers)}`
  // what the pool's clients use: JSON slices and protobuf services (kube-proxy), JSON services and
  // nodes (the followers' topology sources through the leader), the leader's own topology's metadata
  const used = [
    '/apis/discovery.k8s.io/v1/endpointslices json',
    '/api/v1/services protobuf',
    '/api/v1/services json',
    '/api/v1/nodes json',
    '/api/v1/services metadata',
    '/api/v1/nodes metadata',
  ].sort()
  await eventually(
    () =>
      pools.every(pool => used.every(k => rewatched().some(r => r.user === `system:node:${leaders[pool]}` && key(r) === k))) &&
      [...hubs.keys()].every(n => rewatched().some(r => r.user === `system:node:${n}` && r.path === '/api/v1/pods')),
    15_000,
    "the leaders' pool-wide watches and every hub's pods watch to be opened again",
  )
  for (const pool of pools) {
    const watches = rewatched()
      .filter(r => poolWidePaths.includes(r.path) && cluster.namesOf(pool).some(n => r.user === `system:node:${n}`))
      .map(r => `${r.user!.slice('system:node:'.length)} ${key(r)}`)
      .sort()
    t.same(
      watches,
      used.map(k => `${leaders[pool]} ${k}`),
      `pool ${pool}: one pool-wide watch per resource and format used, all the leader's`,
    )
  }
})

t.test('/debug/pool and /metrics say who leads and who follows', async t => {
  for (const pool of pools) {
    const leader = hub(leaders[pool]).adminUrl
    const state = await poolState(leader)
    t.match(state, { role: 'leader', leader: null, fallbacks: 0 }, `${leaders[pool]}: leader`)
    t.ok(state.resources.length > 0 && state.resources.every((r: any) => r.from === 'cloud'), `${leaders[pool]}: its caches read the cloud`)
    t.ok(state.bytes.cloud > 0 && state.bytes.leader === 0, `${leaders[pool]}: bytes from the cloud only (${JSON.stringify(state.bytes)})`)
    t.equal(await metric(leader, 'outpost_pool_leader'), 1, `${leaders[pool]}: outpost_pool_leader 1`)
    t.equal(await metric(leader, 'outpost_pool_following'), 0, `${leaders[pool]}: outpost_pool_following 0`)
  }
  for (const name of followers()) {
    const admin = hub(name).adminUrl
    const state = await poolState(admin)
    t.match(state, { role: 'follower', poolPort: /^https:/, fallbacks: 0 }, `${name}: follower`)
    t.ok(state.bytes.leader > 0, `${name}: bytes from its leader (${JSON.stringify(state.bytes)})`)
    t.equal(await metric(admin, 'outpost_pool_leader'), 0, `${name}: outpost_pool_leader 0`)
    t.equal(await metric(admin, 'outpost_pool_following'), 1, `${name}: outpost_pool_following 1`)
    t.ok((await metric(admin, 'outpost_pool_received_bytes_total', '{from="leader"}'))! > 0, `${name}: bytes received from the leader counted`)
    const watches = (await metricSamples(admin, 'outpost_upstream_watches')).filter(s => !s.labels.includes('"pods"') && s.value > 0)
    t.same(watches, [], `${name}: no pool-wide watch of the apiserver counted`)
  }
})

t.test("the pool port: only nodes' list and watch of the pool-wide resources, refusals as Status objects", async t => {
  const lease = simulator.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'outpost-pool-east')
  const url = new URL(lease.metadata.annotations['outpost.io/pool-address'])
  const pinned = lease.metadata.annotations['outpost.io/pool-certificate']
  const fingerprint = new X509Certificate(pinned).fingerprint256
  const ask = (path: string, options: { cert?: Pem; token?: string; method?: string; at?: URL } = {}) =>
    new Promise<{ code: number; type: string; body: any; res: import('node:http').IncomingMessage }>((resolve, reject) => {
      const at = options.at ?? url
      const req = https.request(
        {
          host: at.hostname,
          port: Number(at.port),
          path,
          method: options.method ?? 'GET',
          // trust what the Lease publishes, as a follower does: that certificate, whatever its name
          ca: pinned,
          checkServerIdentity: (_host, cert) => (cert.fingerprint256 === fingerprint || options.at ? undefined : new Error('not the pinned certificate')),
          rejectUnauthorized: !options.at,
          ...options.cert,
          headers: { accept: 'application/json', ...(options.token ? { authorization: `Bearer ${options.token}` } : {}) },
        },
        res => {
          if (path.includes('watch=true') && res.statusCode === 200)
            return resolve({ code: 200, type: String(res.headers['content-type']), body: undefined, res })
          let text = ''
          res.on('data', chunk => (text += chunk))
          res.on('end', () => resolve({ code: res.statusCode!, type: String(res.headers['content-type']), body: text ? JSON.parse(text) : undefined, res }))
        },
      )
      req.on('error', reject)
      req.end(
        options.method === 'POST' || options.method === 'PUT' ? JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' } }) : undefined,
      )
    })
  const refused = (r: { code: number; body: any }, code: number, reason: string, what: string) => {
    t.equal(r.code, code, `${what}: ${code}`)
    t.match(r.body, { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason }, `${what}: a Status saying ${reason}`)
  }

  const node = await issueClientCertificate(cluster.pki.ca, 'system:node:e9', ['system:nodes'])
  const listed = await ask('/apis/discovery.k8s.io/v1/endpointslices', { cert: node })
  t.equal(listed.code, 200, "a node's certificate lists EndpointSlices")
  t.same(
    new Map(listed.body.items.map((s: any) => [`${s.metadata.namespace}/${s.metadata.name}`, s.metadata.resourceVersion])),
    sliceVersions(simulator),
    "the apiserver's objects at the apiserver's versions",
  )

  refused(await ask('/api/v1/services'), 401, 'Unauthorized', 'no certificate')
  refused(await ask('/api/v1/services', { token: 'a-node-token' }), 401, 'Unauthorized', 'a bearer token')
  refused(await ask('/api/v1/services', { cert: (await createTestPki()).client }), 401, 'Unauthorized', "a node's certificate of another CA")
  refused(await ask('/api/v1/services', { cert: await issueClientCertificate(cluster.pki.ca, 'jane', ['developers']) }), 403, 'Forbidden', 'not a node')
  refused(await ask('/api/v1/services', { cert: await issueClientCertificate(cluster.pki.ca, 'system:node:e9') }), 403, 'Forbidden', 'no group system:nodes')
  refused(await ask('/api/v1/services', { cert: await issueClientCertificate(cluster.pki.ca, 'jane', ['system:nodes']) }), 403, 'Forbidden', 'not a node name')
  refused(await ask('/api/v1/pods', { cert: node }), 403, 'Forbidden', 'pods')
  refused(await ask('/api/v1/pods?watch=true', { cert: node }), 403, 'Forbidden', 'a watch of pods')
  refused(await ask('/api/v1/secrets', { cert: node }), 403, 'Forbidden', 'secrets')
  refused(await ask('/api/v1/namespaces/kube-system/secrets', { cert: node }), 403, 'Forbidden', "a namespace's secrets")
  refused(await ask('/api/v1/namespaces/shop/services', { cert: node, method: 'POST' }), 403, 'Forbidden', 'POST')
  refused(await ask('/api/v1/namespaces/shop/services/web', { cert: node, method: 'PUT' }), 403, 'Forbidden', 'PUT')
  refused(await ask('/api/v1/namespaces/shop/services/web', { cert: node, method: 'DELETE' }), 403, 'Forbidden', 'DELETE')
  t.ok(simulator.get('v1', 'Service', 'shop', 'web'), 'the Service is still there')

  const follower = cluster.namesOf('east').find(n => n !== leaders.east)!
  const atFollower = await ask('/api/v1/services', { cert: node, at: new URL((await poolState(hub(follower).adminUrl)).poolPort) })
  refused(atFollower, 503, 'ServiceUnavailable', "a follower's pool port")

  const services = await ask('/api/v1/services', { cert: node })
  t.match(services, { code: 200, body: { kind: 'ServiceList' } }, "a node's certificate lists Services")
  const watch = await ask(`/api/v1/services?watch=true&resourceVersion=${services.body.metadata.resourceVersion}`, { cert: node })
  t.equal(watch.code, 200, "a node's certificate watches Services")
  const events = readWatch(watch.res)
  t.teardown(() => watch.res.destroy())
  const created = simulator.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'late', namespace: 'shop' }, spec: { ports: [{ port: 82 }] } })
  const seen = await eventually(() => events.events.find(e => e.object?.metadata?.name === 'late'), 10_000, 'the new Service on the watch')
  t.match(seen, { type: 'ADDED', object: { metadata: { resourceVersion: created.metadata.resourceVersion } } }, "at the apiserver's resourceVersion")
  t.equal(simulator.requests.filter(r => r.user === 'jane' || r.user === 'system:node:e9').length, 0, 'nothing the pool port was asked reached the apiserver')
})
