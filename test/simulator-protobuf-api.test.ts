// The simulator's protobuf beyond the recorded requests: content negotiation as the apiserver does it
// (goautoneg order, JSON / YAML / protobuf per clause, transforms), error Statuses in protobuf (the
// recorded JSON errors, encoded), list chunks, protobuf request bodies (415 where the codec cannot
// read them), gzip at the 128 KiB boundary, metadata-only watches, and the demo cluster encodable.

import t from 'tap'
import http from 'node:http'
import { gunzipSync } from 'node:zlib'
import { decodeWatchEvent } from '../lib/codec/protobuf.ts'
import { decodeBody, decodeWatchFrame, encodeBody } from '../lib/codec/typed.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { fixtureJson } from './helpers/fixtures.ts'
import { ApiServerSimulator } from './simulator/index.ts'
import { startDemoCluster } from './simulator/demo.ts'
import { encodeLenient } from './simulator/protobuf.ts'
import { negotiate, servesProtobuf, statusFormat } from './simulator/render.ts'
import { ResourceRegistry } from './simulator/resources.ts'
import { request } from './simulator/testclient.ts'

const pb = 'application/vnd.kubernetes.protobuf'
const meta = (as: string) => `${pb};as=${as};g=meta.k8s.io;v=v1,application/json;as=${as};g=meta.k8s.io;v=v1,application/json`

t.test('negotiation: the apiserver rules', async t => {
  const registry = new ResourceRegistry()
  const configmaps = registry.byGVR('', 'v1', 'configmaps')!
  const csrs = registry.byGVR('certificates.k8s.io', 'v1', 'certificatesigningrequests')!
  const pools = registry.register({ group: 'apps.openyurt.io', version: 'v1beta1', resource: 'nodepools', kind: 'NodePool', namespaced: false })
  const json = { kind: 'json' }
  const proto = { kind: 'json', protobuf: true }
  const cases: [string | undefined, 'object' | 'list' | 'watch', (typeof json | typeof proto | object | undefined)[]][] = [
    // [Accept, target, [ConfigMap, CSR (built in, unknown to the codec), NodePool (custom)]]
    [undefined, 'list', [json, json, json]],
    [pb, 'list', [proto, undefined, undefined]],
    [`${pb}, */*`, 'object', [proto, json, json]],
    [`${pb},application/json`, 'watch', [proto, json, json]],
    [`application/json, ${pb}`, 'list', [json, json, json]],
    [`application/json;q=0.5, ${pb}`, 'list', [proto, json, json]],
    [`*/*, ${pb}`, 'list', [proto, json, json]], // goautoneg puts specific types before wildcards
    ['application/*', 'list', [json, json, json]],
    [`${pb};stream=watch`, 'watch', [proto, undefined, undefined]],
    [`${pb};stream=other, application/json`, 'watch', [json, json, json]],
    ['application/yaml', 'list', [undefined, undefined, undefined]],
    ['application/yaml, application/json', 'list', [json, json, json]],
    [`${pb};q=0, application/json`, 'list', [json, json, json]],
    [`${pb};as=Table;g=meta.k8s.io;v=v1`, 'list', [undefined, undefined, undefined]],
    [`${pb};as=Table;g=meta.k8s.io;v=v1, application/json`, 'list', [json, json, json]],
    [meta('PartialObjectMetadataList'), 'list', Array(3).fill({ kind: 'partial', protobuf: true })],
    [meta('PartialObjectMetadata'), 'watch', Array(3).fill({ kind: 'partial', protobuf: true })],
    [meta('PartialObjectMetadata'), 'list', [json, json, json]],
    [`${pb};as=PartialObjectMetadataList;g=meta.k8s.io;v=v2, application/json`, 'list', [json, json, json]],
  ]
  for (const [accept, target, want] of cases) {
    const got = [configmaps, csrs, pools].map(e => negotiate(accept, target, null, e))
    t.same(got, want, `${accept} (${target})`)
  }
  t.same(negotiate(`application/json;as=Table;g=meta.k8s.io;v=v1, ${pb}`, 'list', 'Object', configmaps), { kind: 'table', include: 'Object' })
  t.same(negotiate(`${pb}, */*`, 'object'), json, 'without a resource (discovery): JSON')

  for (const [accept, want] of [
    [undefined, 'json'],
    [pb, 'protobuf'],
    [`${pb}, */*`, 'protobuf'],
    [`application/json, ${pb}`, 'json'],
    ['text/html', 'json'],
    [`${pb};as=Table;g=meta.k8s.io;v=v1`, 'json'],
    [meta('PartialObjectMetadataList'), 'json'],
    [`${pb};as=Table;g=meta.k8s.io;v=v1, ${pb}`, 'protobuf'],
  ] as const) {
    t.equal(statusFormat(accept), want, `error Status for ${accept}`)
  }
})

