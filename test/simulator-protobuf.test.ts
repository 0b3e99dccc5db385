// The simulator's protobuf against the recorded kube-apiserver v1.24 bytes: loaded with the recorded
// cluster, it answers kube-proxy's and kubelet's protobuf requests with bodies that decode to the
// recorded objects and, once the values a server invents (uid, resourceVersion, creationTimestamp,
// generation, managedFields) are taken from the recording, re-encode to the recorded bytes exactly.
// What carries no invented value (the 406 Status, the 410 ERROR frame, a BOOKMARK's object) is
// compared byte for byte as sent. Negotiation, errors, bodies, gzip: simulator-protobuf-api.test.ts.

import t, { type Test } from 'tap'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { gunzipSync } from 'node:zlib'
import { decodeUnknown, decodeWatchEvent, splitList } from '../lib/codec/protobuf.ts'
import { decodeBody, decodeWatchFrame, encodeBody, encodeWatchFrame } from '../lib/codec/typed.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import { fixtureBytes, fixtureJson, watchFrames } from './helpers/fixtures.ts'
import { ApiServerSimulator } from './simulator/index.ts'
import { asWritten, loadList } from './helpers/recorded.ts'
import { request } from './simulator/testclient.ts'

const kubeProxy = { 'User-Agent': 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/4ce5a89', Accept: 'application/vnd.kubernetes.protobuf, */*' }
const kubelet = { 'User-Agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89', Accept: 'application/vnd.kubernetes.protobuf, */*' }
const metadataList =
  'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json'

async function recordedCluster(t: Test, options = {}): Promise<ApiServerSimulator> {
  const sim = await ApiServerSimulator.start(options)
  t.teardown(() => sim.close())
  for (const name of ['list-nodes.json', 'list-services.json', 'list-endpointslices.json', 'list-pods-kind-worker2.json']) loadList(sim, fixtureJson(name))
  return sim
}

/** The single recorded objects (not in the lists' cluster: the v1beta1 slice would be in the slice list). */
async function recordedSingles(t: Test): Promise<ApiServerSimulator> {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  loadList(sim, fixtureJson('list-nodes.json'))
  for (const name of ['get-endpoints-svc-ud1.json', 'get-endpointslice-v1beta1.json', 'get-lease-kind-worker2.json']) {
    const obj = fixtureJson(name)
    sim.create(asWritten(obj, obj.apiVersion, obj.kind))
  }
  return sim
}

const invented = ['uid', 'resourceVersion', 'creationTimestamp', 'generation', 'managedFields']

/** `obj` (decoded JSON) with the values a server invents taken from `recorded` (decoded JSON too). */
function withRecordedValues(obj: any, recorded: any): any {
  const meta = { ...obj.metadata }
  for (const k of invented) {
    if (recorded.metadata[k] === undefined) delete meta[k]
    else meta[k] = recorded.metadata[k]
  }
  const out = { ...obj, metadata: meta }
  if (Array.isArray(obj.items)) out.items = obj.items.map((item: any, i: number) => withRecordedValues(item, recorded.items[i] ?? { metadata: {} }))
  return out
}

/** The simulator's protobuf body against the recorded one: envelope, objects, and the bytes with the recorded values. */
function sameAsRecorded(t: Test, body: Buffer, recordedBody: Buffer, what: string): void {
  const u = decodeUnknown(body)
  const r = decodeUnknown(recordedBody)
  t.same([u.apiVersion, u.kind, u.contentEncoding, u.contentType], [r.apiVersion, r.kind, '', ''], `${what}: the envelope`)
  const got: any = decodeBody(body)
  const want: any = decodeBody(recordedBody)
  t.ok(encodeBody(got).equals(body), `${what}: the bytes are what Go writes for the object decoded from them`)
  if (Array.isArray(want.items)) {
    t.same(
      got.items.map((i: any) => i.metadata.name),
      want.items.map((i: any) => i.metadata.name),
      `${what}: the same items in the same order`,
    )
    t.equal(splitList(u.raw).items.length, splitList(r.raw).items.length)
  }
  const normalized = withRecordedValues(got, want)
  t.strictSame(normalized, want, `${what}: decodes to the recorded object`)
  t.ok(encodeBody(normalized).equals(recordedBody), `${what}: with the recorded uid, resourceVersion and times, the recorded bytes exactly`)
}

function checkHeaders(t: Test, headers: http.IncomingHttpHeaders, contentType: string): void {
  t.equal(headers['content-type'], contentType)
  t.equal(headers['cache-control'], 'no-cache, private')
  t.match(headers['audit-id'], /^[0-9a-f-]{36}$/)
  t.equal(headers['content-encoding'], undefined)
}

t.test("kube-proxy's and kubelet's gets and lists answer the recorded protobuf", async t => {
  const lists = await recordedCluster(t)
  const singles = await recordedSingles(t)
  const cases: [string, Record<string, string>, string][] = [
    ['/api/v1/nodes/kind-worker2', kubeProxy, 'get-node-kind-worker2.pb'],
    ['/apis/discovery.k8s.io/v1/endpointslices', kubeProxy, 'list-endpointslices.pb'],
    ['/api/v1/services', kubeProxy, 'list-services.pb'],
    ['/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2&limit=500&resourceVersion=0', kubelet, 'list-pods-kind-worker2.pb'],
    ['/api/v1/namespaces/default/endpoints/svc-ud1', kubeProxy, 'get-endpoints-svc-ud1.pb'],
    ['/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/svc-ud1-beta', kubeProxy, 'get-endpointslice-v1beta1.pb'],
    [
      '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kind-worker2',
      { ...kubelet, Accept: 'application/vnd.kubernetes.protobuf' },
      'get-lease-kind-worker2.pb',
    ],
    ['/api/v1/services', { Accept: metadataList }, 'list-services.metadata.pb'],
  ]
  for (const [path, headers, file] of cases) {
    const sim = file.startsWith('list-') ? lists : singles
    const r = await request(sim.url + path, { headers })
    t.equal(r.status, 200, file)
    checkHeaders(t, r.headers, 'application/vnd.kubernetes.protobuf')
    t.equal(Number(r.headers['content-length']), r.raw.length)
    sameAsRecorded(t, r.raw, fixtureBytes(file), file)
  }
  const recorded = readFileSync(new URL('./fixtures/apiserver-v1.24/list-endpointslices.pb.headers', import.meta.url), 'utf8')
  t.match(recorded, /^content-type: application\/vnd\.kubernetes\.protobuf$/m, 'the recorded Content-Type is the one checked')
})

t.test('a custom resource asked for in protobuf only: the recorded 406, byte for byte', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  sim.load(readFileSync(new URL('./fixtures/nodepool-crd.yaml', import.meta.url), 'utf8'))
  loadList(sim, fixtureJson('list-nodepools.json'))
  const url = `${sim.url}/apis/apps.openyurt.io/v1beta1/nodepools`
  const refused = await request(url, { headers: { Accept: 'application/vnd.kubernetes.protobuf' } })
  t.equal(refused.status, 406)
  t.ok(refused.raw.equals(fixtureBytes('list-nodepools-pb-refused.json')), 'the recorded protobuf Status')
  checkHeaders(t, refused.headers, 'application/vnd.kubernetes.protobuf')
  t.equal(refused.headers['content-length'], '178', 'as recorded')
  const watchRefused = await request(`${url}?watch=true`, { headers: { Accept: 'application/vnd.kubernetes.protobuf' } })
  t.equal(watchRefused.status, 406)
  t.ok(watchRefused.raw.equals(fixtureBytes('list-nodepools-pb-refused.json')), 'a watch is refused the same way')

  const pbOrJson = await request(url, { headers: { Accept: 'application/vnd.kubernetes.protobuf, */*' } })
  t.equal(pbOrJson.status, 200)
  checkHeaders(t, pbOrJson.headers, 'application/json')
  const recorded = JSON.parse(fixtureBytes('list-nodepools-pb-or-json.body').toString('utf8'))
  t.same(
    pbOrJson.json.items.map((i: any) => i.metadata.name),
    recorded.items.map((i: any) => i.metadata.name),
  )
  t.equal(pbOrJson.json.kind, recorded.kind)

  const meta = await request(url, { headers: { Accept: metadataList } })
  t.equal(meta.headers['content-type'], 'application/vnd.kubernetes.protobuf', "a metadata informer's list of custom resources is protobuf")
  const decoded = decodeBody(meta.raw)
  t.equal(decoded.kind, 'PartialObjectMetadataList')
  t.same(
    (decoded.items as any[]).map(i => [i.kind, i.metadata.name]),
    recorded.items.map((i: any) => ['PartialObjectMetadata', i.metadata.name]),
  )
})

