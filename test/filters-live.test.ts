// The filters beyond service topology, through the running hub, as the node's real clients see them:
// kube-proxy's Service informer (discardcloudservice, nodeportisolation), kubelet's Services, Pods and
// ConfigMaps (masterservice, serviceenvupdater, inclusterconfig), kube-proxy's slice of
// default/kubernetes (forwardkubesvctraffic); JSON and protobuf, online and offline; the flags that
// turn them off, and /debug/filters.
import t from 'tap'
import type { Test } from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import tls from 'node:tls'
import { once } from 'node:events'
import { startHarness, eventually, freePort, goDark } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { kubectl } from './helpers/kubectl.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { decodeUnknown, decodeWatchEvent, objectMeta, splitList } from '../lib/codec/protobuf.ts'
import { decodeBody } from '../lib/codec/typed.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import type { Readable } from 'node:stream'

const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/4c94112'
const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4c94112'
const protobuf = 'application/vnd.kubernetes.protobuf'

const service = (name: string, type: string, annotations: Record<string, string>, nodePort?: number) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default', annotations },
  spec: { type, ports: [{ name: 'http', port: 80, protocol: 'TCP', ...(nodePort ? { nodePort } : {}) }], selector: { app: name } },
})

function edgeServices(h: Harness): void {
  h.simulator.create(service('lb-cloud', 'LoadBalancer', { 'svc.openyurt.io/discard': 'true' }, 30001))
  h.simulator.create(service('np-shanghai', 'NodePort', { 'nodeport.openyurt.io/listen': 'shanghai' }, 30002))
  h.simulator.create(service('np-hangzhou', 'NodePort', { 'nodeport.openyurt.io/listen': 'hangzhou' }, 30003))
  h.simulator.create(service('plain', 'ClusterIP', {}))
}

const ours = (names: Iterable<string>) => [...names].filter(n => ['lb-cloud', 'np-shanghai', 'np-hangzhou', 'plain'].includes(n)).sort()

async function jsonGet(url: string, userAgent: string): Promise<any> {
  const res = await request(url, { headers: { 'user-agent': userAgent } })
  return { status: res.statusCode, body: (await res.body.json()) as any }
}

/** The item names of a protobuf list, read off the wire. */
async function protobufListNames(url: string, userAgent: string): Promise<string[]> {
  const res = await request(url, { headers: { 'user-agent': userAgent, accept: protobuf } })
  const body = Buffer.from(await res.body.arrayBuffer())
  if (res.statusCode !== 200) throw new Error(`${res.statusCode}: ${body.toString()}`)
  const list = decodeUnknown(body)
  if (list.kind !== 'ServiceList') throw new Error(`a ${list.kind}, not a ServiceList`)
  return splitList(Buffer.from(list.raw)).items.map(item => objectMeta(item).name)
}

/** A protobuf watch as kube-proxy, its events as "TYPE name" while it runs. */
async function protobufWatch(url: string, userAgent: string): Promise<{ events: string[]; close(): void }> {
  const res = await request(url, { headers: { 'user-agent': userAgent, accept: protobuf } })
  const events: string[] = []
  const body = res.body as unknown as Readable
  const frames = body.pipe(new WatchFrameSplitter('protobuf'))
  frames.on('data', (frame: Buffer) => {
    const event = decodeWatchEvent(frame)
    events.push(`${event.type} ${objectMeta(Buffer.from(decodeUnknown(event.object).raw)).name}`)
  })
  frames.on('error', () => {})
  return { events, close: () => body.destroy() }
}

async function debugFilters(h: Harness): Promise<Record<string, any>> {
  const { filters } = (await (await request(`${h.hub.adminUrl}/debug/filters`)).body.json()) as { filters: any[] }
  return Object.fromEntries(filters.map(f => [f.name, f]))
}

