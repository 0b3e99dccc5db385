import t from 'tap'
import net from 'node:net'
import { WebSocket } from 'ws'
import { ApiServerSimulator, startDemoCluster, type SimulatorOptions } from './simulator/index.ts'
import { request, watch } from './simulator/testclient.ts'
import { decodeBody } from '../lib/codec/typed.ts'
import { createTestPki } from './helpers/pki.ts'

const cm = (name: string, namespace = 'default', labels?: Record<string, string>, data: Record<string, string> = { k: 'v' }) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace, ...(labels ? { labels } : {}) },
  data,
})

async function sim(t: { teardown(fn: () => unknown): void }, options: SimulatorOptions = {}): Promise<ApiServerSimulator> {
  const s = await ApiServerSimulator.start(options)
  t.teardown(() => s.close())
  return s
}

t.test('CRUD over HTTP with the apiserver semantics', async t => {
  const s = await sim(t)
  const base = `${s.url}/api/v1/namespaces/default/configmaps`
  const rv0 = Number(s.currentResourceVersion())

  const created = await request(base, { method: 'POST', body: cm('one', 'default', { app: 'web' }) })
  t.equal(created.status, 201)
  t.equal(created.headers['content-type'], 'application/json')
  t.equal(created.headers['cache-control'], 'no-cache, private')
  t.ok(created.headers['audit-id'])
  t.match(created.json.metadata, { name: 'one', namespace: 'default', uid: /^[0-9a-f-]{36}$/, creationTimestamp: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/ })
  t.equal(created.json.kind, 'ConfigMap')
  const rv1 = Number(created.json.metadata.resourceVersion)
  t.ok(rv1 > rv0, 'create bumps the resourceVersion')
  t.equal(created.json.metadata.generation, undefined, 'ConfigMaps have no generation')

  const again = await request(base, { method: 'POST', body: cm('one') })
  t.equal(again.status, 409)
  t.match(again.json, { kind: 'Status', reason: 'AlreadyExists', code: 409, message: 'configmaps "one" already exists' })

  const invalid = await request(base, { method: 'POST', body: cm('x y') })
  t.equal(invalid.status, 422)
  t.match(invalid.json, { reason: 'Invalid', details: { name: 'x y', kind: 'ConfigMap', causes: [{ reason: 'FieldValueInvalid', field: 'metadata.name' }] } })

  const generated = await request(base, { method: 'POST', body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'gen-' } } })
  t.equal(generated.status, 201)
  t.match(generated.json.metadata.name, /^gen-[a-z0-9]{5}$/)

  const noNs = await request(`${s.url}/api/v1/namespaces/nope/configmaps`, { method: 'POST', body: cm('a', 'nope') })
  t.equal(noNs.status, 404)
  t.equal(noNs.json.message, 'namespaces "nope" not found')

  const got = await request(`${base}/one`)
  t.equal(got.status, 200)
  t.same(got.json, created.json)

  const put = await request(`${base}/one`, { method: 'PUT', body: { ...got.json, data: { k: 'v2' } } })
  t.equal(put.status, 200)
  t.equal(put.json.data.k, 'v2')
  const rv2 = Number(put.json.metadata.resourceVersion)
  t.ok(rv2 > rv1)
  t.equal(put.json.metadata.uid, created.json.metadata.uid, 'uid survives updates')

  const stale = await request(`${base}/one`, { method: 'PUT', body: { ...got.json, data: { k: 'v3' } } })
  t.equal(stale.status, 409)
  t.match(stale.json, { reason: 'Conflict', message: /the object has been modified/ })

  const noop = await request(`${base}/one`, { method: 'PUT', body: put.json })
  t.equal(noop.json.metadata.resourceVersion, String(rv2), 'an update that changes nothing is not a write')

  const missing = await request(`${base}/ghost`, { method: 'PUT', body: cm('ghost') })
  t.equal(missing.status, 404)

  const merge = await request(`${base}/one`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/merge-patch+json' },
    body: { data: { extra: 'x' }, metadata: { labels: { app: null } } },
  })
  t.equal(merge.status, 200)
  t.same(merge.json.data, { k: 'v2', extra: 'x' })
  t.equal(merge.json.metadata.labels, undefined, 'null removes')
  const smp = await request(`${base}/one`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/strategic-merge-patch+json' },
    body: { data: { k: null } },
  })
  t.same(smp.json.data, { extra: 'x' })
  const jp = await request(`${base}/one`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/json-patch+json' },
    body: [
      { op: 'add', path: '/data/added', value: '1' },
      { op: 'replace', path: '/data/extra', value: 'y' },
      { op: 'remove', path: '/data/added' },
    ],
  })
  t.same(jp.json.data, { extra: 'y' })
  const stalePatch = await request(`${base}/one`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/merge-patch+json' },
    body: { metadata: { resourceVersion: String(rv1) } },
  })
  t.equal(stalePatch.status, 409, 'a resourceVersion in a patch is a precondition')
  const badType = await request(`${base}/one`, { method: 'PATCH', headers: { 'Content-Type': 'text/plain' }, body: '{}' })
  t.equal(badType.status, 415)
  const badJson = await request(base, { method: 'POST', body: '{"apiVersion":' })
  t.equal(badJson.status, 400)
  t.equal(badJson.json.kind, 'Status')

  const del = await request(`${base}/one`, { method: 'DELETE' })
  t.equal(del.status, 200)
  t.equal(del.json.metadata.name, 'one')
  t.equal((await request(`${base}/one`)).status, 404)
  t.equal((await request(`${base}/one`, { method: 'DELETE' })).status, 404)

  const unknown = await request(`${s.url}/api/v1/namespaces/default/widgets`)
  t.equal(unknown.status, 404)
  t.match(unknown.json, { kind: 'Status', message: 'the server could not find the requested resource' })

  // every write bumped one global counter
  const rvs = [created, put, merge, smp, jp].map(r => Number(r.json.metadata.resourceVersion))
  t.same(
    [...rvs].sort((a, b) => a - b),
    rvs,
    'resourceVersions increase monotonically',
  )
})

