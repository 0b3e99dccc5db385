// A follower of a node pool can move its shared watch caches between sources (the pool's leader, the
// cloud) without a relist: the resourceVersions are the apiserver's on either side, so each
// reflector resumes its watch from the version it reached, and no local client notices. Here the
// other source is a plain relay in front of the same apiserver, as a leader's pool port is.
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import * as k8s from '@kubernetes/client-node'
import { startHarness, eventually } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { Upstream } from '../lib/upstream/upstream.ts'
import { plainSlice } from './helpers/plain-slice.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

const slice = (name: string, ip: string) => plainSlice(name, ip)

/** A relay in front of the simulator that notes what passes (method, path and query). */
async function relay(t: { teardown(fn: () => unknown): void }, target: string): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = []
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`)
    const upstream = http.request(new URL(req.url!, target), { method: req.method, headers: req.headers }, answer => {
      res.writeHead(answer.statusCode!, answer.headers)
      answer.pipe(res)
    })
    upstream.on('error', () => res.destroy())
    res.on('close', () => upstream.destroy())
    req.pipe(upstream)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>(resolve => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

t.test('the shared caches move to another source and back: resumed watches, no list, informers converge', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const kc = kubeConfigFor(h.url, kubeProxy)
  const api = kc.makeApiClient(k8s.DiscoveryV1Api)
  const informer = k8s.makeInformer(kc, '/apis/discovery.k8s.io/v1/endpointslices', () => api.listEndpointSliceForAllNamespaces())
  let clientLists = 0
  const list = informer as unknown as { on(event: string, fn: () => void): void }
  list.on('connect', () => clientLists++)
  await informer.start()
  t.teardown(() => informer.stop())
  h.simulator.create(slice('src-a', '10.5.0.1'))
  const has = (name: string, ip?: string) => informer.list().some(s => s.metadata?.name === name && (!ip || s.endpoints?.[0]?.addresses?.[0] === ip))
  await eventually(() => has('src-a'), 10_000, 'the informer to see the first slice')

  const hubLists = () =>
    h.simulator.countRequests(
      r => !r.watch && r.verb === 'list' && r.path === '/apis/discovery.k8s.io/v1/endpointslices' && String(r.headers['user-agent']).startsWith('outpost/'),
    )
  const listsBefore = hubLists()
  const connectsBefore = clientLists
  t.ok(connectsBefore > 0, "the informer's own list+watch is counted (so a second one would be)")
  const leader = await relay(t, h.simulator.url)
  const leaderUpstream = new Upstream({ servers: [new URL(leader.url)], credentials: {} })
  t.teardown(() => leaderUpstream.close())

  h.hub.poolSource.use(leaderUpstream)
  await eventually(
    () => leader.seen.some(r => r.startsWith('GET /apis/discovery.k8s.io/v1/endpointslices?') && r.includes('watch=')),
    10_000,
    'the watch to move',
  )
  t.notOk(
    leader.seen.some(r => r.startsWith('GET /apis/discovery.k8s.io/v1/endpointslices') && !r.includes('watch=')),
    'the new source was only watched, never listed',
  )
  t.ok(
    leader.seen.some(r => /resourceVersion=[1-9]/.test(r)),
    'from the version the cache had reached',
  )
  h.simulator.create(slice('src-b', '10.5.0.2'))
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'src-a', { endpoints: [{ addresses: ['10.5.9.9'], conditions: { ready: true } }] })
  await eventually(() => has('src-b') && has('src-a', '10.5.9.9'), 10_000, 'the informer to see what changed after the move')

  const relayed = leader.seen.length
  h.hub.poolSource.use(h.hub.upstream)
  h.simulator.remove('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'src-b')
  await eventually(() => !has('src-b'), 10_000, 'the informer to see the deletion after the move back')
  t.equal(hubLists(), listsBefore, 'the hub listed nothing: both moves resumed the watch')
  t.equal(clientLists, connectsBefore, 'the informer neither relisted nor re-watched')
  t.equal(leader.seen.length, relayed, 'and the relay was left: nothing went through it after the move back')
})
