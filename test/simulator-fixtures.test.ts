// The simulator against recorded kube-apiserver v1.24 responses: loaded with the recorded cluster's
// objects, its answers must have the same SHAPE (keys and value types, recursively) as the real
// ones. Values the server invents (uid, timestamps, resourceVersions) are ignored; managedFields
// is not produced by the simulator and is left out of the comparison. Errors are compared exactly.

import t from 'tap'
import { readFileSync } from 'node:fs'
import { ApiServerSimulator } from './simulator/index.ts'
import { asWritten, loadList } from './helpers/recorded.ts'
import { request, watch } from './simulator/testclient.ts'

const dir = new URL('./fixtures/apiserver-v1.24/', import.meta.url)
const fixture = (name: string): any => JSON.parse(readFileSync(new URL(name, dir), 'utf8'))
const fixtureText = (name: string): string => readFileSync(new URL(name, dir), 'utf8')

/** Keys and types, recursively; arrays keep their length; managedFields is left out. */
function shapeOf(v: unknown): unknown {
  if (v === null) return 'null'
  if (Array.isArray(v)) return v.map(shapeOf)
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {}
    for (const k of Object.keys(v as object).sort()) {
      if (k === 'managedFields') continue
      out[k] = shapeOf((v as Record<string, unknown>)[k])
    }
    return out
  }
  return typeof v
}

async function recordedCluster(t: { teardown(fn: () => unknown): void }, options = {}): Promise<ApiServerSimulator> {
  const sim = await ApiServerSimulator.start(options)
  t.teardown(() => sim.close())
  loadList(sim, fixture('list-nodes.json'))
  loadList(sim, fixture('list-services.json'))
  loadList(sim, fixture('list-endpointslices.json'))
  return sim
}

t.test('lists have the recorded shape', async t => {
  const sim = await recordedCluster(t)
  const cases: [string, string][] = [
    ['/apis/discovery.k8s.io/v1/endpointslices', 'list-endpointslices.json'],
    ['/api/v1/services', 'list-services.json'],
    ['/api/v1/nodes', 'list-nodes.json'],
  ]
  for (const [path, file] of cases) {
    const r = await request(sim.url + path)
    t.equal(r.status, 200)
    t.same(shapeOf(r.json), shapeOf(fixture(file)), file)
    t.same(
      r.json.items.map((i: any) => i.metadata.name),
      fixture(file).items.map((i: any) => i.metadata.name),
      `${file}: same items in the same (etcd key) order`,
    )
    t.equal(r.headers['content-type'], 'application/json')
    t.equal(r.headers['cache-control'], 'no-cache, private')
    t.match(r.headers['audit-id'], /^[0-9a-f-]{36}$/)
  }
  const shanghai = await request(`${sim.url}/api/v1/nodes?labelSelector=apps.openyurt.io%2Fnodepool%3Dshanghai`)
  t.same(shapeOf(shanghai.json), shapeOf(fixture('list-nodes-pool-shanghai.json')))
})

