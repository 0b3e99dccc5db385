// The multiplexer (issue 26): one shared watch cache per resource and wire format, however many
// selectors, namespaces and components read through the hub. Every narrower list and watch is
// answered from it exactly as the apiserver would answer it (the simulator is the reference, asked
// the same question directly), an object moving in or out of a watcher's selector is ADDED or
// DELETED to it, a get or list at resourceVersion=0 is answered without asking the apiserver, and
// what clients send never adds an upstream watch, a metric series or an unbounded debug listing.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import type { Dispatcher } from 'undici'
import { startHarness, eventually } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { decodeBody } from '../lib/codec/typed.ts'

const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'
const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const coredns = 'coredns/1.9.3 (linux/amd64) kubernetes/abc'
const nginxIngress = 'nginx-ingress-controller/v1.9.4 (linux/amd64) ingress-nginx/abc'
const protobuf = 'application/vnd.kubernetes.protobuf, */*'
const isProtobuf = (accept: unknown) => String(accept).startsWith('application/vnd.kubernetes.protobuf')
const byHub = (r: { headers: Record<string, unknown> }) => String(r.headers['user-agent']).startsWith('outpost/')

/** A request for metadata only (`as=PartialObjectMetadata`): the hub's own topology and filter sources, not a watch cache's. */
const metadataOnly = (accept: unknown) => String(accept).includes('as=PartialObjectMetadata')

/** Upstream watches of whole objects the hub opened on `path`, in one wire format. */
function upstreamWatches(h: Harness, path: string, format: 'json' | 'protobuf'): number {
  return h.simulator.countRequests(
    r => r.watch && r.path === path && byHub(r) && !metadataOnly(r.headers.accept) && (format === 'protobuf') === isProtobuf(r.headers.accept),
  )
}

/** A list's items' `namespace/name`, in the order given, from a JSON body. */
const namesOf = (list: any): string[] =>
  (list.items ?? []).map((o: any) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name))

/** Marks the test's own requests straight to the simulator, told apart from what the hub relays. */
const directMark = 'x-test-direct'

/** GET `pathAndQuery` from `base` (the hub) as a component with no Authorization header: status and parsed JSON. */
async function getJson(base: string, pathAndQuery: string, userAgent: string): Promise<{ status: number; body: any }> {
  return answerOf(await request(`${base}${pathAndQuery}`, { headers: { 'user-agent': userAgent, accept: 'application/json' } }), pathAndQuery)
}

/** Status and parsed body; a watch that was accepted is closed at once (its body is only its status then). */
async function answerOf(res: Dispatcher.ResponseData, pathAndQuery: string): Promise<{ status: number; body: any }> {
  if (res.statusCode === 200 && /[?&]watch=(true|1)(&|$)/.test(pathAndQuery)) {
    res.body.destroy()
    return { status: res.statusCode, body: 'a watch stream' }
  }
  return { status: res.statusCode, body: await res.body.json() }
}

/** The same request straight to the simulator: the apiserver's own answer. */
async function getDirect(h: Harness, pathAndQuery: string, userAgent: string): Promise<{ status: number; body: any }> {
  return answerOf(
    await request(`${h.simulator.url}${pathAndQuery}`, { headers: { 'user-agent': userAgent, accept: 'application/json', [directMark]: '1' } }),
    pathAndQuery,
  )
}

/** Requests of components (not the hub's own, not the test's direct ones) that reached the simulator on a path. */
function relayedFromClients(h: Harness, path: RegExp): number {
  return h.simulator.countRequests(r => path.test(r.path) && !byHub(r) && r.headers[directMark] === undefined)
}

/**
 * The first read of a shared cache waits for its upstream list (a 429 after 3 s): a list at
 * resourceVersion=0 through the hub, until the cache answers it.
 */