t.test('status subresource and generation', async t => {
  const s = await sim(t)
  s.registerResource({ group: 'example.com', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true })
  const base = `${s.url}/apis/example.com/v1/namespaces/default/widgets`
  const w = await request(base, {
    method: 'POST',
    body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' }, spec: { size: 1 }, status: { ok: false } },
  })
  t.equal(w.status, 201)
  t.equal(w.json.metadata.generation, 1)
  const st = await request(`${base}/w/status`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/merge-patch+json' },
    body: { status: { ok: true }, spec: { size: 9 } },
  })
  t.equal(st.status, 200)
  t.same(st.json.status, { ok: true })
  t.same(st.json.spec, { size: 1 }, 'the status subresource changes only status')
  t.equal(st.json.metadata.generation, 1)
  const main = await request(`${base}/w`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/merge-patch+json' },
    body: { status: { ok: false }, spec: { size: 2 } },
  })
  t.same(main.json.status, { ok: true }, 'the main resource ignores status')
  t.equal(main.json.metadata.generation, 2, 'a spec change bumps generation')
  const getStatus = await request(`${base}/w/status`)
  t.equal(getStatus.json.spec.size, 2)
  const list = await request(base)
  t.equal(list.json.items[0].kind, 'Widget', 'custom resource list items keep kind')
  t.equal(list.json.metadata.continue, '')
})