t.test("kube-proxy's Services: cloud-only and other pools' NodePorts stay out, and move in and out live", async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.nodePool === 'shanghai', 10_000, 'this node in pool shanghai')
  edgeServices(h)

  const kc = kubeConfigFor(h.url, kubeProxy)
  const core = kc.makeApiClient(k8s.CoreV1Api)
  const informer = k8s.makeInformer(kc, '/api/v1/services', () => core.listServiceForAllNamespaces())
  const events: string[] = []
  informer.on('add', s => events.push(`add ${s.metadata?.name}`))
  informer.on('delete', s => events.push(`delete ${s.metadata?.name}`))
  await informer.start()
  t.teardown(() => informer.stop())
  const seen = () => ours(informer.list().map(s => s.metadata!.name!))

  await eventually(() => seen().includes('plain'), 10_000, 'the initial list')
  t.same(seen(), ['np-shanghai', 'plain'], "neither the cloud's LoadBalancer nor hangzhou's NodePort")
  const everyone = await kubectl(h.url, ['get', 'services', '-A', '-o', 'name'])
  t.same(
    ours(
      everyone.stdout
        .trim()
        .split('\n')
        .map(l => l.replace('service/', '')),
    ),
    ['lb-cloud', 'np-hangzhou', 'np-shanghai', 'plain'],
    'kubectl sees every Service',
  )
  t.same(ours(await protobufListNames(`${h.url}/api/v1/services`, kubeProxy)), ['np-shanghai', 'plain'], 'a protobuf list as kube-proxy leaves them out too')
  t.equal(
    (await jsonGet(`${h.url}/api/v1/namespaces/default/services/lb-cloud`, kubeProxy)).status,
    404,
    'a GET as kube-proxy: not found, as if it did not exist',
  )

  const version = h.simulator.currentResourceVersion()
  const wire = await protobufWatch(`${h.url}/api/v1/services?watch=true&resourceVersion=${version}`, kubeProxy)
  t.teardown(() => wire.close())
  h.simulator.patch('v1', 'Service', 'default', 'lb-cloud', { metadata: { annotations: { 'svc.openyurt.io/discard': 'false' } } })
  await eventually(() => seen().includes('lb-cloud'), 10_000, 'lb-cloud to enter')
  h.simulator.patch('v1', 'Service', 'default', 'lb-cloud', { metadata: { annotations: { 'svc.openyurt.io/discard': 'true' } } })
  await eventually(() => !seen().includes('lb-cloud'), 10_000, 'lb-cloud to leave')
  await eventually(() => wire.events.length >= 2, 10_000, 'the protobuf watch')
  t.same(
    wire.events.filter(e => e.endsWith(' lb-cloud')),
    ['ADDED lb-cloud', 'DELETED lb-cloud'],
    'and on a protobuf watch',
  )
  t.same(
    events.filter(e => e.endsWith(' lb-cloud')),
    ['add lb-cloud', 'delete lb-cloud'],
    'an annotation change is an ADDED, then a DELETED, to kube-proxy',
  )

  // this node moves to pool hangzhou: the open watch is re-filtered, no Service was written
  h.simulator.patch('v1', 'Node', '', 'kind-worker2', { metadata: { labels: { 'apps.openyurt.io/nodepool': 'hangzhou' } } })
  await eventually(() => seen().includes('np-hangzhou') && !seen().includes('np-shanghai'), 10_000, 'the NodePorts to follow the pool')
  t.same(
    events.filter(e => e.endsWith('-shanghai') || e.endsWith('-hangzhou')).sort(),
    ['add np-shanghai', 'add np-hangzhou', 'delete np-shanghai'].sort(),
    'the pool change is an ADDED and a DELETED',
  )

  const filters = await debugFilters(h)
  t.ok(filters.discardcloudservice.enabled && filters.discardcloudservice.dropped > 0, '/debug/filters counts what discardcloudservice dropped')
  t.same(filters.discardcloudservice.components, ['kube-proxy'])
  t.ok(filters.nodeportisolation.dropped > 0)
  t.equal(filters.masterservice.enabled, false, 'masterservice is off: no address where pods reach the hub')
  t.match(filters.masterservice.off, /--advertise-address/)
  const metrics = await (await request(`${h.hub.adminUrl}/metrics`)).body.text()
  t.match(metrics, /^outpost_filter_dropped_objects_total\{filter="discardcloudservice"\} [1-9]\d*$/m)

  // offline, from the cache: the same view
  await goDark(h)
  const offline = await jsonGet(`${h.url}/api/v1/services`, kubeProxy)
  t.equal(offline.status, 200)
  t.same(ours(offline.body.items.map((s: any) => s.metadata.name)), ['np-hangzhou', 'plain'], 'offline, the cached list is filtered the same way')
  t.same(ours(await protobufListNames(`${h.url}/api/v1/services`, kubeProxy)), ['np-hangzhou', 'plain'], 'and in protobuf')
})