interface FrameWatch {
  status: number
  headers: http.IncomingHttpHeaders
  next(timeoutMs?: number): Promise<Buffer>
  close(): void
}

/** A protobuf watch read frame by frame (4-byte length + WatchEvent each). */
function watchProtobuf(url: string, headers: Record<string, string>): Promise<FrameWatch> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, res => {
      const queue: Buffer[] = []
      let waiter: ((b: Buffer) => void) | undefined
      const frames = res.pipe(new WatchFrameSplitter('protobuf'))
      frames.on('data', (frame: Buffer) => {
        if (waiter) {
          const w = waiter
          waiter = undefined
          w(frame)
        } else queue.push(frame)
      })
      frames.on('error', () => {})
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        next: (timeoutMs = 5000) =>
          queue.length > 0
            ? Promise.resolve(queue.shift()!)
            : new Promise((ok, fail) => {
                const timer = setTimeout(() => fail(new Error(`no frame within ${timeoutMs} ms`)), timeoutMs)
                waiter = b => {
                  clearTimeout(timer)
                  ok(b)
                }
              }),
        close: () => req.destroy(),
      })
    })
    req.on('error', reject)
  })
}

/** A BOOKMARK's EndpointSlice as the apiserver writes it: ObjectMeta with every string empty, the resourceVersion, generation 0, the zero time, clusterName; then addressType "". */
function sliceBookmarkRaw(rv: string): string {
  const meta = `0a0012001a0022002a0032${rv.length.toString(16).padStart(2, '0')}${Buffer.from(rv).toString('hex')}380042007a00`
  return `0a${(meta.length / 2).toString(16).padStart(2, '0')}${meta}2200`
}