t.test('list: selectors, namespaces, resourceVersion semantics', async t => {
  const s = await sim(t)
  s.create(cm('a', 'default', { app: 'web', tier: 'front' }))
  s.create(cm('b', 'default', { app: 'db' }))
  s.create(cm('c', 'other', { app: 'web' }))
  const names = (r: any) => r.json.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`)
  t.same(names(await request(`${s.url}/api/v1/configmaps?labelSelector=app%3Dweb`)), ['default/a', 'other/c'])
  t.same(names(await request(`${s.url}/api/v1/configmaps?labelSelector=app%20notin%20(web)`)), ['default/b'])
  t.same(names(await request(`${s.url}/api/v1/configmaps?labelSelector=tier,app%3D%3Dweb`)), ['default/a'])
  t.same(names(await request(`${s.url}/api/v1/namespaces/default/configmaps`)), ['default/a', 'default/b'])
  t.same(names(await request(`${s.url}/api/v1/configmaps?fieldSelector=metadata.namespace%3Dother`)), ['other/c'])
  t.same(names(await request(`${s.url}/api/v1/configmaps?fieldSelector=metadata.name!%3Da,metadata.namespace%3Ddefault`)), ['default/b'])
  const bad = await request(`${s.url}/api/v1/configmaps?labelSelector=a%20in%20()`)
  t.equal(bad.status, 400)
  t.match(bad.json, { kind: 'Status', reason: 'BadRequest' })
  const list = await request(`${s.url}/api/v1/configmaps`)
  t.equal(list.json.kind, 'ConfigMapList')
  t.equal(list.json.metadata.resourceVersion, s.currentResourceVersion())
  t.equal(list.json.items[0].kind, undefined, 'built-in list items carry no kind')

  // exact list at an older resourceVersion, then 410 once compacted
  const before = s.currentResourceVersion()
  s.remove('v1', 'ConfigMap', 'default', 'a')
  s.create(cm('d'))
  const exact = await request(`${s.url}/api/v1/namespaces/default/configmaps?resourceVersion=${before}&resourceVersionMatch=Exact`)
  t.same(names(exact), ['default/a', 'default/b'])
  t.equal(exact.json.metadata.resourceVersion, before)
  s.compact()
  const expired = await request(`${s.url}/api/v1/namespaces/default/configmaps?resourceVersion=${before}&resourceVersionMatch=Exact`)
  t.equal(expired.status, 410)
  t.match(expired.json, { reason: 'Expired', message: 'The resourceVersion for the provided list is too old.' })
})

t.test('limit and continue page through every item exactly once', async t => {
  const s = await sim(t)
  for (let i = 0; i < 23; i++) s.create(cm(`cm-${String(i).padStart(2, '0')}`, i % 2 ? 'ns-b' : 'ns-a'))
  const seen: string[] = []
  let token = ''
  let pages = 0
  let firstRV = ''
  do {
    const r = await request(`${s.url}/api/v1/configmaps?limit=5${token ? `&continue=${encodeURIComponent(token)}` : ''}`)
    t.equal(r.status, 200)
    pages++
    if (pages === 1) {
      firstRV = r.json.metadata.resourceVersion
      s.create(cm('zz-late', 'ns-a')) // written after the first page: not in this consistent list
    }
    t.equal(r.json.metadata.resourceVersion, firstRV, "every page is served at the first page's resourceVersion")
    for (const i of r.json.items) seen.push(`${i.metadata.namespace}/${i.metadata.name}`)
    token = r.json.metadata.continue ?? ''
    if (token) {
      t.equal(r.json.metadata.remainingItemCount, 23 - seen.length)
      const decoded = JSON.parse(Buffer.from(token, 'base64url').toString())
      t.match(decoded, { v: 'meta.k8s.io/v1', rv: Number(firstRV), start: /\u0000$/ })
    } else t.equal(r.json.metadata.remainingItemCount, undefined)
  } while (token && pages < 10)
  t.equal(pages, 5)
  t.equal(seen.length, 23)
  t.equal(new Set(seen).size, 23, 'no duplicates')
  t.same(seen, [...seen].sort(), 'etcd key order')
  const bad = await request(`${s.url}/api/v1/configmaps?limit=5&continue=bm90LWEtdG9rZW4`)
  t.equal(bad.status, 400)
  t.match(bad.json.message, /^invalid continue token: /)
  const nsPage = await request(`${s.url}/api/v1/namespaces/ns-b/configmaps?limit=4`)
  t.equal(nsPage.json.items.length, 4)
  t.equal(nsPage.json.metadata.remainingItemCount, 7)
})

t.test('watch: initial state, replay from a resourceVersion, live events, 410 after compact', async t => {
  const s = await sim(t)
  s.create(cm('a'))
  const rvAfterA = s.currentResourceVersion()
  s.create(cm('b'))
  s.patch('v1', 'ConfigMap', 'default', 'a', { data: { k: 'changed' } })

  const fromZero = await watch(`${s.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0`)
  t.equal(fromZero.status, 200)
  t.equal(fromZero.headers['content-type'], 'application/json')
  const initial = [await fromZero.next(), await fromZero.next()]
  t.same(
    initial.map(e => [e.type, e.object.metadata.name]),
    [
      ['ADDED', 'a'],
      ['ADDED', 'b'],
    ],
  )
  t.equal(initial[0].object.kind, 'ConfigMap')
  fromZero.close()

  const replay = await watch(`${s.url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=${rvAfterA}`)
  const r1 = await replay.next()
  const r2 = await replay.next()
  t.same([r1.type, r1.object.metadata.name], ['ADDED', 'b'])
  t.same([r2.type, r2.object.metadata.name, r2.object.data.k], ['MODIFIED', 'a', 'changed'])
  s.remove('v1', 'ConfigMap', 'default', 'b')
  const r3 = await replay.next()
  t.same([r3.type, r3.object.metadata.name], ['DELETED', 'b'])
  t.equal(r3.object.metadata.resourceVersion, s.currentResourceVersion(), 'DELETED carries the deletion resourceVersion')
  replay.close()

  // a watch that starts at the current resourceVersion gets its headers at once (no event to send)
  const quiet = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${s.currentResourceVersion()}`)
  t.equal(quiet.status, 200, 'headers flushed before any event')
  s.create(cm('late', 'kube-system'))
  t.equal((await quiet.next()).object.metadata.name, 'late')
  quiet.close()

  s.compact()
  const expired = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${rvAfterA}`)
  t.equal(expired.status, 200)
  t.same(await expired.next(), {
    type: 'ERROR',
    object: {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'The resourceVersion for the provided watch is too old.',
      reason: 'Expired',
      code: 410,
    },
  })
  t.equal(await expired.ended, 'end')
})

t.test('watch: the event window', async t => {
  const s = await sim(t, { eventWindow: 3 })
  const start = s.currentResourceVersion()
  for (let i = 0; i < 4; i++) s.create(cm(`w${i}`))
  const w = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${start}`)
  t.equal((await w.next()).type, 'ERROR', 'older than the window: 410')
  const recent = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${Number(s.currentResourceVersion()) - 2}`)
  t.same([(await recent.next()).object.metadata.name, (await recent.next()).object.metadata.name], ['w2', 'w3'])
  recent.close()
})

t.test('watch: BOOKMARKs, timeoutSeconds, namespace scope, close()', async t => {
  const s = await sim(t, { bookmarkIntervalMs: 40 })
  const rv = s.currentResourceVersion()
  const w = await watch(`${s.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`)
  const b = await w.next()
  t.same(b, {
    type: 'BOOKMARK',
    object: {
      kind: 'EndpointSlice',
      apiVersion: 'discovery.k8s.io/v1',
      metadata: { resourceVersion: rv, creationTimestamp: null },
      addressType: '',
      endpoints: null,
      ports: null,
    },
  })
  s.create({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'other-ns', namespace: 'kube-system' },
    addressType: 'IPv4',
    endpoints: [],
  })
  s.create({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'mine', namespace: 'default' }, addressType: 'IPv4', endpoints: [] })
  let e = await w.next()
  while (e.type === 'BOOKMARK') e = await w.next()
  t.same([e.type, e.object.metadata.name], ['ADDED', 'mine'], 'a namespaced watch sees only its namespace')
  let nextBookmark = await w.next()
  while (nextBookmark.type !== 'BOOKMARK') nextBookmark = await w.next()
  t.equal(nextBookmark.object.metadata.resourceVersion, s.currentResourceVersion(), 'bookmarks advance')

  const noBookmarks = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${s.currentResourceVersion()}&timeoutSeconds=1`)
  const t0 = Date.now()
  t.equal(await noBookmarks.ended, 'end', 'timeoutSeconds ends the stream cleanly')
  t.ok(Date.now() - t0 >= 900, 'not before the timeout')
  t.equal(noBookmarks.pending(), 0, 'no BOOKMARK without allowWatchBookmarks')

  const open = await watch(`${s.url}/api/v1/pods?watch=true`)
  const closing = s.close()
  t.equal(await open.ended, 'error', 'close() cuts open watches')
  await closing
  w.close()
})

