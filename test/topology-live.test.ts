// The seed scenario: an unmodified kube-proxy (a client-node informer speaking as kube-proxy) on
// node kind-worker2 of pool shanghai, through the hub in front of the demo cluster.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { once } from 'node:events'
import { startHarness, eventually } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

/**
 * A re-filtered object the client already holds at the stream's newest version waits for the
 * stream to move on (lib/watch/refilter.ts): the apiserver's BOOKMARKs move it, about once a
 * minute. The simulator sends them every 5 s unless told; a quarter second keeps each change's wait short.
 */
const demoWithBookmarks = () => startHarness({ demo: true, simulator: { bookmarkIntervalMs: 250 } })

t.test('kube-proxy sees only its topology, and the topology follows the cluster live', async t => {
  const h = await demoWithBookmarks()
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.annotationOf('default', 'svc-ud1') !== undefined, 10_000, 'the topology context')

  const kc = kubeConfigFor(h.url, kubeProxy)
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api)
  const informer = k8s.makeInformer(kc, '/apis/discovery.k8s.io/v1/endpointslices', () => discovery.listEndpointSliceForAllNamespaces())
  await informer.start()
  t.teardown(() => informer.stop())
  const addresses = (slice: string) =>
    (informer.list('default').find(s => s.metadata?.name === slice)?.endpoints ?? [])
      .flatMap(e => e.addresses)
      .sort()
      .join(',')
  const serviceSlice = (service: string) =>
    informer.list('default').find(s => s.metadata?.labels?.['kubernetes.io/service-name'] === service)?.metadata?.name ?? ''

  await eventually(() => addresses('svc-ud1-abcde') !== '', 10_000, 'the initial list')
  t.equal(addresses('svc-ud1-abcde'), '10.244.1.3,10.244.3.2', 'svc-ud1 (openyurt.io/nodepool): the shanghai endpoints only')
  t.equal(addresses(serviceSlice('svc-ud1-without-topology')), '10.244.1.3,10.244.2.3', 'no annotation: both endpoints, the other pool too')
  t.equal(addresses(serviceSlice('svc-host')), '10.244.1.3', 'kubernetes.io/hostname: this node only')

  const sliceVersion = h.simulator.get('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-abcde').metadata.resourceVersion
  h.simulator.patch('v1', 'Service', 'default', 'svc-ud1', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'kubernetes.io/hostname' } } })
  await eventually(() => addresses('svc-ud1-abcde') === '10.244.1.3', 10_000, 'the annotation change to reach the informer')
  t.pass('the informer follows the annotation change')
  t.equal(
    h.simulator.get('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-abcde').metadata.resourceVersion,
    sliceVersion,
    'without any EndpointSlice being written',
  )

  h.simulator.patch('v1', 'Service', 'default', 'svc-ud1', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'openyurt.io/nodepool' } } })
  await eventually(() => addresses('svc-ud1-abcde') === '10.244.1.3,10.244.3.2', 10_000, 'back to the pool')
  h.simulator.patch('v1', 'Node', '', 'kind-worker3', { metadata: { labels: { 'apps.openyurt.io/nodepool': 'hangzhou' } } })
  await eventually(() => addresses('svc-ud1-abcde') === '10.244.1.3', 10_000, 'kind-worker3 leaving the pool to reach the informer')
  t.pass('a node moved from shanghai to hangzhou changes the filtered slices on open watches')

  // others see the cluster as it is; curl -A kube-proxy sees what kube-proxy sees
  const plain = (await (await request(`${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde`)).body.json()) as any
  t.equal(plain.endpoints.length, 4, 'an unlisted component gets the unfiltered slice')
  const asProxy = (await (
    await request(`${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde`, { headers: { 'user-agent': 'kube-proxy' } })
  ).body.json()) as any
  t.equal(asProxy.endpoints.length, 1, 'curl -A kube-proxy shows what kube-proxy sees')

  const metrics = await (await request(`${h.hub.adminUrl}/metrics`)).body.text()
  t.match(metrics, /^outpost_filter_changed_objects_total\{filter="servicetopology"\} [1-9]\d*$/m, 'rewritten slices are counted')
  t.match(metrics, /^outpost_refilter_events_total [1-9]\d*$/m, 're-filter events are counted')
})