t.test("kube-proxy's watch: the recorded frames, and BOOKMARKs byte for byte", async t => {
  const sim = await recordedCluster(t, { bookmarkIntervalMs: 30 })
  const recorded = watchFrames(fixtureBytes('watch-endpointslices.pb'))
  const recordedEvents: any[] = recorded.map(f => decodeWatchFrame(f))
  const recordedBookmark = decodeUnknown(decodeWatchEvent(recorded[3]).object)
  t.equal(
    recordedBookmark.raw.toString('hex'),
    sliceBookmarkRaw(recordedEvents[3].object.metadata.resourceVersion),
    'the recorded BOOKMARK object is the expected bytes',
  )
  t.equal(recordedBookmark.raw.toString('hex'), '0a150a0012001a0022002a00320332303938004200' + '7a00' + '2200')

  const list = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices`, { headers: kubeProxy })
  const rv = decodeBody(list.raw).metadata as any
  const w = await watchProtobuf(
    `${sim.url}/apis/discovery.k8s.io/v1/endpointslices?allowWatchBookmarks=true&resourceVersion=${rv.resourceVersion}&timeout=7m&timeoutSeconds=600&watch=true`,
    kubeProxy,
  )
  t.teardown(() => w.close())
  t.equal(w.status, 200)
  t.equal(w.headers['content-type'], 'application/vnd.kubernetes.protobuf;stream=watch', 'exactly as recorded')
  t.equal(w.headers['cache-control'], 'no-cache, private')
  // what was done to the real cluster: an endpoint removed from svc-ud1-abcde, svc-ud1-zzzzz added and deleted
  const patched = await request(`${sim.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/json-patch+json', Accept: kubeProxy.Accept },
    body: [{ op: 'remove', path: '/endpoints/1' }],
  })
  t.equal(patched.headers['content-type'], 'application/vnd.kubernetes.protobuf', 'a patch answers in protobuf too')
  const added = recordedEvents.find(e => e.type === 'ADDED')!.object
  sim.create(asWritten(added, added.apiVersion as string, added.kind as string))
  sim.remove('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'svc-ud1-zzzzz')
  const frames: Buffer[] = []
  while (frames.filter(f => decodeWatchFrame(f).type === 'BOOKMARK').length < 2) {
    const f = await w.next()
    if (decodeWatchFrame(f).type !== 'BOOKMARK' || frames.length >= 3) frames.push(f)
  }
  const events: any[] = frames.map(f => decodeWatchFrame(f))
  t.same(
    events.map(e => e.type),
    recordedEvents.map(e => e.type),
  )
  for (let i = 0; i < 3; i++) {
    const normalized = withRecordedValues(events[i].object, recordedEvents[i].object)
    t.strictSame(normalized, recordedEvents[i].object, `${events[i].type}: the recorded object`)
    t.ok(encodeWatchFrame({ type: events[i].type, object: normalized }).equals(recorded[i]), `${events[i].type}: the recorded frame, with the recorded values`)
  }
  for (const i of [3, 4]) {
    const bookmarkRV = events[i].object.metadata.resourceVersion as string
    t.equal(bookmarkRV, events[2].object.metadata.resourceVersion, 'the bookmark is at the last event')
    t.equal(decodeUnknown(decodeWatchEvent(frames[i]).object).raw.toString('hex'), sliceBookmarkRaw(bookmarkRV), 'the BOOKMARK object, byte for byte')
    const expected = {
      ...recordedEvents[i],
      object: { ...recordedEvents[i].object, metadata: { ...recordedEvents[i].object.metadata, resourceVersion: bookmarkRV } },
    }
    t.ok(frames[i].equals(encodeWatchFrame(expected)), 'the whole BOOKMARK frame')
  }
})

