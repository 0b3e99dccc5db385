// Versions never go back for a watcher: after a relist (the outage outlasted the apiserver's window),
// the objects a client-go style watch is sent carry non-decreasing resourceVersions, a DELETED included,
// and a watch restarted from the last version it saw gets every later event once.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { startHarness, eventually, goDark, comeBack } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { request } from 'undici'
import { pipeline } from 'node:stream'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { decodeBody, decodeWatchFrame } from '../lib/codec/typed.ts'
import { plainSlice } from './helpers/plain-slice.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const path = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices'

const slice = (name: string, ip: string) => plainSlice(name, ip)

interface Seen {
  type: string
  name: string
  rv: string
}

/** A client-node watch from `resourceVersion`, recording what each event's object says. */
async function watchFrom(h: Harness, resourceVersion: string) {
  const events: Seen[] = []
  const watch = new k8s.Watch(kubeConfigFor(h.url, kubeProxy))
  const controller = await watch.watch(
    path,
    { resourceVersion, allowWatchBookmarks: false },
    (type, object) => events.push({ type, name: object.metadata?.name, rv: object.metadata?.resourceVersion }),
    () => {},
  )
  return { events, stop: () => controller.abort() }
}

const protobuf = 'application/vnd.kubernetes.protobuf, */*'

/** kube-proxy's protobuf list, then its watch from the list's version, recording what each event's object says. */
async function protobufWatch(h: Harness) {
  const headers = { 'user-agent': kubeProxy, accept: protobuf }
  const list = await request(`${h.url}${path}`, { headers })
  const listed = decodeBody(Buffer.from(await list.body.arrayBuffer())) as any
  const watch = await request(`${h.url}${path}?watch=true&resourceVersion=${listed.metadata.resourceVersion}`, { headers })
  const events: Seen[] = []
  void (async () => {
    try {
      for await (const frame of pipeline(watch.body, new WatchFrameSplitter('protobuf'), () => {})) {
        const event = decodeWatchFrame(frame as Buffer) as any
        events.push({ type: event.type, name: event.object?.metadata?.name, rv: event.object?.metadata?.resourceVersion })
      }
    } catch {
      // cut
    }
  })()
  return { events, stop: () => watch.body.destroy() }
}

const mine = (e: Seen) => e.name?.startsWith('rv-')

t.test('a relist that deletes and changes objects sends versions that never go back, and a restart from the last one sees each event once', async t => {
  const h = await startHarness({ demo: true, config: { healthIntervalMs: 100 } })
  t.teardown(() => h.close())
  // the one to be deleted is the oldest: its held body has the oldest version
  h.simulator.create(slice('rv-gone', '10.2.0.1'))
  h.simulator.create(slice('rv-change', '10.2.0.2'))
  h.simulator.create(slice('rv-keep', '10.2.0.3'))
  const api = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.DiscoveryV1Api)
  const listed = await api.listNamespacedEndpointSlice({ namespace: 'default' })
  const first = await watchFrom(h, listed.metadata!.resourceVersion!)
  t.teardown(() => first.stop())
  const pb = await protobufWatch(h)
  t.teardown(() => pb.stop())

  await goDark(h)
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'rv-change', {
    endpoints: [{ addresses: ['10.2.9.9'], conditions: { ready: true }, nodeName: 'kind-worker2' }],
  })
  h.simulator.create(slice('rv-new', '10.2.0.4'))
  h.simulator.remove('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'rv-gone')
  h.simulator.compact() // the hub's resumed watch gets 410: it relists, and tells the difference
  await comeBack(h)
  await eventually(() => first.events.filter(mine).length >= 3, 15_000, 'the relist’s events')

  const told = first.events.filter(mine)
  t.match(told.map(e => `${e.type} ${e.name}`).sort(), ['ADDED rv-new', 'DELETED rv-gone', 'MODIFIED rv-change'], 'the difference, as events')
  const versions = first.events.map(e => BigInt(e.rv))
  t.ok(
    versions.every((v, i) => i === 0 || v >= versions[i - 1]),
    `versions in the objects never go back: ${first.events.map(e => `${e.type} ${e.name}@${e.rv}`).join(', ')}`,
  )

  await eventually(() => pb.events.filter(mine).length >= 3, 15_000, 'the relist’s events, in protobuf')
  const pbVersions = pb.events.map(e => BigInt(e.rv))
  t.ok(
    pbVersions.every((v, i) => i === 0 || v >= pbVersions[i - 1]),
    `in protobuf too: ${pb.events.map(e => `${e.type} ${e.name}@${e.rv}`).join(', ')}`,
  )

  // client-go resumes from the last object's version: from each one seen, a new watch gets exactly what came after
  for (let i = 0; i < first.events.length; i++) {
    const from = first.events[i].rv
    const again = await watchFrom(h, from)
    const want = first.events.slice(i + 1).filter(e => BigInt(e.rv) > BigInt(from))
    await eventually(() => again.events.length >= want.length, 10_000, `the replay from ${from}`)
    await new Promise(resolve => setTimeout(resolve, 200))
    again.stop()
    t.same(again.events, want, `a watch from ${from} sees no event twice and misses none`)
  }
})