t.test('errors are protobuf Statuses when protobuf was asked for: the recorded ones, encoded', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  const slices = `${sim.url}/apis/discovery.k8s.io/v1/endpointslices`
  const check = async (r: Awaited<ReturnType<typeof request>>, code: number, fixture: string) => {
    t.equal(r.status, code, fixture)
    t.equal(r.headers['content-type'], pb)
    t.ok(r.raw.equals(encodeBody(fixtureJson(fixture))), `${fixture}: the recorded Status, in protobuf`)
  }
  await check(
    await request(`${slices.replace('endpointslices', 'namespaces/default/endpointslices')}/nope`, { headers: { Accept: `${pb}, */*` } }),
    404,
    'get-notfound.json',
  )
  const emptyStart = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 206, start: '' })).toString('base64url')
  await check(await request(`${slices}?limit=1&continue=${emptyStart}`, { headers: { Accept: pb } }), 400, 'list-bad-continue.json')
  const body = encodeBody({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x y', creationTimestamp: null } })
  const invalid = await request(`${sim.url}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    headers: { 'Content-Type': pb, Accept: `${pb}, application/json` },
    body,
  })
  await check(invalid, 422, 'create-invalid.json')
  const old = sim.currentResourceVersion()
  sim.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'later', namespace: 'default' } })
  sim.compact()
  await check(await request(`${slices}?resourceVersion=${Number(old) - 1}&resourceVersionMatch=Exact`, { headers: { Accept: pb } }), 410, 'list-expired.json')

  const table = await request(slices, { headers: { Accept: `${pb};as=Table;g=meta.k8s.io;v=v1` } })
  t.equal(table.status, 406, 'no Table in protobuf')
  t.equal(table.headers['content-type'], 'application/json', 'and the Status is JSON, as no transform is acceptable for it')
  t.equal(table.json.message, 'only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf')
  const jsonError = await request(`${sim.url}/api/v1/namespaces/default/configmaps/nope`)
  t.equal(jsonError.headers['content-type'], 'application/json')
  t.same(jsonError.json, { ...fixtureJson('get-notfound.json'), message: 'configmaps "nope" not found', details: { name: 'nope', kind: 'configmaps' } })
})

t.test('list chunks in protobuf carry continue and remainingItemCount', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  for (const name of ['a', 'b', 'c']) sim.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default' }, data: { k: name } })
  const url = `${sim.url}/api/v1/configmaps?limit=2`
  const asJson = await request(url)
  const first = decodeBody((await request(url, { headers: { Accept: pb } })).raw) as any
  t.same(first.metadata, asJson.json.metadata, 'the same continue token and remainingItemCount as in JSON')
  t.equal(first.metadata.remainingItemCount, 1)
  const rest = decodeBody((await request(`${url}&continue=${first.metadata.continue}`, { headers: { Accept: pb } })).raw) as any
  t.same(
    [...first.items, ...rest.items].map((i: any) => i.metadata.name),
    ['a', 'b', 'c'],
  )
  t.equal(rest.metadata.continue, undefined)
})

t.test('protobuf request bodies: decoded for the kinds the codec knows, else 415', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  sim.registerResource({ group: 'apps.openyurt.io', version: 'v1beta1', resource: 'nodepools', kind: 'NodePool', namespaced: false })
  const send = (method: string, path: string, body: Buffer, accept = `${pb}, application/json`) =>
    request(sim.url + path, { method, headers: { 'Content-Type': pb, Accept: accept }, body })
  // kubectl create configmap
  const created = await send(
    'POST',
    '/api/v1/namespaces/default/configmaps',
    encodeBody({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'made', creationTimestamp: null }, data: { k: 'v' } }),
  )
  t.equal(created.status, 201)
  t.equal(created.headers['content-type'], pb)
  t.match(decodeBody(created.raw), { kind: 'ConfigMap', metadata: { name: 'made', namespace: 'default' }, data: { k: 'v' } })
  t.same(sim.get('v1', 'ConfigMap', 'default', 'made').data, { k: 'v' })
  // kubelet renewing its Lease
  sim.create({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'n1', namespace: 'kube-node-lease' },
    spec: { holderIdentity: 'n1', leaseDurationSeconds: 40 },
  })
  const leasePath = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1'
  const lease = decodeBody((await request(sim.url + leasePath, { headers: { Accept: pb } })).raw) as any
  const renewed = await send('PUT', leasePath, encodeBody({ ...lease, spec: { ...lease.spec, renewTime: '2026-11-22T10:00:00.123456Z' } }), pb)
  t.equal(renewed.status, 200)
  const after = decodeBody(renewed.raw) as any
  t.equal(after.spec.renewTime, '2026-11-22T10:00:00.123456Z', 'MicroTime kept to the microsecond')
  t.not(after.metadata.resourceVersion, lease.metadata.resourceVersion)
  const stale = await send('PUT', leasePath, encodeBody(lease), pb)
  t.equal(stale.status, 409)
  t.match(decodeBody(stale.raw), { kind: 'Status', reason: 'Conflict' })
  // pod status through the subresource
  sim.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default' }, spec: { containers: [{ name: 'c', image: 'i' }] } })
  const pod = decodeBody((await request(`${sim.url}/api/v1/namespaces/default/pods/p`, { headers: { Accept: pb } })).raw) as any
  const status = await send('PUT', '/api/v1/namespaces/default/pods/p/status', encodeBody({ ...pod, status: { phase: 'Running', podIP: '10.0.0.9' } }))
  t.equal(status.status, 200)
  t.match(sim.get('v1', 'Pod', 'default', 'p').status, { phase: 'Running', podIP: '10.0.0.9' })

  const refusedCustom = await send(
    'POST',
    '/apis/apps.openyurt.io/v1beta1/nodepools',
    encodeBody({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'x' } }),
  )
  t.equal(refusedCustom.status, 415)
  t.match(decodeBody(refusedCustom.raw), { reason: 'UnsupportedMediaType', message: /accepted media types include: application\/json, application\/yaml$/ })
  const refusedCsr = await send('POST', '/apis/certificates.k8s.io/v1/certificatesigningrequests', Buffer.from('k8s\0'), 'application/json')
  t.equal(refusedCsr.status, 415, 'a built-in kind the codec does not know')
  t.equal(refusedCsr.json.reason, 'UnsupportedMediaType')
  const garbage = await send('POST', '/api/v1/namespaces/default/configmaps', Buffer.from('not protobuf'), 'application/json')
  t.equal(garbage.status, 400)
  t.match(garbage.json.message, /^the object provided is unrecognized \(must be of type ConfigMap\)/)
  const wrongKind = await send(
    'POST',
    '/api/v1/namespaces/default/configmaps',
    encodeBody({ kind: 'Secret', apiVersion: 'v1', metadata: { name: 's' } }),
    'application/json',
  )
  t.equal(wrongKind.status, 400)
  t.match(wrongKind.json.message, /^Secret in version "v1" cannot be handled as a ConfigMap/)

  const deleted = await request(`${sim.url}/api/v1/namespaces/default/configmaps/made`, { method: 'DELETE', headers: { Accept: pb } })
  t.equal(deleted.headers['content-type'], pb)
  t.match(decodeBody(deleted.raw), { kind: 'ConfigMap', metadata: { name: 'made' } })
})

t.test('gzip only above 128 KiB, as the apiserver', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  const path = `${sim.url}/api/v1/namespaces/default/configmaps/big`
  sim.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'big', namespace: 'default' }, data: { k: 'x'.repeat(131000) } })
  const size = (await request(path, { headers: { Accept: pb } })).raw.length
  const value = 'x'.repeat(131000 + 128 * 1024 - size) // a body of exactly 128 KiB
  sim.patch('v1', 'ConfigMap', 'default', 'big', { data: { k: value } })
  const exact = await request(path, { headers: { Accept: pb, 'Accept-Encoding': 'gzip' } })
  t.equal(exact.raw.length, 128 * 1024)
  t.equal(exact.headers['content-encoding'], undefined, '128 KiB exactly stays plain')
  sim.patch('v1', 'ConfigMap', 'default', 'big', { data: { k: value + 'x' } })
  const over = await request(path, { headers: { Accept: pb, 'Accept-Encoding': 'gzip' } })
  t.equal(over.headers['content-encoding'], 'gzip')
  t.equal(over.headers['vary'], 'Accept-Encoding')
  t.equal(over.headers['content-type'], pb)
  t.equal(gunzipSync(over.raw).length, 128 * 1024 + 1)
})

t.test('fields outside the schema are left out of protobuf answers, kept in JSON', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  sim.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'odd', namespace: 'default', labels: { a: 'b' } }, data: { k: 'v' }, extra: { x: 1 } })
  const got = decodeBody((await request(`${sim.url}/api/v1/namespaces/default/configmaps/odd`, { headers: { Accept: pb } })).raw) as any
  t.same([got.data, got.metadata.labels, got.extra], [{ k: 'v' }, { a: 'b' }, undefined])
  t.same(encodeLenient(sim.get('v1', 'ConfigMap', 'default', 'odd')).dropped, ['extra'])
  t.same((await request(`${sim.url}/api/v1/namespaces/default/configmaps/odd`)).json.extra, { x: 1 })
  t.same(encodeLenient({ apiVersion: 'v1', kind: 'Service', spec: { ports: [{ port: 'eighty', name: 'web' }] } }).dropped, ['spec.ports[0].port'])
})

/** The first `n` frames of a protobuf watch. */
function frames(url: string, headers: Record<string, string>, n: number): Promise<{ headers: http.IncomingHttpHeaders; frames: Buffer[] }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, res => {
      const out: Buffer[] = []
      res.pipe(new WatchFrameSplitter('protobuf')).on('data', (f: Buffer) => {
        out.push(f)
        if (out.length === n) {
          req.destroy()
          resolve({ headers: res.headers, frames: out })
        }
      })
    })
    req.on('error', err => (req.destroyed ? undefined : reject(err)))
  })
}

t.test('a metadata informer watching in protobuf gets PartialObjectMetadata events and BOOKMARKs', async t => {
  const sim = await ApiServerSimulator.start({ bookmarkIntervalMs: 20 })
  t.teardown(() => sim.close())
  sim.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'default', labels: { app: 'x' } }, spec: { ports: [{ port: 80 }] } })
  const w = await frames(`${sim.url}/api/v1/services?watch=true&allowWatchBookmarks=true`, { Accept: meta('PartialObjectMetadata') }, 2)
  t.equal(w.headers['content-type'], `${pb};stream=watch`)
  const [added, bookmark] = w.frames.map(f => decodeWatchFrame(f))
  t.match(added, { type: 'ADDED', object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { name: 's', labels: { app: 'x' } } } })
  t.equal((added.object as any).spec, undefined)
  t.match(bookmark, { type: 'BOOKMARK', object: { kind: 'PartialObjectMetadata', metadata: { resourceVersion: sim.currentResourceVersion() } } })
  t.equal(decodeWatchEvent(w.frames[0]).type, 'ADDED')
})

t.test('every object of the demo cluster is served in protobuf with nothing left out', async t => {
  const sim = await startDemoCluster()
  t.teardown(() => sim.close())
  let checked = 0
  for (const entry of sim.registry.all()) {
    if (!servesProtobuf(entry)) continue
    const path = `${sim.url}${entry.group ? `/apis/${entry.group}` : '/api'}/${entry.version}/${entry.resource}`
    const [asJson, asPb] = await Promise.all([request(path), request(path, { headers: { Accept: `${pb}, */*` } })])
    t.equal(asPb.headers['content-type'], pb, entry.resource)
    t.same(encodeLenient(asJson.json).dropped, [], `${entry.apiVersion} ${entry.resource}: every field is in the schema`)
    t.ok(encodeBody(asJson.json).equals(asPb.raw), `${entry.apiVersion} ${entry.resource}: the JSON answer, encoded`)
    checked += asJson.json.items.length
  }
  t.ok(checked > 20, `${checked} objects`)
})
