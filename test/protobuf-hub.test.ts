// Protobuf through the running hub, as kube-proxy and kubelet speak it (the simulator now answers
// in protobuf): service topology filtered and re-filtered live on protobuf watches, and a SIGKILL
// in the middle of a protobuf burst, after which the restarted hub still has everything it showed.
import t from 'tap'
import { pipeline } from 'node:stream'
import { request } from 'undici'
import { startHarness, eventually } from './helpers/hub.ts'
import { startDemoCluster } from './simulator/demo.ts'
import { startHubProcess } from './helpers/hub-process.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { decodeBody, decodeWatchFrame } from '../lib/codec/typed.ts'

const kubeProxy = { 'user-agent': 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc', accept: 'application/vnd.kubernetes.protobuf, */*' }
const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89', accept: 'application/vnd.kubernetes.protobuf, */*' }

async function protobufList(url: string, headers: Record<string, string>): Promise<any> {
  const res = await request(url, { headers })
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${await res.body.text()}`)
  if (res.headers['content-type'] !== 'application/vnd.kubernetes.protobuf') throw new Error(`${url}: answered ${String(res.headers['content-type'])}`)
  return decodeBody(Buffer.from(await res.body.arrayBuffer()))
}

function protobufEvents(body: AsyncIterable<Buffer> & NodeJS.ReadableStream) {
  const events: any[] = []
  const done = (async () => {
    try {
      for await (const frame of pipeline(body as any, new WatchFrameSplitter('protobuf'), () => {})) events.push(decodeWatchFrame(frame as Buffer))
    } catch {
      // cut
    }
  })()
  return { events, done }
}

const addresses = (slice: any) =>
  (slice.endpoints ?? [])
    .flatMap((e: any) => e.addresses)
    .sort()
    .join(',')

t.test("kube-proxy's protobuf list is filtered, and its protobuf watch re-filtered when the topology changes", async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.annotationOf('default', 'svc-ud1') !== undefined, 10_000, 'the topology context')
  const base = `${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices`
  const list = await protobufList(base, kubeProxy)
  const ud1 = list.items.find((s: any) => s.metadata.name === 'svc-ud1-abcde')
  t.equal(addresses(ud1), '10.244.1.3,10.244.3.2', 'filtered to the pool, in protobuf')
  const watch = await request(`${base}?watch=true&allowWatchBookmarks=true&resourceVersion=${list.metadata.resourceVersion}`, { headers: kubeProxy })
  t.equal(watch.headers['content-type'], 'application/vnd.kubernetes.protobuf;stream=watch')
  const { events } = protobufEvents(watch.body)
  t.teardown(() => watch.body.destroy())
  h.simulator.patch('v1', 'Service', 'default', 'svc-ud1', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'kubernetes.io/hostname' } } })
  const modified = await eventually(
    () => events.find(e => e.type === 'MODIFIED' && e.object.metadata.name === 'svc-ud1-abcde'),
    10_000,
    'the re-filtered slice',
  )
  t.equal(addresses(modified.object), '10.244.1.3', 'this node only, as a protobuf MODIFIED')
  t.ok(Number(modified.object.metadata.resourceVersion) > Number(ud1.metadata.resourceVersion), 'at a version the client does not hold yet')
  t.ok(Number(modified.object.metadata.resourceVersion) <= Number(h.simulator.currentResourceVersion()), 'and one the cluster has reached')
})

t.test('SIGKILL in the middle of a protobuf burst: the restarted hub, offline, still has every pod it showed kubelet', async t => {
  const simulator = await startDemoCluster()
  t.teardown(() => simulator.close())
  const cacheDir = tempDir(t, 'outpost-pb-kill-')
  const first = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => first.kill())
  const pods = '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2'
  const list = await protobufList(first.url + pods, kubelet)
  const watch = await request(`${first.url}${pods}&watch=true&resourceVersion=${list.metadata.resourceVersion}`, { headers: kubelet })
  const { events } = protobufEvents(watch.body)
  let writing = true
  const writer = (async () => {
    for (let i = 0; writing && i < 5_000; i++) {
      simulator.create({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `burst-${i}`, namespace: 'default' },
        spec: { nodeName: 'kind-worker2', containers: [{ name: 'c', image: 'pause' }] },
      })
      if (i % 50 === 0) await new Promise(resolve => setImmediate(resolve))
    }
  })()
  await eventually(() => events.length >= 200, 30_000, 'a few hundred pods shown to kubelet')
  await first.kill()
  writing = false
  await writer
  const shown = new Map<string, number>()
  for (const e of events) if (e.type === 'ADDED' || e.type === 'MODIFIED') shown.set(e.object.metadata.name, Number(e.object.metadata.resourceVersion))
  t.ok(shown.size >= 200, `${shown.size} pods shown before the kill`)

  await simulator.setFault('refuse')
  const second = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => second.kill())
  const offline = await protobufList(second.url + pods, kubelet)
  const held = new Map<string, number>(offline.items.map((p: any) => [p.metadata.name, Number(p.metadata.resourceVersion)]))
  const lost = [...shown].filter(([name, rv]) => !((held.get(name) ?? 0) >= rv))
  t.same(lost, [], 'every pod shown before the kill is served after it, in protobuf, at least at the version shown')
})