t.test('watch: selector transitions like the watch cache', async t => {
  const s = await sim(t)
  s.create(cm('x', 'default', { app: 'db' }))
  const w = await watch(`${s.url}/api/v1/configmaps?watch=true&labelSelector=app%3Dweb&resourceVersion=${s.currentResourceVersion()}`)
  s.create(cm('y', 'default', { app: 'web' }))
  s.create(cm('noise', 'default', { app: 'other' }))
  s.patch('v1', 'ConfigMap', 'default', 'x', { metadata: { labels: { app: 'web' } } })
  s.patch('v1', 'ConfigMap', 'default', 'x', { data: { k: 'x2' } })
  s.patch('v1', 'ConfigMap', 'default', 'y', { metadata: { labels: { app: 'gone' } } })
  s.remove('v1', 'ConfigMap', 'default', 'noise')
  s.remove('v1', 'ConfigMap', 'default', 'x')
  const got: string[] = []
  for (let i = 0; i < 5; i++) {
    const e = await w.next()
    got.push(`${e.type} ${e.object.metadata.name}`)
  }
  t.same(got, ['ADDED y', 'ADDED x', 'MODIFIED x', 'DELETED y', 'DELETED x'])
  t.equal(w.pending(), 0, 'nothing for objects that never matched')
  w.close()

  const byField = await watch(`${s.url}/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=metadata.name%3Dy`)
  t.equal((await byField.next()).object.metadata.name, 'y')
  byField.close()
})

