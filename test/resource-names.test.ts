// /debug/cache takes resources as kubectl names them: a table for the pure resolution, and the
// admin port answering every short name against a hub that cached them.
import t from 'tap'
import { request } from 'undici'
import { compareVersions, resolveResourceName } from '../lib/api/resource-names.ts'
import type { ResourceRef } from '../lib/api/resource-names.ts'
import { startHarness, eventually } from './helpers/hub.ts'

const cached: ResourceRef[] = [
  { group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices', singular: 'endpointslice' },
  { group: 'discovery.k8s.io', version: 'v1beta1', resource: 'endpointslices', singular: 'endpointslice' },
  { group: '', version: 'v1', resource: 'services', singular: 'service' },
  { group: '', version: 'v1', resource: 'pods', singular: 'pod' },
  { group: '', version: 'v1', resource: 'events', singular: 'event' },
  { group: 'events.k8s.io', version: 'v1', resource: 'events', singular: 'event' },
]

t.test('names as kubectl takes them', async t => {
  const cases: [string, string, RegExp?][] = [
    ['endpointslices', 'endpointslices.v1.discovery.k8s.io', /could be endpointslices\.v1\.discovery\.k8s\.io or endpointslices\.v1beta1/],
    ['endpointslices.discovery.k8s.io', 'endpointslices.v1.discovery.k8s.io', /v1beta1/],
    ['endpointslices.v1beta1.discovery.k8s.io', 'endpointslices.v1beta1.discovery.k8s.io'],
    ['eps', 'endpointslices.v1.discovery.k8s.io', /v1beta1/],
    ['endpointslice', 'endpointslices.v1.discovery.k8s.io', /v1beta1/],
    ['EndpointSlices', 'endpointslices.v1.discovery.k8s.io', /v1beta1/],
    ['svc', 'services.v1.core'],
    ['po', 'pods.v1.core'],
    ['pod', 'pods.v1.core'],
    ['events', 'events.v1.core', /showing events\.v1\.core/],
    ['events.events.k8s.io', 'events.v1.events.k8s.io'],
  ]
  for (const [name, want, note] of cases) {
    const got = resolveResourceName(name, cached)
    t.ok(!('error' in got), name)
    if ('error' in got) continue
    t.equal(`${got.ref.resource}.${got.ref.version}.${got.ref.group || 'core'}`, want, name)
    if (note) t.match(got.note, note, `${name}: says which it chose`)
    else t.equal(got.note, undefined, `${name}: one match`)
  }
  const unknown = resolveResourceName('no', cached)
  t.match(unknown, { error: /no cached resource is called "no"; cached: / }, 'a name nothing cached answers to says what is cached')
  t.ok(
    compareVersions('v1', 'v1beta1') < 0 &&
      compareVersions('v1beta2', 'v1beta1') < 0 &&
      compareVersions('v1alpha1', 'v1beta1') > 0 &&
      compareVersions('v2', 'v1') < 0,
  )
})

t.test('the admin port answers to every short name of what kube-proxy and kubelet cached', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const get = (url: string, ua: string) => request(url, { headers: { 'user-agent': ua } }).then(r => r.body.dump())
  await get(`${h.url}/apis/discovery.k8s.io/v1/endpointslices`, 'kube-proxy/v1.24.0')
  await get(`${h.url}/api/v1/services`, 'kube-proxy/v1.24.0')
  await get(`${h.url}/api/v1/endpoints`, 'kube-proxy/v1.24.0')
  await get(`${h.url}/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2`, 'kubelet/v1.24.0')
  await get(`${h.url}/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker2`, 'kubelet/v1.24.0')
  await eventually(() => h.hub.store.all().some(c => c.key.resource === 'nodes'), 10_000, 'the cache')
  const names: [string, string, string][] = [
    ['kube-proxy', 'eps', 'endpointslices.v1.discovery.k8s.io'],
    ['kube-proxy', 'endpointslices', 'endpointslices.v1.discovery.k8s.io'],
    ['kube-proxy', 'endpointslices.discovery.k8s.io', 'endpointslices.v1.discovery.k8s.io'],
    ['kube-proxy', 'endpointslices.v1.discovery.k8s.io', 'endpointslices.v1.discovery.k8s.io'],
    ['kube-proxy', 'svc', 'services.v1.core'],
    ['kube-proxy', 'ep', 'endpoints.v1.core'],
    ['kubelet', 'po', 'pods.v1.core'],
    ['kubelet', 'no', 'nodes.v1.core'],
  ]
  for (const [component, name, resource] of names) {
    const res = await request(`${h.hub.adminUrl}/debug/cache/${component}/${name}`)
    const body = (await res.body.json()) as any
    t.equal(res.statusCode, 200, `${component}/${name}`)
    t.equal(body.resource, resource, `${component}/${name} is ${resource}`)
    t.ok(body.items.length > 0, `${component}/${name}: its objects`)
  }
  const missing = await request(`${h.hub.adminUrl}/debug/cache/kubelet/eps`)
  t.equal(missing.statusCode, 404)
  t.match(await missing.body.json(), { kind: 'Status', reason: 'NotFound', message: /kubelet: no cached resource is called "eps"; cached: / })
})