t.test('a watch at a compacted resourceVersion: the recorded ERROR frame, byte for byte', async t => {
  const sim = await recordedCluster(t)
  const old = sim.currentResourceVersion()
  sim.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'later', namespace: 'default' } })
  sim.compact()
  const we = await request(`${sim.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=${Number(old) - 1}`, { headers: kubeProxy })
  t.equal(we.status, 200)
  t.equal(we.headers['content-type'], 'application/vnd.kubernetes.protobuf;stream=watch')
  t.ok(we.raw.equals(fixtureBytes('watch-expired.pb')), 'the recorded stream')
})

t.test('the 300-slice bulk list in protobuf: the recorded objects, gzip-encoded above 128 KiB', async t => {
  const sim = await ApiServerSimulator.start()
  t.teardown(() => sim.close())
  const bulk = JSON.parse(gunzipSync(fixtureBytes('list-endpointslices-bulk.json.gz')).toString('utf8'))
  loadList(sim, bulk)
  const url = `${sim.url}/apis/discovery.k8s.io/v1/namespaces/bulk/endpointslices`
  const plain = await request(url, { headers: kubeProxy })
  const zipped = await request(url, { headers: { ...kubeProxy, 'Accept-Encoding': 'gzip' } })
  const body = zipped.headers['content-encoding'] === 'gzip' ? gunzipSync(zipped.raw) : zipped.raw
  t.ok(body.equals(plain.raw), 'the same body either way')
  const recordedBody = encodeBody(bulk)
  sameAsRecorded(t, plain.raw, recordedBody, 'bulk')
  t.equal(zipped.headers['content-encoding'], plain.raw.length > 128 * 1024 ? 'gzip' : undefined, `gzip only above 128 KiB (${plain.raw.length} bytes)`)
})
