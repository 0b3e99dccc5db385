// A filtered component whose reads the hub does not cache (nginx-ingress-controller by default):
// its watch still follows topology changes, starting from the list it made.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { startHarness, eventually } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'

const ingress = 'nginx-ingress-controller/v1.9.0 (linux/amd64) ingress-nginx/abc'

t.test("nginx-ingress-controller's informer is re-filtered live, though nothing of it is cached", async t => {
  const h = await startHarness({ demo: true, simulator: { bookmarkIntervalMs: 200 } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.annotationOf('default', 'svc-ud1') !== undefined, 10_000, 'the topology context')
  const kc = kubeConfigFor(h.url, ingress)
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api)
  const informer = k8s.makeInformer(kc, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', () =>
    discovery.listNamespacedEndpointSlice({ namespace: 'default' }),
  )
  await informer.start()
  t.teardown(() => informer.stop())
  const addresses = () =>
    (informer.list('default').find(s => s.metadata?.name === 'svc-ud1-abcde')?.endpoints ?? [])
      .flatMap(e => e.addresses)
      .sort()
      .join(',')
  await eventually(() => addresses() !== '', 10_000, 'the initial list')
  t.equal(addresses(), '10.244.1.3,10.244.3.2', 'filtered to the pool')
  t.notOk(
    h.hub.store.all().some(c => c.key.component === 'nginx-ingress-controller'),
    'and not cached',
  )

  h.simulator.patch('v1', 'Service', 'default', 'svc-ud1', { metadata: { annotations: { 'openyurt.io/topologyKeys': 'kubernetes.io/hostname' } } })
  await eventually(() => addresses() === '10.244.1.3', 10_000, 'the annotation change to reach the informer')
  t.pass('a slice the watch never delivered, only the list, follows the change')
})