async function warm(h: Harness, pathAndQuery: string, headers: Record<string, string>): Promise<void> {
  await eventually(
    async () => {
      const res = await request(`${h.url}${pathAndQuery}${pathAndQuery.includes('?') ? '&' : '?'}resourceVersion=0`, { headers })
      await res.body.arrayBuffer()
      return res.statusCode === 200
    },
    20_000,
    `${pathAndQuery} to be listed through the hub`,
  )
}

const service = (namespace: string, name: string, labels: Record<string, string>, spec: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace, labels },
  spec: { ports: [{ port: 80, protocol: 'TCP' }], ...spec },
})

const slice = (namespace: string, name: string, labels: Record<string, string>, ip: string) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace, labels: { 'kubernetes.io/service-name': name, ...labels } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true }, nodeName: 'kind-worker2' }],
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})

const pod = (namespace: string, name: string, nodeName: string, phase: string | undefined, labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace, labels },
  spec: { nodeName, containers: [{ name: 'c', image: 'busybox' }] },
  ...(phase ? { status: { phase } } : {}),
})

/** The hub's series (`name{labels}`, values left out) of its own metrics. */
async function outpostSeries(h: Harness): Promise<string[]> {
  const text = await (await request(`${h.hub.adminUrl}/metrics`)).body.text()
  return text
    .split('\n')
    .filter(line => line.startsWith('outpost_'))
    .map(line => line.slice(0, line.lastIndexOf(' ')))
    .sort()
}

async function debugCaches(h: Harness): Promise<any[]> {
  return ((await (await request(`${h.hub.adminUrl}/debug/cache`)).body.json()) as any).watchCaches
}