t.test('limit=1 has the recorded continue token and remainingItemCount', async t => {
  const sim = await recordedCluster(t)
  const r = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices?limit=1`)
  const want = fixture('list-endpointslices-limit1.json')
  t.same(shapeOf(r.json), shapeOf(want))
  t.equal(r.json.metadata.remainingItemCount, want.metadata.remainingItemCount)
  const decode = (s: string) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'))
  const got = decode(r.json.metadata.continue)
  const real = decode(want.metadata.continue)
  t.same(Object.keys(got), Object.keys(real), 'same fields in the same order')
  t.equal(got.start, real.start, 'the same start key')
  t.equal(got.rv, Number(r.json.metadata.resourceVersion))
  t.notMatch(r.json.metadata.continue, /[=+/]/, "unpadded base64url, like Go's RawURLEncoding")
})

t.test('errors are the recorded Status objects', async t => {
  const sim = await recordedCluster(t)
  const nf = await request(`${sim.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/nope`)
  t.equal(nf.status, 404)
  t.same(nf.json, fixture('get-notfound.json'))

  const emptyStart = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 206, start: '' })).toString('base64url')
  const bc = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices?limit=1&continue=${emptyStart}`)
  t.equal(bc.status, 400)
  t.same(bc.json, fixture('list-bad-continue.json'))

  const invalid = await request(`${sim.url}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x y' } },
  })
  t.equal(invalid.status, 422)
  t.same(invalid.json, fixture('create-invalid.json'))

  const old = sim.currentResourceVersion()
  sim.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'later', namespace: 'default' } })
  sim.compact()
  const le = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=${Number(old) - 1}&resourceVersionMatch=Exact`)
  t.equal(le.status, 410)
  t.same(le.json, fixture('list-expired.json'))

  const we = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=${Number(old) - 1}`)
  t.equal(we.status, 200)
  t.equal(we.text, fixtureText('watch-expired.json'), 'byte for byte')
  t.equal(we.headers['content-type'], 'application/json')
})

t.test('a watch has the recorded events and BOOKMARK', async t => {
  const sim = await recordedCluster(t, { bookmarkIntervalMs: 30 })
  const recorded = fixtureText('watch-endpointslices.json')
    .split('\n')
    .filter(l => l.trim() !== '')
    .map(l => JSON.parse(l))
  const list = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices`)
  const w = await watch(
    `${sim.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&allowWatchBookmarks=true&resourceVersion=${list.json.metadata.resourceVersion}`,
  )
  t.equal(w.status, 200)
  t.equal(w.headers['content-type'], 'application/json')
  // what was done to the real cluster: an endpoint removed from svc-ud1-abcde, svc-ud1-zzzzz added and deleted
  const patched = await request(`${sim.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/json-patch+json' },
    body: [{ op: 'remove', path: '/endpoints/1' }],
  })
  t.equal(patched.status, 200)
  const added = recorded.find(e => e.type === 'ADDED').object
  sim.create(asWritten(added, added.apiVersion, added.kind))
  sim.remove('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-zzzzz')
  const events: any[] = []
  while (events.filter(e => e.type === 'BOOKMARK').length < 2) {
    const e = await w.next()
    if (e.type !== 'BOOKMARK' || events.length >= 3) events.push(e)
  }
  w.close()
  t.same(
    events.map(e => e.type),
    recorded.map(e => e.type),
  )
  for (let i = 0; i < recorded.length; i++) t.same(shapeOf(events[i]), shapeOf(recorded[i]), `event ${i} (${recorded[i].type})`)
  t.same(events[0].object.endpoints, recorded[0].object.endpoints, 'the same endpoints remain')
  t.equal(events[0].object.metadata.generation, 2, 'the change bumped generation, as recorded')
  t.same(events[3].object, { ...recorded[3].object, metadata: { ...recorded[3].object.metadata, resourceVersion: events[3].object.metadata.resourceVersion } })
  t.equal(events[3].object.metadata.resourceVersion, events[2].object.metadata.resourceVersion, 'the bookmark is at the last event')
})

t.test('Table and PartialObjectMetadataList have the recorded shape', async t => {
  const sim = await recordedCluster(t)
  const table = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices`, {
    headers: { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
  })
  const want = fixture('list-endpointslices.table.json')
  t.same(shapeOf(table.json), shapeOf(want))
  t.same(table.json.columnDefinitions, want.columnDefinitions)
  t.same(
    table.json.rows.map((r: any) => r.cells.slice(0, 4)),
    want.rows.map((r: any) => r.cells.slice(0, 4)),
    'the same cells (but Age)',
  )
  t.match(table.json.rows[0].cells[4], /^\d+s$/)

  const meta = await request(`${sim.url}/api/v1/services`, { headers: { Accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' } })
  t.same(shapeOf(meta.json), shapeOf(fixture('list-services.metadata.json')))
})

t.test('other recorded shapes: v1beta1 slice, custom resources, selectors', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  sim.load(readFileSync(new URL('../nodepool-crd.yaml', dir), 'utf8'))
  loadList(sim, fixture('list-nodepools.json'))
  const pools = await request(`${sim.url}/apis/apps.openyurt.io/v1beta1/nodepools`)
  t.same(shapeOf(pools.json), shapeOf(fixture('list-nodepools.json')))
  t.same(Object.keys(pools.json.items[0]), Object.keys(fixture('list-nodepools.json').items[0]), 'unstructured key order')
  const pbOrJson = await request(`${sim.url}/apis/apps.openyurt.io/v1beta1/nodepools`, { headers: { Accept: 'application/vnd.kubernetes.protobuf, */*' } })
  t.same(shapeOf(pbOrJson.json), shapeOf(JSON.parse(fixtureText('list-nodepools-pb-or-json.body'))))
  const refused = await request(`${sim.url}/apis/apps.openyurt.io/v1beta1/nodepools`, { headers: { Accept: 'application/vnd.kubernetes.protobuf' } })
  t.equal(refused.status, 406)
  t.ok(refused.raw.equals(readFileSync(new URL('list-nodepools-pb-refused.json', dir))), 'the recorded protobuf Status (more in simulator-protobuf.test.ts)')

  const beta = fixture('get-endpointslice-v1beta1.json')
  sim.create(asWritten(beta, beta.apiVersion, beta.kind))
  const got = await request(`${sim.url}/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/svc-ud1-beta`)
  t.same(shapeOf(got.json), shapeOf(beta))
  t.same(got.json.endpoints, beta.endpoints)

  for (const name of ['get-endpoints-svc-ud1.json', 'get-lease-kind-worker2.json', 'get-secret.json']) {
    const obj = fixture(name)
    sim.create(asWritten(obj, obj.apiVersion, obj.kind))
    const path = obj.apiVersion === 'v1' ? '/api/v1' : `/apis/${obj.apiVersion}`
    const r = await request(
      `${sim.url}${path}/namespaces/${obj.metadata.namespace}/${obj.kind.toLowerCase()}${obj.kind === 'Endpoints' ? '' : 's'}/${obj.metadata.name}`,
    )
    t.same(shapeOf(r.json), shapeOf(obj), name)
  }

  loadList(sim, fixture('list-pods-kind-worker2.json'))
  const pods = await request(`${sim.url}/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2`)
  t.same(shapeOf(pods.json), shapeOf(fixture('list-pods-kind-worker2.json')))
})