t.test('--disable-filters and --filter-components turn a filter off, or point it at another component', async t => {
  const h = await startHarness({ demo: true, config: { disabledFilters: ['discardcloudservice'], filterComponents: { nodeportisolation: ['my-proxy'] } } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known && h.hub.topology.nodePool === 'shanghai', 10_000, 'this node in pool shanghai')
  edgeServices(h)
  const list = await jsonGet(`${h.url}/api/v1/services`, kubeProxy)
  t.same(ours(list.body.items.map((s: any) => s.metadata.name)), ['lb-cloud', 'np-hangzhou', 'np-shanghai', 'plain'], 'kube-proxy sees every Service')
  const mine = await jsonGet(`${h.url}/api/v1/services`, 'my-proxy/v1.0')
  t.same(ours(mine.body.items.map((s: any) => s.metadata.name)), ['lb-cloud', 'np-shanghai', 'plain'], 'my-proxy gets nodeportisolation')
  const filters = await debugFilters(h)
  t.equal(filters.discardcloudservice.enabled, false)
  t.match(filters.discardcloudservice.off, /--disable-filters/)
  t.same(filters.nodeportisolation.components, ['my-proxy'])
})

/** A hub with its HTTPS port where pods reach it (169.254.2.1), a pod that pins the apiserver's address, and kube-proxy's ConfigMap. */
async function podsThroughHub(t: Test, disabledFilters: string[] = []): Promise<{ h: Harness; securePort: number }> {
  const securePort = await freePort()
  const certDir = tempDir(t, 'outpost-pki-')
  const h = await startHarness({ demo: true, config: { securePort, certDir, advertiseAddress: '169.254.2.1', disabledFilters } })
  t.teardown(() => h.close())
  await eventually(() => h.hub.topology.known, 10_000, 'the topology context')
  h.simulator.create({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'cni-agent', namespace: 'kube-system' },
    spec: {
      nodeName: 'kind-worker2',
      containers: [
        {
          name: 'agent',
          image: 'agent:1',
          env: [
            { name: 'KUBERNETES_SERVICE_HOST', value: '10.0.0.10' },
            { name: 'KUBERNETES_SERVICE_PORT', value: '6443' },
            { name: 'OTHER', value: 'x' },
          ],
        },
      ],
    },
  })
  h.simulator.create({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'kube-proxy', namespace: 'kube-system' },
    data: {
      'config.conf': 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nclientConnection:\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\nmode: iptables\n',
    },
  })
  return { h, securePort }
}