t.test('300 label selectors and 50 namespaces, listed and watched: one upstream watch per format, no new series, a bounded debug listing', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  // 300 Services, x=v1..v300, six in each of 50 namespaces: each selector picks exactly one
  const namespaceOf = (i: number) => `mx-${((i - 1) % 50) + 1}`
  for (let i = 1; i <= 300; i++) h.simulator.create(service(namespaceOf(i), `svc-${i}`, { x: `v${i}` }))
  const path = '/api/v1/services'
  const open: { destroy(): void }[] = []
  t.teardown(() => open.forEach(w => w.destroy()))

  /**
   * A list at resourceVersion=0 (as client-go's reflectors list: from the watch cache; a list without
   * one is a consistent read the apiserver answers), then a watch from the list's version; the watch
   * kept open or closed at once.
   */
  async function listAndWatch(pathAndQuery: string, format: 'json' | 'protobuf', keepOpen: boolean): Promise<string[]> {
    const headers = { 'user-agent': kubeProxy, accept: format === 'json' ? 'application/json' : protobuf }
    const sep = pathAndQuery.includes('?') ? '&' : '?'
    const res = await request(`${h.url}${pathAndQuery}${sep}resourceVersion=0`, { headers })
    if (res.statusCode !== 200) {
      t.fail(`list ${pathAndQuery} (${format}): ${res.statusCode} ${await res.body.text()}`)
      return []
    }
    const list: any = format === 'json' ? await res.body.json() : decodeBody(Buffer.from(await res.body.arrayBuffer()))
    const watch = await request(`${h.url}${pathAndQuery}${sep}watch=true&resourceVersion=${list.metadata.resourceVersion}`, { headers })
    if (watch.statusCode !== 200) t.fail(`watch ${pathAndQuery} (${format}): ${watch.statusCode} ${await watch.body.text()}`)
    else if (keepOpen) open.push(watch.body)
    else watch.body.destroy()
    return namesOf(list)
  }
  const bySelector = (i: number) => `${path}?labelSelector=${encodeURIComponent(`x=v${i}`)}`
  const byNamespace = (n: number) => `/api/v1/namespaces/mx-${n}/services`
  const servicesCache = (format: string) => async () => (await debugCaches(h)).find(c => c.resource === 'services' && c.format === format)
  const noWatchers = () =>
    eventually(async () => (await debugCaches(h)).filter(c => c.resource === 'services').every(c => c.watchers === 0), 15_000, 'the watches to close')

  await warm(h, path, { 'user-agent': kubeProxy, accept: 'application/json' })
  await warm(h, path, { 'user-agent': kubeProxy, accept: protobuf })
  // the first ten selectors, five namespaces and three protobuf reads: every kind of request once
  let wrong = 0
  for (let i = 1; i <= 10; i++) if ((await listAndWatch(bySelector(i), 'json', false)).join() !== `${namespaceOf(i)}/svc-${i}`) wrong++
  for (let n = 1; n <= 5; n++) if ((await listAndWatch(byNamespace(n), 'json', false)).length !== 6) wrong++
  for (let i = 1; i <= 3; i++) if ((await listAndWatch(bySelector(i), 'protobuf', false)).join() !== `${namespaceOf(i)}/svc-${i}`) wrong++
  await noWatchers()
  const seriesAfterTen = await outpostSeries(h)
  t.ok(seriesAfterTen.length > 0, 'the hub has outpost_ series')

  // the rest, their watches kept open: 290 selectors and 45 namespaces in JSON, three more in protobuf
  for (let i = 11; i <= 300; i++) if ((await listAndWatch(bySelector(i), 'json', true)).join() !== `${namespaceOf(i)}/svc-${i}`) wrong++
  for (let n = 6; n <= 50; n++) if ((await listAndWatch(byNamespace(n), 'json', true)).length !== 6) wrong++
  for (let i = 4; i <= 6; i++) if ((await listAndWatch(bySelector(i), 'protobuf', true)).join() !== `${namespaceOf(i)}/svc-${i}`) wrong++
  t.equal(wrong, 0, 'every selector and namespace lists exactly its Services')

  t.equal(upstreamWatches(h, path, 'json'), 1, 'one upstream JSON watch of services for 350 JSON lists and watches')
  t.equal(upstreamWatches(h, path, 'protobuf'), 1, 'one upstream protobuf watch of services for the protobuf clients')
  t.equal(
    h.simulator.countRequests(r => r.path.endsWith('/services') && !byHub(r)),
    0,
    "no client's own list or watch of services reaches the apiserver",
  )
  t.equal(
    h.simulator.countRequests(r => r.path.endsWith('/services') && byHub(r) && (r.path !== path || 'labelSelector' in r.query || 'fieldSelector' in r.query)),
    0,
    'the hub asks only for all services, cluster-wide',
  )

  const json = await eventually(
    async () => {
      const c = await servicesCache('json')()
      return c?.watchers === 335 && c
    },
    15_000,
    'the JSON cache to count 335 watchers',
  )
  t.equal(json.scope, 'all', 'the JSON cache keeps all services')
  t.ok(json.selections.length <= 16, `a bounded list of selections (${json.selections.length})`)
  t.equal(json.selections.length + json.otherSelections, 335, 'and the rest counted: 290 selectors and 45 namespaces')
  t.ok(
    json.selections.every((s: any) => s.watchers === 1 && /^(labelSelector=x=v\d+|namespace=mx-\d+)$/.test(s.selection)),
    'each listed selection named as the client asked',
  )
  const pb = await servicesCache('protobuf')()
  t.equal(pb?.watchers, 3, 'the protobuf cache has its three watchers')
  t.equal((await debugCaches(h)).filter(c => c.resource === 'services').length, 2, 'two service caches: one per format')

  t.same(await outpostSeries(h), seriesAfterTen, 'no new outpost_ series with 335 more selections watched')
  open.splice(0).forEach(w => w.destroy())
  await noWatchers()
  const seriesAtEnd = await outpostSeries(h)
  t.same(seriesAtEnd, seriesAfterTen, 'nor once they are closed')
  t.equal(seriesAtEnd.length, seriesAfterTen.length, `the same number of outpost_ series lines (${seriesAtEnd.length})`)
})

