// The simulator refuses a field selector the resource does not support as kube-apiserver does (400
// BadRequest with the conversion function's message, for list, watch and deletecollection alike),
// and answers the supported ones.

import t from 'tap'
import { ApiServerSimulator } from './simulator/index.ts'
import { request, watch } from './simulator/testclient.ts'

async function sim(t: { teardown(fn: () => unknown): void }): Promise<ApiServerSimulator> {
  const s = await ApiServerSimulator.start({})
  t.teardown(() => s.close())
  return s
}

const badRequest = (message: string) => ({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'BadRequest', code: 400 })

const pod = (name: string, nodeName?: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { ...(nodeName ? { nodeName } : {}), containers: [{ name: 'c', image: 'busybox' }], ...extra },
})

t.test('an unsupported field label is a 400 with the apiserver message, on list and on watch', async t => {
  const s = await sim(t)
  const cases: [string, string][] = [
    ['/api/v1/pods?fieldSelector=status.hostIP%3D10.0.0.1', 'field label not supported: status.hostIP'],
    ['/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dn1,metadata.labels%3Dx', 'field label not supported: metadata.labels'],
    // the apiserver sorts the terms first: the first refused one in that order is named
    ['/api/v1/pods?fieldSelector=zeta%3D1,alpha%3D2', 'field label not supported: alpha'],
    ['/api/v1/nodes?fieldSelector=metadata.namespace%3D', 'field label not supported: metadata.namespace'],
    ['/api/v1/namespaces?fieldSelector=metadata.namespace%3Ddefault', 'field label not supported: metadata.namespace'],
    ['/api/v1/services?fieldSelector=spec.ports%3D80', 'field label not supported: spec.ports'],
    ['/api/v1/configmaps?fieldSelector=data.k%3Dv', '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'],
    ['/api/v1/namespaces/default/endpoints?fieldSelector=subsets%3D', '"subsets" is not a known field selector: only "metadata.name", "metadata.namespace"'],
    [
      '/apis/discovery.k8s.io/v1/endpointslices?fieldSelector=addressType%3DIPv4',
      '"addressType" is not a known field selector: only "metadata.name", "metadata.namespace"',
    ],
    [
      '/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices?fieldSelector=metadata.name%3Da,endpoints%3Dx',
      '"endpoints" is not a known field selector: only "metadata.name", "metadata.namespace"',
    ],
  ]
  for (const [path, message] of cases) {
    const list = await request(`${s.url}${path}`)
    t.equal(list.status, 400, `list ${path}`)
    t.equal(list.headers['content-type'], 'application/json')
    t.same(list.json, badRequest(message), `list ${path}`)
    t.same(Object.keys(list.json), ['kind', 'apiVersion', 'metadata', 'status', 'message', 'reason', 'code'], 'the apiserver field order')

    const w = await request(`${s.url}${path}&watch=true&timeoutSeconds=1`)
    t.equal(w.status, 400, `watch ${path}: refused before any stream starts`)
    t.same(w.json, badRequest(message), `watch ${path}`)
  }
})

t.test('deletecollection with an unsupported field label deletes nothing', async t => {
  const s = await sim(t)
  s.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'keep', namespace: 'default' }, data: { k: 'v' } })
  const del = await request(`${s.url}/api/v1/namespaces/default/configmaps?fieldSelector=data.k%3Dv`, { method: 'DELETE' })
  t.equal(del.status, 400)
  t.same(del.json, badRequest('"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'))
  t.equal((await request(`${s.url}/api/v1/namespaces/default/configmaps/keep`)).status, 200)
})

t.test('a cluster-scoped custom resource refuses metadata.namespace, as the CRD handler does', async t => {
  const s = await sim(t)
  s.registerResource({ group: 'apps.openyurt.io', version: 'v1beta1', resource: 'nodepools', kind: 'NodePool', namespaced: false })
  s.registerResource({ group: 'example.com', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true })
  const pools = await request(`${s.url}/apis/apps.openyurt.io/v1beta1/nodepools?fieldSelector=metadata.namespace%3D`)
  t.same(pools.json, badRequest('field label not supported: metadata.namespace'))
  const spec = await request(`${s.url}/apis/apps.openyurt.io/v1beta1/nodepools?fieldSelector=spec.type%3DEdge`)
  t.same(spec.json, badRequest('field label not supported: spec.type'))
  t.equal((await request(`${s.url}/apis/apps.openyurt.io/v1beta1/nodepools?fieldSelector=metadata.name%3Dx`)).status, 200)
  t.equal((await request(`${s.url}/apis/example.com/v1/widgets?fieldSelector=metadata.namespace%3Ddefault`)).status, 200)
})

t.test('supported labels still select, with =, == and !=', async t => {
  const s = await sim(t)
  s.create(pod('a', 'n1'))
  s.create(pod('b', 'n2'))
  s.create(pod('pending'))
  const names = (r: any) => r.json.items.map((i: any) => i.metadata.name).sort()
  const list = (q: string) => request(`${s.url}/api/v1/pods?fieldSelector=${encodeURIComponent(q)}`)
  t.same(names(await list('spec.nodeName=n1')), ['a'])
  t.same(names(await list('spec.nodeName==n2')), ['b'])
  t.same(names(await list('spec.nodeName!=n1')), ['b', 'pending'])
  t.same(names(await list('spec.nodeName=')), ['pending'])
  t.same(names(await list('spec.host=n1')), ['a'], 'the legacy spec.host is spec.nodeName')
  t.same(names(await list('metadata.namespace=default,metadata.name!=a')), ['b', 'pending'])

  const w = await watch(`${s.url}/api/v1/pods?watch=true&fieldSelector=spec.host%3Dn2`)
  t.equal(w.status, 200)
  const first = await w.next()
  t.equal(`${first.type} ${first.object.metadata.name}`, 'ADDED b')
  s.create(pod('c', 'n2'))
  const second = await w.next()
  t.equal(`${second.type} ${second.object.metadata.name}`, 'ADDED c')
  w.close()
})

t.test('values as the apiserver fields.Set has them: a missing bool is "false", status.podIPs is never set', async t => {
  const s = await sim(t)
  s.create(pod('plain', 'n1'))
  s.create(pod('host', 'n1', { hostNetwork: true }))
  const names = (r: any) => r.json.items.map((i: any) => i.metadata.name).sort()
  const list = (q: string) => request(`${s.url}/api/v1/pods?fieldSelector=${encodeURIComponent(q)}`)
  t.same(names(await list('spec.hostNetwork=false')), ['plain'])
  t.same(names(await list('spec.hostNetwork!=false')), ['host'])
  t.same(names(await list('spec.hostNetwork=')), [])
  t.same(names(await list('status.podIPs=')), ['host', 'plain'])
  s.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } })
  const nodes = await request(`${s.url}/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse`)
  t.same(names(nodes), ['n1'])
})

t.test('a cluster-wide list by metadata.name selects that name in every namespace, as the apiserver does', async t => {
  const s = await sim(t)
  s.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'twin', namespace: 'default' } })
  s.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'twin', namespace: 'kube-system' } })
  s.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'other', namespace: 'default' } })
  const got = await request(`${s.url}/api/v1/configmaps?fieldSelector=metadata.name%3Dtwin`)
  t.equal(got.status, 200, 'a list, not a get without a namespace (404)')
  t.same(
    got.json.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`),
    ['default/twin', 'kube-system/twin'],
  )
})