t.test('pods reach the apiserver through the hub: kubelet and kube-proxy see the hub as default/kubernetes', async t => {
  const { h, securePort } = await podsThroughHub(t)
  // kubelet's own informers: Services (for the pods' variables) and its pods
  const kc = kubeConfigFor(h.url, kubelet)
  const core = kc.makeApiClient(k8s.CoreV1Api)
  const services = k8s.makeInformer(kc, '/api/v1/services', () => core.listServiceForAllNamespaces())
  await services.start()
  t.teardown(() => services.stop())
  const kubernetes = () => services.list('default').find(s => s.metadata?.name === 'kubernetes')
  await eventually(() => kubernetes() !== undefined, 10_000, "kubelet's Service list")
  t.same(kubernetes()!.spec!.clusterIP, '169.254.2.1', 'kubelet sees default/kubernetes at the hub')
  t.same(kubernetes()!.spec!.ports![0].port, securePort, "on the hub's HTTPS port")

  const pod = (await jsonGet(`${h.url}/api/v1/namespaces/kube-system/pods/cni-agent`, kubelet)).body
  t.same(
    pod.spec.containers[0].env,
    [
      { name: 'KUBERNETES_SERVICE_HOST', value: '169.254.2.1' },
      { name: 'KUBERNETES_SERVICE_PORT', value: String(securePort) },
      { name: 'OTHER', value: 'x' },
    ],
    "a pod's pinned apiserver address points at the hub",
  )
  const podRes = await request(`${h.url}/api/v1/namespaces/kube-system/pods/cni-agent`, { headers: { 'user-agent': kubelet, accept: protobuf } })
  const podProtobuf = decodeBody(Buffer.from(await podRes.body.arrayBuffer())) as any
  t.same(podProtobuf.spec.containers[0].env, pod.spec.containers[0].env, 'the same in protobuf, as kubelet reads it')
  const config = (await jsonGet(`${h.url}/api/v1/namespaces/kube-system/configmaps/kube-proxy`, kubelet)).body
  t.match(config.data['config.conf'], /^ {2}#kubeconfig: \/var\/lib\/kube-proxy\/kubeconfig.conf$/m, "kube-proxy's config falls back to in-cluster")

  const slice = (await jsonGet(`${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes`, kubeProxy)).body
  t.same(
    slice.endpoints.map((e: any) => e.addresses),
    [['169.254.2.1']],
    'kube-proxy forwards default/kubernetes to the hub',
  )
  t.equal(slice.ports[0].port, securePort)

  // pods sent to the advertised address verify the hub's certificate there
  const socket = tls.connect({ host: '127.0.0.1', port: securePort, rejectUnauthorized: false })
  await once(socket, 'secureConnect')
  const san = socket.getPeerCertificate().subjectaltname ?? ''
  socket.destroy()
  t.match(san, /IP Address:169\.254\.2\.1\b/, 'the serving certificate names the advertised address')

  // everyone else sees the cluster as it is
  const asIs = await kubectl(h.url, ['get', 'service', 'kubernetes', '-o', 'jsonpath={.spec.clusterIP}'])
  t.equal(asIs.stdout, '10.96.0.1', 'kubectl sees the real clusterIP')

  const filters = await debugFilters(h)
  for (const name of ['masterservice', 'serviceenvupdater', 'inclusterconfig', 'forwardkubesvctraffic'])
    t.ok(filters[name].changed > 0, `${name} changed what it is for`)
})

t.test('--disable-filters: each of the four leaves its object as the apiserver has it', async t => {
  const { h } = await podsThroughHub(t, ['masterservice', 'serviceenvupdater', 'inclusterconfig', 'forwardkubesvctraffic'])
  const service = (await jsonGet(`${h.url}/api/v1/namespaces/default/services/kubernetes`, kubelet)).body
  t.equal(service.spec.clusterIP, '10.96.0.1', 'masterservice off')
  const pod = (await jsonGet(`${h.url}/api/v1/namespaces/kube-system/pods/cni-agent`, kubelet)).body
  t.equal(pod.spec.containers[0].env[0].value, '10.0.0.10', 'serviceenvupdater off')
  const config = (await jsonGet(`${h.url}/api/v1/namespaces/kube-system/configmaps/kube-proxy`, kubelet)).body
  t.match(config.data['config.conf'], /^ {2}kubeconfig:/m, 'inclusterconfig off')
  const slice = (await jsonGet(`${h.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes`, kubeProxy)).body
  t.same(
    slice.endpoints.map((e: any) => e.addresses),
    [['127.0.0.1']],
    'forwardkubesvctraffic off',
  )
  const filters = await debugFilters(h)
  for (const name of ['masterservice', 'serviceenvupdater', 'inclusterconfig', 'forwardkubesvctraffic'])
    t.match(filters[name], { enabled: false, changed: 0 }, `${name} reported off`)
})

t.test('no filter half on: masterservice off turns inclusterconfig off, and /debug/filters and readyz say why', async t => {
  const { h } = await podsThroughHub(t, ['masterservice'])
  const config = (await jsonGet(`${h.url}/api/v1/namespaces/kube-system/configmaps/kube-proxy`, kubelet)).body
  t.match(config.data['config.conf'], /^ {2}kubeconfig:/m, "kube-proxy's kubeconfig line is left alone")
  const filters = await debugFilters(h)
  t.match(filters.inclusterconfig, { enabled: false, off: /masterservice is off, and without it kube-proxy would .* go past the hub/ })
  const readyz = await (await fetch(`${h.hub.adminUrl}/v1/readyz`)).text()
  t.match(readyz, /^ok\n- filter inclusterconfig is off: masterservice is off/m, 'readyz notes it (ready all the same)')
})