t.test("kube-proxy's, coredns's and nginx-ingress's EndpointSlice informers: one upstream watch, each sees what the apiserver would show it", async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const proxySelector = '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name'
  h.simulator.create(slice('default', 'mx-headless', { 'service.kubernetes.io/headless': '' }, '10.3.0.1'))
  h.simulator.create(slice('default', 'mx-proxied-elsewhere', { 'service.kubernetes.io/service-proxy-name': 'other' }, '10.3.0.2'))
  h.simulator.create(slice('ingress-apps', 'mx-web', {}, '10.3.0.3'))
  h.simulator.create(slice('ingress-apps', 'mx-api', { 'service.kubernetes.io/headless': '' }, '10.3.0.4'))

  const all = '/apis/discovery.k8s.io/v1/endpointslices'
  const nginxPath = '/apis/discovery.k8s.io/v1/namespaces/ingress-apps/endpointslices'
  // each lists at resourceVersion=0, as client-go's reflectors do (a list without one is a consistent
  // read, which the hub relays to the apiserver while it answers)
  const make = (userAgent: string, path: string, list: (api: k8s.DiscoveryV1Api) => Promise<k8s.V1EndpointSliceList>, labelSelector?: string) => {
    const kc = kubeConfigFor(h.url, userAgent)
    const api = kc.makeApiClient(k8s.DiscoveryV1Api)
    return k8s.makeInformer(kc, path, () => list(api), labelSelector)
  }
  const clients = [
    {
      name: 'kube-proxy',
      query: `${all}?labelSelector=${encodeURIComponent(proxySelector)}`,
      informer: make(kubeProxy, all, api => api.listEndpointSliceForAllNamespaces({ labelSelector: proxySelector, resourceVersion: '0' }), proxySelector),
    },
    { name: 'coredns', query: all, informer: make(coredns, all, api => api.listEndpointSliceForAllNamespaces({ resourceVersion: '0' })) },
    {
      name: 'nginx-ingress',
      query: nginxPath,
      informer: make(nginxIngress, nginxPath, api => api.listNamespacedEndpointSlice({ namespace: 'ingress-apps', resourceVersion: '0' })),
    },
  ]
  const errors: string[] = []
  for (const c of clients) {
    c.informer.on('error', err => errors.push(`${c.name}: ${err}`))
    await c.informer.start()
  }
  t.teardown(() => Promise.all(clients.map(c => c.informer.stop())))

  const held = (c: (typeof clients)[number]) =>
    c.informer
      .list()
      .map(s => `${s.metadata!.namespace}/${s.metadata!.name}`)
      .sort()
  const direct = async (query: string) => namesOf((await getDirect(h, query, 'test/direct')).body).sort()
  const converge = async (what: string) => {
    for (const c of clients) {
      let want: string[] = []
      await eventually(
        async () => {
          want = await direct(c.query)
          return held(c).join() === want.join()
        },
        20_000,
        `${c.name} to converge (${what})`,
      ).catch(error => {
        t.fail(`${c.name} (${what}): holds ${held(c).join(' ')}; the apiserver answers ${want.join(' ')}`)
        throw error
      })
      t.pass(`${c.name} holds what the apiserver lists for it (${what}): ${want.length} slices`)
    }
  }

  await converge('initial')
  t.notOk(held(clients[0]).includes('default/mx-headless'), 'kube-proxy does not hold a headless slice')
  t.notOk(held(clients[0]).includes('default/mx-proxied-elsewhere'), "nor one another proxy's")
  t.ok(held(clients[1]).includes('default/mx-headless'), 'coredns holds it')
  t.same(held(clients[2]), ['ingress-apps/mx-api', 'ingress-apps/mx-web'], 'nginx-ingress holds its namespace only')

  // a slice leaves kube-proxy's selector, then comes back
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-abcde', { metadata: { labels: { 'service.kubernetes.io/headless': '' } } })
  await converge('a slice turned headless')
  t.notOk(held(clients[0]).includes('default/svc-ud1-abcde'), 'kube-proxy was told it is gone')
  t.ok(held(clients[1]).includes('default/svc-ud1-abcde'), 'coredns still holds it')
  h.simulator.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-abcde', { metadata: { labels: { 'service.kubernetes.io/headless': null } } })
  await converge('the slice no longer headless')
  t.ok(held(clients[0]).includes('default/svc-ud1-abcde'), 'kube-proxy was told it is back')

  // one created in and one deleted from nginx-ingress's namespace
  h.simulator.create(slice('ingress-apps', 'mx-new', {}, '10.3.0.5'))
  h.simulator.remove('discovery.k8s.io/v1', 'EndpointSlice', 'ingress-apps', 'mx-web')
  await converge('one created and one deleted in ingress-apps')
  t.same(held(clients[2]), ['ingress-apps/mx-api', 'ingress-apps/mx-new'], 'nginx-ingress follows its namespace')
  t.ok(held(clients[0]).includes('ingress-apps/mx-new') && !held(clients[0]).includes('ingress-apps/mx-web'), 'and so does kube-proxy')

  t.equal(upstreamWatches(h, all, 'json'), 1, 'exactly one upstream JSON watch of endpointslices')
  t.equal(upstreamWatches(h, all, 'protobuf'), 0, 'and none in protobuf')
  t.equal(relayedFromClients(h, /\/endpointslices$/), 0, "no informer's own list or watch reaches the apiserver")
  t.same(errors, [], 'no informer saw an error')
})

