// The hardest case of edge autonomy: the node reboots while the cloud is away. The hub is killed
// (-9) and started again offline; kubelet restarts the node's pods, which get new addresses, and
// writes their status: answered 503, yet kube-proxy's informer (client-node, as kube-proxy), a
// protobuf watch and kubectl all see the node's own endpoints at the new addresses, pods of other
// nodes as the cloud last said. The overlay survives another kill -9. Back online, the cloud's state
// wins with no flip back to a dead address and no client relist.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { ApiServerSimulator } from './simulator/server.ts'
import { startHubProcess } from './helpers/hub-process.ts'
import type { HubProcess } from './helpers/hub-process.ts'
import { eventually } from './helpers/hub.ts'
import { processTempDir } from './helpers/temp-dirs.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { kubectl } from './helpers/kubectl.ts'
import { decodeWatchEvent, decodeUnknown } from '../lib/codec/protobuf.ts'
import { decodeObject } from '../lib/codec/typed.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { endpoint, endpointsSeen, listOwnPods, loadCluster, namespace, pods, sendPodDelete, sendStatusPatch, statusPatch } from './helpers/reboot-cluster.ts'

const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'
const slicesPath = '/apis/discovery.k8s.io/v1/endpointslices'

async function debugCache(hub: HubProcess): Promise<any> {
  const res = await request(`${hub.adminUrl}/debug/cache`)
  return res.body.json()
}

async function cloudIs(hub: HubProcess, state: string): Promise<void> {
  await eventually(async () => (await debugCache(hub)).cloud === state, 20_000, `the hub to find the cloud ${state}`)
}

/** kube-proxy's informer on every EndpointSlice, counting its lists (a relist would be a second). */
async function sliceInformer(hub: string) {
  const kc = kubeConfigFor(hub, kubeProxy)
  const api = kc.makeApiClient(k8s.DiscoveryV1Api)
  let lists = 0
  const informer = k8s.makeInformer(kc, slicesPath, () => {
    lists++
    return api.listEndpointSliceForAllNamespaces()
  })
  const updates: string[][] = []
  informer.on('update', () => updates.push(endpointsSeen(informer.list(namespace))))
  informer.on('error', () => {})
  await informer.start()
  return { informer, updates, lists: () => lists, seen: () => endpointsSeen(informer.list(namespace)) }
}

/** A protobuf watch as kube-proxy opens it, decoded event by event. */
async function protobufWatch(hub: string, resourceVersion: string) {
  const res = await request(`${hub}${slicesPath}?watch=1&allowWatchBookmarks=true&resourceVersion=${resourceVersion}`, {
    headers: { accept: 'application/vnd.kubernetes.protobuf;stream=watch', 'user-agent': kubeProxy },
  })
  const events: { type: string; object: any }[] = []
  const splitter = new WatchFrameSplitter('protobuf')
  res.body.pipe(splitter)
  splitter.on('data', (frame: Buffer) => {
    const event = decodeWatchEvent(frame)
    const unknown = decodeUnknown(event.object)
    events.push({ type: event.type, object: event.type === 'BOOKMARK' ? undefined : decodeObject(Buffer.from(unknown.raw), unknown.apiVersion, unknown.kind) })
  })
  splitter.on('error', () => {})
  return { events, close: () => res.body.destroy() }
}