t.test('gzip for bodies over 128 KiB when accepted', async t => {
  const s = await sim(t)
  const big = 'x'.repeat(2048)
  for (let i = 0; i < 80; i++) s.create(cm(`big-${i}`, 'default', undefined, { blob: big }))
  const gz = await request(`${s.url}/api/v1/configmaps`, { headers: { 'Accept-Encoding': 'gzip' } })
  t.equal(gz.headers['content-encoding'], 'gzip')
  t.ok(gz.raw.length < 128 * 1024)
  t.equal(gz.json.items.length, 80)
  t.ok(gz.text.length > 128 * 1024)
  const plain = await request(`${s.url}/api/v1/configmaps`)
  t.equal(plain.headers['content-encoding'], undefined)
  t.equal(Number(plain.headers['content-length']), plain.raw.length)
  const small = await request(`${s.url}/api/v1/namespaces`, { headers: { 'Accept-Encoding': 'gzip' } })
  t.equal(small.headers['content-encoding'], undefined, 'small bodies stay plain')
  const w = await watch(`${s.url}/api/v1/configmaps?watch=true`, { 'Accept-Encoding': 'gzip' })
  t.equal(w.headers['content-encoding'], undefined, 'watches are never gzipped')
  t.equal((await w.next()).type, 'ADDED')
  w.close()
})