t.test('every label selector operator and each supported field selector: the same items, in the same order, as the apiserver', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const web = h.simulator.create(service('sel-a', 'web-prod', { tier: 'web', env: 'prod' }))
  h.simulator.create(service('sel-a', 'db-prod', { tier: 'db', env: 'prod' }))
  h.simulator.create(service('sel-a', 'web-dev', { tier: 'web', env: 'dev' }))
  h.simulator.create(service('sel-a', 'cache', { tier: 'cache' }))
  h.simulator.create(service('sel-a', 'bare', {}))
  h.simulator.create(service('sel-b', 'web-nodeport', { tier: 'web', env: 'prod' }, { type: 'NodePort' }))
  h.simulator.create(service('sel-b', 'db-headless', { tier: 'db' }, { clusterIP: 'None' }))
  h.simulator.create(pod('default', 'mx-running', 'kind-worker2', 'Running', { app: 'mx', tier: 'web' }))
  h.simulator.create(pod('default', 'mx-done', 'kind-worker2', 'Succeeded', { app: 'mx' }))
  h.simulator.create(pod('sel-a', 'mx-pending', 'kind-worker2', 'Pending', { app: 'mx', tier: 'db' }))
  h.simulator.create(pod('sel-a', 'mx-elsewhere', 'kind-worker', 'Running', { app: 'mx' }))
  h.simulator.patch('v1', 'Node', '', 'kind-worker3', { spec: { unschedulable: true } })
  h.simulator.create(slice('sel-a', 'mx-slice', { tier: 'web' }, '10.4.0.1'))

  // at resourceVersion=0, from the watch cache (without one, a consistent read: relayed to the apiserver)
  const q = (path: string, params: Record<string, string>) =>
    `${path}?${Object.entries({ ...params, resourceVersion: '0' })
      .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
      .join('&')}`
  const labelSelectors = [
    'tier=web',
    'tier==web',
    'tier!=web',
    'tier in (web,db)',
    'tier notin (web,cache)',
    'env',
    '!env',
    'tier=web,env!=dev',
    'tier in (web),env in (prod,dev)',
    'env,!tier',
    'tier notin (db),env',
    'tier=nothing',
  ]
  const cases: { path: string; userAgent: string }[] = []
  for (const labelSelector of labelSelectors) {
    cases.push({ path: q('/api/v1/services', { labelSelector }), userAgent: kubeProxy })
    cases.push({ path: q('/api/v1/namespaces/sel-a/services', { labelSelector }), userAgent: kubeProxy })
  }
  const services = [
    'metadata.name!=web-prod',
    'metadata.namespace=sel-b',
    'metadata.namespace!=default',
    `spec.clusterIP=${web.spec.clusterIP}`,
    'spec.clusterIP=None',
    'spec.clusterIP!=None',
    'spec.type=NodePort',
    'spec.type!=ClusterIP',
    'spec.type=ClusterIP,metadata.namespace=sel-a',
  ]
  for (const fieldSelector of services) cases.push({ path: q('/api/v1/services', { fieldSelector }), userAgent: kubeProxy })
  // metadata.name=… within a namespace: the simulator answers a cluster-wide one 404 (see the end of this test)
  cases.push({ path: q('/api/v1/namespaces/sel-a/services', { fieldSelector: 'metadata.name=web-prod' }), userAgent: kubeProxy })
  cases.push({ path: q('/api/v1/namespaces/sel-a/services', { fieldSelector: 'metadata.name=web-prod', labelSelector: 'env' }), userAgent: kubeProxy })
  cases.push({
    path: q('/api/v1/namespaces/sel-a/services', { fieldSelector: 'spec.type=ClusterIP', labelSelector: 'tier in (web,db)' }),
    userAgent: kubeProxy,
  })
  cases.push({ path: q('/api/v1/services', { fieldSelector: 'metadata.namespace=sel-a', labelSelector: '!env' }), userAgent: kubelet })
  const pods = [
    'spec.nodeName=kind-worker2',
    'spec.nodeName=kind-worker2,status.phase=Running',
    'spec.nodeName=kind-worker2,status.phase!=Running',
    'spec.nodeName=kind-worker2,metadata.namespace=sel-a',
    'spec.nodeName=kind-worker2,metadata.name!=mx-done',
  ]
  for (const fieldSelector of pods) cases.push({ path: q('/api/v1/pods', { fieldSelector }), userAgent: kubelet })
  cases.push({ path: q('/api/v1/namespaces/default/pods', { fieldSelector: 'spec.nodeName=kind-worker2,metadata.name=mx-done' }), userAgent: kubelet })
  cases.push({ path: q('/api/v1/namespaces/default/pods', { fieldSelector: 'spec.nodeName=kind-worker2' }), userAgent: kubelet })
  cases.push({ path: q('/api/v1/pods', { fieldSelector: 'spec.nodeName=kind-worker2', labelSelector: 'app=mx,tier' }), userAgent: kubelet })
  cases.push({ path: q('/api/v1/pods', { fieldSelector: 'spec.nodeName=kind-worker2', labelSelector: 'tier notin (web)' }), userAgent: kubelet })
  const nodes = [
    'metadata.name=kind-worker2',
    'metadata.name!=kind-worker2',
    'spec.unschedulable=true',
    'spec.unschedulable!=true',
    // a node without spec.unschedulable reads "false" to the apiserver (strconv.FormatBool)
    'spec.unschedulable=false',
  ]
  for (const fieldSelector of nodes) cases.push({ path: q('/api/v1/nodes', { fieldSelector }), userAgent: kubelet })
  cases.push({ path: q('/api/v1/nodes', { labelSelector: 'apps.openyurt.io/nodepool in (shanghai)' }), userAgent: kubelet })
  cases.push({ path: q('/api/v1/nodes', { labelSelector: 'apps.openyurt.io/nodepool!=shanghai,topology.kubernetes.io/region' }), userAgent: kubelet })
  for (const fieldSelector of ['metadata.namespace=sel-a', 'metadata.namespace!=default'])
    cases.push({ path: q('/apis/discovery.k8s.io/v1/endpointslices', { fieldSelector }), userAgent: kubeProxy })
  cases.push({ path: q('/apis/discovery.k8s.io/v1/namespaces/sel-a/endpointslices', { fieldSelector: 'metadata.name=mx-slice' }), userAgent: kubeProxy })
  cases.push({ path: q('/apis/discovery.k8s.io/v1/endpointslices', { labelSelector: 'kubernetes.io/service-name in (svc-ud1,mx-slice)' }), userAgent: coredns })

  await warm(h, '/api/v1/services', { 'user-agent': kubeProxy })
  await warm(h, '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2', { 'user-agent': kubelet })
  await warm(h, '/api/v1/nodes', { 'user-agent': kubelet })
  await warm(h, '/apis/discovery.k8s.io/v1/endpointslices', { 'user-agent': kubeProxy })
  for (const { path, userAgent } of cases) {
    const direct = await getDirect(h, path, userAgent)
    const hub = await getJson(h.url, path, userAgent)
    t.equal(hub.status, direct.status, `${path}: the same status (${direct.status})`)
    t.same(namesOf(hub.body), namesOf(direct.body), `${path}: ${namesOf(direct.body).join(' ') || 'nothing'}`)
  }

  t.equal(relayedFromClients(h, /\/(services|pods|nodes|endpointslices)$/), 0, "every one answered from the hub's shared caches: none relayed to the apiserver")

  // A cluster-wide list by metadata.name (kubectl get svc -A --field-selector metadata.name=web-prod):
  // kube-apiserver lists the objects of that name in every namespace; the simulator answers 404
  // (test/simulator/handlers.ts refuses a namespaced name without a namespace, the name being
  // the one apiserverRequestInfo took from the field selector), so the reference is its whole list, filtered here.
  for (const [path, name, userAgent] of [
    ['/api/v1/services', 'web-prod', kubeProxy],
    ['/apis/discovery.k8s.io/v1/endpointslices', 'mx-slice', kubeProxy],
  ]) {
    const everything = await getDirect(h, `${path}?resourceVersion=0`, userAgent)
    const hub = await getJson(h.url, q(path, { fieldSelector: `metadata.name=${name}` }), userAgent)
    t.equal(hub.status, 200, `${path} by metadata.name=${name}, cluster-wide: 200`)
    t.same(
      namesOf(hub.body),
      namesOf(everything.body).filter(n => n.endsWith(`/${name}`)),
      'the objects of that name in every namespace',
    )
  }
})