t.test('after a reboot offline, the node endpoints follow what kubelet writes; back online the cloud wins', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  loadCluster(sim)
  const cacheDir = processTempDir('outpost-reboot-')
  const flags = ['--pod-overlay-ttl', '60s']

  // online: kubelet lists its pods, kube-proxy its slices, through the hub (both are cached)
  let hub = await startHubProcess(sim.url, cacheDir, flags)
  t.teardown(() => hub.kill())
  t.equal(await listOwnPods(hub.url), 200)
  const before = await sliceInformer(hub.url)
  t.same(before.seen(), [
    'web-v4: db-1=10.244.2.7 ready',
    'web-v4: web-1=10.244.1.5 ready',
    'web-v4: web-2=10.244.1.6 ready',
    'web-v4: web-3=10.244.1.7 ready',
    'web-v6: web-2=fd00::6 ready',
  ])
  before.informer.stop()
  // kubectl reads discovery online once, as an operator on the node would have
  t.equal((await kubectl(hub.url, ['get', 'endpointslices', '-n', namespace])).code, 0)
  await eventually(async () => (await debugCache(hub)).collections.some((c: any) => c.resource.includes('endpointslices') && c.listed), 20_000, 'slices cached')

  // the cloud goes dark, and the node reboots: the hub is killed and starts again offline
  await sim.setFault('refuse')
  await cloudIs(hub, 'offline')
  await hub.kill()
  hub = await startHubProcess(sim.url, cacheDir, flags)
  await cloudIs(hub, 'offline')

  const proxy = await sliceInformer(hub.url)
  t.teardown(() => proxy.informer.stop())
  t.equal(proxy.seen().length, 5, 'kube-proxy lists the cached slices offline')
  const listed = (await (await request(`${hub.url}${slicesPath}`, { headers: { 'user-agent': kubeProxy } })).body.json()) as any
  const pb = await protobufWatch(hub.url, listed.metadata.resourceVersion)
  t.teardown(() => pb.close())

  // kubelet: web-1 restarted at a new address
  let started = Date.now()
  const web1 = await sendStatusPatch(hub.url, 'web-1', statusPatch('web-1', ['10.244.1.5'], ['10.244.1.9']))
  t.equal(web1.status, 503, 'the status write is still refused: nothing was written')
  t.match(web1.message, /now show it at 10\.244\.1\.9, ready/, 'and the refusal says the endpoints follow it')
  // how soon is the bench's row (reboot.status-to-event.*): the wait here only guards against never
  await eventually(() => proxy.seen().includes('web-v4: web-1=10.244.1.9 ready'), 10_000, "kube-proxy's informer to see web-1's new address")
  t.pass(`the informer saw it (${Date.now() - started} ms after the write)`)

  // web-2 (dual-stack) restarted at new addresses in both families
  await sendStatusPatch(hub.url, 'web-2', statusPatch('web-2', ['10.244.1.6', 'fd00::6'], ['10.244.1.10', 'fd00::10']))
  await eventually(
    () => proxy.seen().includes('web-v4: web-2=10.244.1.10 ready') && proxy.seen().includes('web-v6: web-2=fd00::10 ready'),
    10_000,
    'both families of web-2',
  )
  // a second change to the same slice: web-1 turns unready (client-node drops a MODIFIED at a version it holds)
  await sendStatusPatch(hub.url, 'web-1', statusPatch('web-1', ['10.244.1.5'], ['10.244.1.9'], false))
  await eventually(() => proxy.seen().includes('web-v4: web-1=10.244.1.9 unready'), 10_000, 'web-1 unready')
  // kubelet deletes web-3 once it has terminated: its endpoint goes away
  t.equal(await sendPodDelete(hub.url, 'web-3'), 503)
  await eventually(() => !proxy.seen().some(e => e.includes('web-3')), 10_000, 'web-3 gone')
  const offlineView = ['web-v4: db-1=10.244.2.7 ready', 'web-v4: web-1=10.244.1.9 unready', 'web-v4: web-2=10.244.1.10 ready', 'web-v6: web-2=fd00::10 ready']
  t.same(proxy.seen(), offlineView, "the node's own endpoints follow kubelet; db-1, on another node, is as the cloud said")
  t.ok(
    proxy.updates.every(u => u.includes('web-v4: db-1=10.244.2.7 ready')),
    'no event ever changed the other node pod',
  )

  // a protobuf watch got the same
  await eventually(
    () => pb.events.some(e => e.type === 'MODIFIED' && endpointsSeen([e.object]).includes('web-v4: web-1=10.244.1.9 unready')),
    10_000,
    'protobuf',
  )
  const pbTypes = new Set(pb.events.map(e => e.type))
  t.notOk(pbTypes.has('ADDED') || pbTypes.has('DELETED'), 'the protobuf watch saw only MODIFIED (and BOOKMARK) events')

  // kubectl, offline
  const list = await kubectl(hub.url, ['get', 'endpointslices', '-n', namespace, '-o', 'json'])
  t.equal(list.code, 0, list.stderr)
  t.same(endpointsSeen(JSON.parse(list.stdout).items), offlineView, 'kubectl lists the same offline')

  // the overlay is on disk: another kill -9 and restart, still offline, loses nothing
  proxy.informer.stop()
  pb.close()
  await hub.kill()
  hub = await startHubProcess(sim.url, cacheDir, flags)
  await cloudIs(hub, 'offline')
  const again = await kubectl(hub.url, ['get', 'endpointslices', '-n', namespace, '-o', 'json'])
  t.same(endpointsSeen(JSON.parse(again.stdout).items), offlineView, 'after another kill -9, the same')
  const overlay = (await debugCache(hub)).podOverlay
  t.same(
    overlay.pods.map((p: any) => `${p.pod} ${p.was.join(',')} -> ${p.now.join(',')}`).sort(),
    ['shop/web-1 10.244.1.5 -> 10.244.1.9', 'shop/web-2 10.244.1.6,fd00::6 -> 10.244.1.10,fd00::10', 'shop/web-3 10.244.1.7 -> 10.244.1.7'],
    '/debug/cache shows the overlay: each pod, its old and new addresses',
  )

  // back online. The cloud has caught up on web-1 (kubelet's status reached the apiserver and the
  // controller rewrote the slice) but not yet on web-2: kube-proxy must not flip web-2 back.
  const resumed = await sliceInformer(hub.url)
  t.teardown(() => resumed.informer.stop())
  const v4 = sim.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, 'web-v4')
  const [web1Spec, web2Spec, , db1Spec] = pods
  sim.update({ ...v4, endpoints: [endpoint(web1Spec, '10.244.1.9', false), endpoint(web2Spec, '10.244.1.6'), endpoint(db1Spec, '10.244.2.7')] })
  await sim.setFault('none')
  await cloudIs(hub, 'online')
  started = Date.now()
  await eventually(() => resumed.updates.length > 0 || Date.now() - started > 3_000, 10_000, 'the cloud state to arrive')
  t.notOk(
    resumed.updates.some(u => u.some(e => e.includes('10.244.1.5') || e.includes('10.244.1.6 ') || e.includes('fd00::6 '))),
    'kube-proxy never saw a dead address again',
  )
  t.same(
    resumed.seen(),
    offlineView.filter(e => !e.includes('web-3')),
    "web-2 keeps kubelet's addresses while the cloud lags",
  )
  // the controller catches up on web-2
  sim.update({
    ...sim.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, 'web-v4'),
    endpoints: [endpoint(web1Spec, '10.244.1.9', false), endpoint(web2Spec, '10.244.1.10'), endpoint(db1Spec, '10.244.2.7')],
  })
  sim.update({ ...sim.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, 'web-v6'), endpoints: [endpoint(web2Spec, 'fd00::10')] })
  await eventually(
    async () => {
      const pods = (await debugCache(hub)).podOverlay.pods.map((p: any) => p.pod)
      return !pods.includes('shop/web-1') && !pods.includes('shop/web-2')
    },
    20_000,
    'the overlay to let go of web-1 and web-2 once the cloud names their addresses',
  )
  t.same(resumed.seen(), offlineView, 'the cloud state, the same addresses')
  t.equal(resumed.lists(), 1, 'the informer never relisted')

  // versions: a minted one is never sent to the apiserver, and a real one is never changed
  const minted = overlay.mintedVersions
  t.ok(minted && BigInt(minted.top) > BigInt(minted.over), `versions were minted offline (${JSON.stringify(minted)})`)
  const fromMinted = await request(`${hub.url}${slicesPath}?watch=1&resourceVersion=${minted.top}`, { headers: { 'user-agent': kubeProxy } })
  const expired = (await fromMinted.body.json()) as any
  t.same([fromMinted.statusCode, expired.reason], [410, 'Expired'], 'online, a watch from a minted version is told to start again')
  t.equal(
    sim.countRequests(r => r.query.resourceVersion === minted.top),
    0,
    'the apiserver never heard of the minted version',
  )
  const real = sim.currentResourceVersion() // a real version, inside what the old resume step rewrote
  for (const path of [
    `${slicesPath}?watch=1&resourceVersion=${real}&timeoutSeconds=1`,
    `${slicesPath}?resourceVersion=${real}&resourceVersionMatch=Exact`,
    `/api/v1/namespaces/endpoints?resourceVersion=${real}`,
  ]) {
    const before = sim.countRequests(r => r.query.resourceVersion === real)
    const res = await request(`${hub.url}${path}`, { headers: { 'user-agent': 'kubectl/v1.24.0 (linux/amd64) kubernetes/abc', authorization: 'Bearer x' } })
    await res.body.dump()
    t.equal(
      sim.countRequests(r => r.query.resourceVersion === real),
      before + 1,
      `${path}: relayed with its own version`,
    )
  }
})