t.test('content negotiation: Table, PartialObjectMetadata, protobuf', async t => {
  const s = await sim(t)
  s.create(cm('a', 'default', { app: 'web' }))
  const table = await request(`${s.url}/api/v1/namespaces/default/configmaps`, {
    headers: { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
  })
  t.match(table.json, { kind: 'Table', apiVersion: 'meta.k8s.io/v1', columnDefinitions: [{ name: 'Name' }, { name: 'Age' }] })
  t.same(table.json.rows[0].cells.slice(0, 1), ['a'])
  t.equal(table.json.rows[0].object.kind, 'PartialObjectMetadata')
  const meta = await request(`${s.url}/api/v1/namespaces/default/configmaps`, {
    headers: { Accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
  })
  t.equal(meta.json.kind, 'PartialObjectMetadataList')
  t.same(Object.keys(meta.json.items[0]), ['kind', 'apiVersion', 'metadata'])
  const pb = await request(`${s.url}/api/v1/namespaces/default/configmaps`, { headers: { Accept: 'application/vnd.kubernetes.protobuf' } })
  t.equal(pb.status, 200)
  t.equal(pb.headers['content-type'], 'application/vnd.kubernetes.protobuf')
  t.match(decodeBody(pb.raw), { kind: 'ConfigMapList', items: [{ metadata: { name: 'a' } }] })
  // CSRs are built in but unknown to the typed codec: served like custom resources, JSON only
  const csrPb = await request(`${s.url}/apis/certificates.k8s.io/v1/certificatesigningrequests`, { headers: { Accept: 'application/vnd.kubernetes.protobuf' } })
  t.equal(csrPb.status, 406)
  t.match(decodeBody(csrPb.raw), { kind: 'Status', reason: 'NotAcceptable', code: 406 })
  const pbOrAny = await request(`${s.url}/apis/certificates.k8s.io/v1/certificatesigningrequests`, {
    headers: { Accept: 'application/vnd.kubernetes.protobuf, */*' },
  })
  t.equal(pbOrAny.status, 200)
  t.equal(pbOrAny.json.kind, 'CertificateSigningRequestList')
  const tw = await watch(`${s.url}/api/v1/namespaces/default/configmaps?watch=true`, {
    Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json',
  })
  const ev = await tw.next()
  t.match(ev, { type: 'ADDED', object: { kind: 'Table', rows: [{ cells: ['a'] }] } })
  tw.close()
})

t.test('discovery, version, health', async t => {
  const s = await sim(t)
  const api = await request(`${s.url}/api`)
  t.match(api.json, { kind: 'APIVersions', versions: ['v1'] })
  const v1 = await request(`${s.url}/api/v1`)
  const pods = v1.json.resources.find((r: any) => r.name === 'pods')
  t.match(pods, { name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', shortNames: ['po'] })
  t.ok(v1.json.resources.find((r: any) => r.name === 'pods/status'))
  t.match(
    v1.json.resources.find((r: any) => r.name === 'nodes'),
    { namespaced: false, shortNames: ['no'] },
  )
  const apis = await request(`${s.url}/apis`, { headers: { Accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json' } })
  t.equal(apis.headers['content-type'], 'application/json')
  t.equal(apis.json.kind, 'APIGroupList', 'aggregated discovery falls back to the legacy document')
  const disc = apis.json.groups.find((g: any) => g.name === 'discovery.k8s.io')
  t.same(
    disc.versions.map((v: any) => v.version),
    ['v1', 'v1beta1'],
  )
  t.equal(disc.preferredVersion.version, 'v1')
  t.equal((await request(`${s.url}/apis/coordination.k8s.io/v1`)).json.resources[0].name, 'leases')
  t.equal((await request(`${s.url}/version`)).json.gitVersion, 'v1.24.0')
  for (const p of ['/healthz', '/readyz', '/livez']) t.equal((await request(s.url + p)).text, 'ok')
  t.equal((await request(`${s.url}/apis/nope.example.com/v1`)).status, 404)
})

t.test('endpointslices are served in v1 and v1beta1', async t => {
  const s = await sim(t)
  s.create({
    apiVersion: 'discovery.k8s.io/v1beta1',
    kind: 'EndpointSlice',
    metadata: { name: 'b', namespace: 'default' },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.0.0.1'], topology: { 'kubernetes.io/hostname': 'n1', 'topology.kubernetes.io/zone': 'z1' } }],
  })
  const v1 = await request(`${s.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/b`)
  t.match(v1.json, { apiVersion: 'discovery.k8s.io/v1', endpoints: [{ nodeName: 'n1', zone: 'z1' }] })
  const beta = await request(`${s.url}/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/b`)
  t.match(beta.json, { apiVersion: 'discovery.k8s.io/v1beta1', endpoints: [{ topology: { 'kubernetes.io/hostname': 'n1' } }] })
  t.equal(beta.json.endpoints[0].nodeName, undefined)
})

t.test('faults: refuse, hang, reset, dropStreams', async t => {
  const s = await sim(t)
  const port = s.port
  t.equal((await request(`${s.url}/healthz`)).status, 200)

  await s.setFault('refuse')
  await t.rejects(request(`${s.url}/healthz`), { code: 'ECONNREFUSED' })
  await s.setFault('none')
  t.equal(s.port, port, 'back on the same port')
  t.equal((await request(`${s.url}/healthz`)).text, 'ok')

  await s.setFault('hang')
  await t.rejects(request(`${s.url}/healthz`, { timeoutMs: 200 }), { code: 'TIMEOUT' })
  const pending = request(`${s.url}/version`)
  await waitFor(() => s.requests.filter(r => r.url === '/version').length === 1)
  t.ok(s.openConnections() >= 1, 'the hung connection is open')
  await s.setFault('none')
  t.equal((await pending).status, 200, 'a request held during the hang is answered afterwards')

  await s.setFault('reset')
  await t.rejects(request(`${s.url}/healthz`), { code: /ECONNRESET|EPIPE/ })
  await s.setFault('none')
  t.equal((await request(`${s.url}/healthz`)).status, 200)

  const w = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${s.currentResourceVersion()}`)
  await waitFor(() => s.openConnections() >= 1)
  s.dropStreams()
  t.equal(await w.ended, 'error', 'a dropped watch ends without a clean end')
  await waitFor(() => s.openConnections() === 0)
  t.equal(s.openConnections(), 0)
  t.ok(
    s.requests.some(r => r.url.includes('watch=true')),
    'requests are logged',
  )
})

t.test('tokens and client certificates', async t => {
  const pki = await createTestPki()
  const s = await sim(t, { tokens: ['s3cret'], tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true } })
  t.match(s.url, /^https:\/\/127\.0\.0\.1:\d+$/)
  const tls = { ca: pki.ca.cert }
  const anon = await request(`${s.url}/api/v1/namespaces`, { tls })
  t.equal(anon.status, 401)
  t.same(anon.json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 })
  t.equal((await request(`${s.url}/api/v1/namespaces`, { tls, headers: { Authorization: 'Bearer wrong' } })).status, 401)
  t.equal((await request(`${s.url}/api/v1/namespaces`, { tls, headers: { Authorization: 'Bearer s3cret' } })).status, 200)
  t.equal(
    (await request(`${s.url}/api/v1/namespaces`, { tls: { ...tls, cert: pki.client.cert, key: pki.client.key } })).status,
    200,
    'a verified client certificate authenticates',
  )
  t.equal((await request(`${s.url}/healthz`, { tls })).status, 200, 'health is public, as for system:unauthenticated')
})

t.test('upgrades: websocket and SPDY echo', async t => {
  const s = await sim(t)
  const wsUrl = `${s.url.replace('http', 'ws')}/api/v1/namespaces/default/pods/p/exec?command=sh&stdin=true`
  const ws = new WebSocket(wsUrl, ['v4.channel.k8s.io'])
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  t.equal(ws.protocol, 'v4.channel.k8s.io')
  const echoed = new Promise<Buffer>(resolve => ws.once('message', data => resolve(data as Buffer)))
  ws.send(Buffer.from([0, 104, 105]))
  t.same([...(await echoed)], [0, 104, 105])
  ws.close()

  const sock = net.connect(s.port, '127.0.0.1')
  sock.write(
    'POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n',
  )
  let got = ''
  await new Promise<void>(resolve => {
    sock.on('data', d => {
      got += d.toString('latin1')
      if (got.includes('\r\n\r\n') && !got.includes('ping')) sock.write('ping')
      if (got.endsWith('ping')) resolve()
    })
  })
  t.match(got, /^HTTP\/1\.1 101 Switching Protocols\r\n/)
  t.match(got, /\r\nUpgrade: SPDY\/3\.1\r\n/)
  t.match(got, /\r\nX-Stream-Protocol-Version: portforward\.k8s\.io\r\n/)
  sock.destroy()
  t.ok(
    s.requests.some(r => r.url.endsWith('/portforward')),
    'upgrades are logged',
  )
})

t.test('malformed requests do not crash the simulator', async t => {
  const s = await sim(t)
  const sock = net.connect(s.port, '127.0.0.1')
  sock.on('error', () => {})
  let answer = ''
  sock.on('data', d => (answer += d))
  sock.write('GARBAGE\r\n\r\n')
  await new Promise(resolve => sock.once('close', resolve))
  t.match(answer, /^HTTP\/1\.1 400 /)
  const half = net.connect(s.port, '127.0.0.1')
  half.write('POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":')
  await waitFor(() => s.requests.length >= 1)
  half.destroy()
  t.equal((await request(`${s.url}/healthz`)).status, 200)
})

t.test('the demo cluster', async t => {
  const s = await startDemoCluster()
  t.teardown(() => s.close())
  t.same(
    s.list('v1', 'Node').map(n => n.metadata.name),
    ['kind-control-plane', 'kind-worker', 'kind-worker2', 'kind-worker3'],
  )
  const pools = await request(`${s.url}/apis/apps.openyurt.io/v1beta1/nodepools`)
  t.same(
    pools.json.items.map((p: any) => [p.metadata.name, p.status.nodes]),
    [
      ['beijing', ['kind-control-plane']],
      ['hangzhou', ['kind-worker']],
      ['shanghai', ['kind-worker2', 'kind-worker3']],
    ],
  )
  t.ok(s.get('discovery.k8s.io/v1beta1', 'EndpointSlice', 'default', 'svc-ud1-beta'), 'extra-objects.yaml is loaded')
  t.ok(s.get('coordination.k8s.io/v1', 'Lease', 'kube-node-lease', 'kind-worker2'))
  t.equal(s.get('v1', 'Secret', 'default', 'app-secret').data.password, 'czNjcjN0', 'stringData becomes data')
  const svc = s.get('v1', 'Service', 'default', 'svc-ud1')
  t.match(svc.spec, { type: 'ClusterIP', clusterIP: /^10\.96\./ })
  t.equal(s.get('v1', 'Service', 'default', 'kubernetes').spec.clusterIP, '10.96.0.1')
  const slices = await request(`${s.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dsvc-ud1`)
  t.same(
    slices.json.items.map((i: any) => i.metadata.name),
    ['svc-ud1-abcde', 'svc-ud1-beta'],
  )
})

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now()
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error('condition not met in time')
    await new Promise(r => setTimeout(r, 5))
  }
}