// The reference is the simulator refusing unsupported field labels as kube-apiserver does
// (test/simulator-fieldselectors.test.ts); the hub's answer comes from lib/api/field-selectors.ts.
t.test('a field selector the apiserver does not support: the same 400 BadRequest through the hub as direct', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  // lists at resourceVersion=0 and watches: the shared caches' to answer (a list without one is relayed)
  const cases: [string, string][] = [
    [`/api/v1/services?resourceVersion=0&fieldSelector=${encodeURIComponent('spec.foo=bar')}`, kubeProxy],
    [`/api/v1/namespaces/default/services?resourceVersion=0&fieldSelector=${encodeURIComponent('spec.foo=bar,metadata.name=kubernetes')}`, kubeProxy],
    [`/api/v1/services?watch=true&fieldSelector=${encodeURIComponent('spec.foo=bar')}`, kubeProxy],
    [`/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0&fieldSelector=${encodeURIComponent('addressType=IPv4')}`, coredns],
    [`/api/v1/nodes?resourceVersion=0&fieldSelector=${encodeURIComponent('metadata.namespace=default')}`, kubelet],
    [`/api/v1/pods?resourceVersion=0&fieldSelector=${encodeURIComponent('spec.nodeName=kind-worker2,status.hostIP=10.0.0.1')}`, kubelet],
  ]
  for (const [path, userAgent] of cases) {
    const direct = await getDirect(h, path, userAgent)
    const hub = await getJson(h.url, path, userAgent)
    t.equal(direct.status, 400, `${path}: the apiserver says 400 (${direct.body?.message})`)
    t.match(direct.body, { kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400 })
    t.equal(hub.status, 400, `${path}: so does the hub`)
    t.same(hub.body, direct.body, `${path}: with the same Status`)
  }
  t.equal(relayedFromClients(h, /\/(services|pods|nodes|endpointslices)$/), 0, 'the hub answered each itself: none relayed to the apiserver')
})