t.test('a topology change sends MODIFIED for the slices whose filtered form changed, and nothing else', async t => {
  const h = await demoWithBookmarks()
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.annotationOf('default', 'svc-host') !== undefined, 10_000, 'the topology context')
  const base = `${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices`
  const list = (await (await request(base, { headers: { 'user-agent': kubeProxy } })).body.json()) as any
  const watch = await request(`${base}?watch=true&resourceVersion=${list.metadata.resourceVersion}`, { headers: { 'user-agent': kubeProxy } })
  t.teardown(() => watch.body.destroy())
  const events: any[] = []
  let buffered = ''
  void (async () => {
    for await (const chunk of watch.body) {
      buffered += chunk.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const line of lines) events.push(JSON.parse(line))
    }
  })().catch(() => {})

  // Markers: a label written on the unannotated Service's slice in the cloud, relayed upstream
  // frame on the same ordered stream. Once one has arrived, everything the hub had queued for
  // this watch before it (re-filtered events included) has arrived too; a second marker also
  // covers anything flushed together with the first.
  const markerSlice = list.items.find((s: any) => s.metadata.labels['kubernetes.io/service-name'] === 'svc-ud1-without-topology').metadata.name
  let markers = 0
  const marker = async () => {
    const n = String(++markers)
    h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', markerSlice, { metadata: { labels: { marker: n } } })
    await eventually(
      () => events.some(e => e.object?.metadata?.name === markerSlice && e.object.metadata.labels?.marker === n),
      10_000,
      `marker ${n} on the watch`,
    )
  }
  const everythingSent = async () => {
    await marker()
    await marker()
  }
  const others = () => events.filter(e => e.object?.metadata?.name !== markerSlice).map(e => `${e.type} ${e.object?.metadata?.name}`)
  /** the hub has taken in a topology change (its own handler, registered first, has re-filtered) */
  const topologyChange = () => once(h.hub.topology, 'change')

  // svc-host's slice has endpoints on kind-worker (hangzhou) and kind-worker2 (this node): hostname
  // → pool filters it the same, so nothing is sent; hostname → * brings kind-worker's back
  let changed = topologyChange()
  h.simulator.patch('v1', 'Service', 'default', 'svc-host', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'openyurt.io/nodepool' } } })
  await changed
  t.equal(h.hub.topology.annotationOf('default', 'svc-host'), 'openyurt.io/nodepool', 'the hub took in the annotation change')
  await everythingSent()
  t.same(others(), [], 'an annotation change that filters the same sends nothing')
  h.simulator.patch('v1', 'Service', 'default', 'svc-host', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'kubernetes.io/hostname,*' } } })
  h.simulator.patch('v1', 'Service', 'default', 'svc-host', { metadata: { annotations: { 'openyurt.io/topologyKeys': '*' } } })
  await eventually(() => others().length > 0, 10_000, 'the re-filtered slice')
  await everythingSent()
  const hostSlice = list.items.find((s: any) => s.metadata.labels['kubernetes.io/service-name'] === 'svc-host').metadata.name
  t.same(others(), [`MODIFIED ${hostSlice}`], 'exactly one event, for the one slice whose filtered form changed')
  const refiltered = events.find(e => e.object?.metadata?.name === hostSlice)
  t.equal(refiltered.object.endpoints.length, 2, 'now with both endpoints')
  const sent = Number(refiltered.object.metadata.resourceVersion)
  t.ok(sent > Number(list.items.find((s: any) => s.metadata.name === hostSlice).metadata.resourceVersion), 'a version newer than the one the client holds')
  t.ok(sent >= Number(list.metadata.resourceVersion), 'at least where the stream started')

  // a change that filters nothing differently sends nothing
  const touched = h.simulator.patch('v1', 'Service', 'default', 'svc-ud1-without-topology', { metadata: { labels: { touched: 'yes' } } })
  await eventually(
    () => BigInt(h.hub.topology.resourceVersion) >= BigInt(touched.metadata.resourceVersion),
    10_000,
    "the hub's Service reflector to see the change",
  )
  await everythingSent()
  t.same(others(), [`MODIFIED ${hostSlice}`], 'an unrelated Service change sends nothing')
  t.same(
    events.filter(e => e.object?.metadata?.name === markerSlice).map(e => `${e.type} marker=${e.object.metadata.labels?.marker}`),
    Array.from({ length: markers }, (_, i) => `MODIFIED marker=${i + 1}`),
    'and the marker slice got exactly its own changes',
  )
})