t.test('a get and a list at resourceVersion=0 are answered from the shared cache; a get without one is relayed', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const json = { 'user-agent': kubelet, accept: 'application/json' }
  const pb = { 'user-agent': kubelet, accept: protobuf }
  // warm the node and service caches, in both formats, and wait for their upstream watches
  for (const headers of [json, pb]) for (const path of ['/api/v1/nodes', '/api/v1/services']) await warm(h, path, headers)
  for (const path of ['/api/v1/nodes', '/api/v1/services'])
    await eventually(() => upstreamWatches(h, path, 'json') === 1 && upstreamWatches(h, path, 'protobuf') === 1, 15_000, `the upstream watches of ${path}`)

  const nodePath = '/api/v1/nodes/kind-worker'
  const relayed = (path: string) => h.simulator.countRequests(r => r.path === path && !r.watch && r.headers[directMark] === undefined)
  const nodeBefore = relayed(nodePath)
  const servicesBefore = relayed('/api/v1/services')

  const jsonGet = await request(`${h.url}${nodePath}?resourceVersion=0`, { headers: json })
  t.equal(jsonGet.statusCode, 200, 'the JSON get at resourceVersion=0 answers')
  const jsonBytes = Buffer.from(await jsonGet.body.arrayBuffer())
  const pbGet = await request(`${h.url}${nodePath}?resourceVersion=0`, { headers: pb })
  t.equal(pbGet.statusCode, 200, 'the protobuf get at resourceVersion=0 answers')
  t.match(pbGet.headers['content-type'], /^application\/vnd\.kubernetes\.protobuf/, 'in protobuf')
  const pbBytes = Buffer.from(await pbGet.body.arrayBuffer())
  const list = await request(`${h.url}/api/v1/services?resourceVersion=0`, { headers: json })
  t.equal(list.statusCode, 200, 'the list at resourceVersion=0 answers')
  const listed = (await list.body.json()) as any
  t.equal(relayed(nodePath), nodeBefore, 'the get at resourceVersion=0 did not reach the apiserver')
  t.equal(relayed('/api/v1/services'), servicesBefore, 'nor did the list')
  t.same(
    namesOf(listed),
    h.simulator
      .list('v1', 'Service')
      .map(s => `${s.metadata.namespace}/${s.metadata.name}`)
      .sort(),
    'the list holds every service',
  )

  const directPb = await request(`${h.simulator.url}${nodePath}`, { headers: { accept: protobuf, [directMark]: '1' } })
  const directPbBytes = Buffer.from(await directPb.body.arrayBuffer())
  t.ok(pbBytes.equals(directPbBytes), "the protobuf body is byte for byte the apiserver's")
  const directJson = await request(`${h.simulator.url}${nodePath}`, { headers: { accept: 'application/json', [directMark]: '1' } })
  const directJsonBytes = Buffer.from(await directJson.body.arrayBuffer())
  t.same(JSON.parse(jsonBytes.toString()), JSON.parse(directJsonBytes.toString()), "the JSON body is the apiserver's object")
  // JSON bytes: identical too when this was written (the cache keeps each object's bytes as the
  // apiserver encoded them in its list, and the simulator encodes an object the same in a list and alone);
  // the object is what a client relies on, so only that is asserted
  t.comment(`JSON bytes identical to the apiserver's GET: ${jsonBytes.equals(directJsonBytes)}`)

  const missing = await request(`${h.url}/api/v1/nodes/no-such-node?resourceVersion=0`, { headers: json })
  t.equal(missing.statusCode, 404, 'a node the cache does not hold: 404')
  t.match(await missing.body.json(), { kind: 'Status', reason: 'NotFound', code: 404 })
  t.equal(relayed('/api/v1/nodes/no-such-node'), 0, 'from the cache too')

  const plain = await request(`${h.url}${nodePath}`, { headers: json })
  t.equal(plain.statusCode, 200)
  t.same(await plain.body.json(), JSON.parse(directJsonBytes.toString()), 'a get without resourceVersion answers the object')
  t.equal(relayed(nodePath), nodeBefore + 1, 'and was relayed to the apiserver')
})
