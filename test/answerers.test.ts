// The three answerers on their own, each built with fakes for what it depends on (no hub, no
// simulator), behind a bare HTTP server whose handler does what the router does for one route:
// classify, plan, build the Call, ask the answerer. Each case checks the outcome the router would
// act on and what the client received.
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { gzipSync } from 'node:zlib'
import { pino } from 'pino'
import { request } from 'undici'
import { classify } from '../lib/api/requestinfo.ts'
import type { RequestInfo } from '../lib/api/requestinfo.ts'
import { planRequest } from '../lib/front/plan.ts'
import type { PlanFacts } from '../lib/front/plan.ts'
import { ClientGone } from '../lib/front/answerer.ts'
import type { Answerer, Outcome } from '../lib/front/answerer.ts'
import { UpstreamAnswerer } from '../lib/front/upstream-answerer.ts'
import { WatchCacheAnswerer } from '../lib/front/watch-cache-answerer.ts'
import { OfflineAnswerer } from '../lib/front/offline-answerer.ts'
import { UpstreamUnavailableError } from '../lib/upstream/upstream.ts'
import type { Upstream, UpstreamRequest, UpstreamResponse } from '../lib/upstream/upstream.ts'
import { CacheStore } from '../lib/cache/store.ts'
import { Recorder, isCachedKind } from '../lib/cache/recorder.ts'
import { isDiscoveryDocument } from '../lib/cache/documents.ts'
import { parseScope } from '../lib/cache/scope.ts'
import type { CachedObject } from '../lib/cache/types.ts'
import type { WireFormat } from '../lib/api/wire-format.ts'
import type { ResponseFilter } from '../filters/registry.ts'
import { WatchCache } from '../lib/watch/cache.ts'
import type { WatchCaches } from '../lib/watch/watch-caches.ts'
import { FilteredWatches } from '../lib/watch/filtered-watches.ts'
import { RememberedLists } from '../lib/watch/remembered-lists.ts'
import { LiveStreams } from '../lib/watch/streams.ts'
import { decodeUnknown, listWireParts } from '../lib/codec/protobuf.ts'
import { fixtureBytes } from './helpers/fixtures.ts'

const log = pino({ level: 'silent' })
const kubelet = 'kubelet/v1.31.0 (linux/amd64) kubernetes/abc'
const kubeProxy = 'kube-proxy/v1.31.0'
/** what the test's handler writes when the answerer wrote nothing: the router's turn */
const marker = 418

interface Serving {
  base: string
  /** each request's outcome, in arrival order (pushed as the request arrives) */
  outcomes: Promise<Outcome>[]
  /** the response being answered most recently (to see, from a fake, what was sent so far) */
  last?: ServerResponse
}

/** One answerer behind a server on 127.0.0.1, asked as the router asks it, with `reason` from earlier routes. */
async function serve(t: Test, answerer: Answerer, options: { facts?: Partial<PlanFacts>; filter?: ResponseFilter; reason?: string } = {}): Promise<Serving> {
  const serving: Serving = { base: '', outcomes: [] }
  const handle = async (req: http.IncomingMessage, res: ServerResponse): Promise<Outcome> => {
    serving.last = res
    const info = classify(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = chunks.length ? Buffer.concat(chunks) : undefined
    const plan = planRequest({
      actsAsNode: req.headers.authorization === undefined,
      online: true,
      cacheable: false,
      recordedWrite: false,
      document: isDiscoveryDocument(info),
      cachedKind: isCachedKind(info),
      watchCache: false,
      filtered: options.filter !== undefined,
      ...options.facts,
    })
    const clientGone = new ClientGone()
    res.on('close', () => res.writableFinished || clientGone.abort())
    const outcome = await answerer.answer({ info, req, res, body, plan, filter: options.filter, clientGone }, options.reason)
    if (outcome.kind !== 'answered' && !res.headersSent) {
      res.writeHead(marker, { 'content-type': 'text/plain' })
      res.end(`router's turn: ${outcome.kind}`)
    }
    return outcome
  }
  const server = http.createServer((req, res) => {
    const outcome = handle(req, res)
    // an answerer that throws: the client is not left waiting (the test fails on the outcome)
    outcome.catch(error => (res.headersSent ? res.destroy() : res.writeHead(500).end(String(error))))
    serving.outcomes.push(outcome)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => (server.closeAllConnections(), server.close(() => resolve()))))
  serving.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return serving
}

/** A request and everything the client received. */
async function send(url: string, options: { method?: 'GET' | 'PUT' | 'POST'; headers?: Record<string, string>; body?: string } = {}) {
  const res = await request(url, { method: options.method ?? 'GET', headers: options.headers, body: options.body })
  const body = Buffer.from(await res.body.arrayBuffer())
  return { status: res.statusCode, headers: res.headers, body, json: () => JSON.parse(body.toString()) }
}

// ---- UpstreamAnswerer ----------------------------------------------------------------------

function fakeUpstream(answer: (req: UpstreamRequest) => UpstreamResponse | Error) {
  const asked: UpstreamRequest[] = []
  const upstream = {
    async request(req: UpstreamRequest): Promise<UpstreamResponse> {
      asked.push(req)
      const a = answer(req)
      if (a instanceof Error) throw a
      return a
    },
  }
  return { upstream: upstream as unknown as Upstream, asked }
}

const apiserverSays = (body: Buffer | string, headers: Record<string, string> = {}, statusCode = 200): UpstreamResponse => ({
  server: new URL('https://apiserver.test:6443'),
  statusCode,
  headers: { 'content-type': 'application/json', ...headers },
  body: Readable.from([Buffer.from(body)]),
})

function upstreamAnswerer(upstream: Upstream, more: { recorder?: Recorder; rememberedLists?: RememberedLists } = {}) {
  return new UpstreamAnswerer({
    upstream,
    log,
    recorder: more.recorder,
    filteredWatches: new FilteredWatches(),
    rememberedLists: more.rememberedLists ?? new RememberedLists(),
    streams: new LiveStreams(),
    watchSilenceMs: 0,
  })
}

/** A recorder that must not be used. */
const untouchable = new Proxy({} as Recorder, {
  get: (_, name) => (name === 'then' ? undefined : () => t.fail(`recorder.${String(name)} called`)),
})

const configMapList = JSON.stringify({
  kind: 'ConfigMapList',
  apiVersion: 'v1',
  metadata: { resourceVersion: '42' },
  items: [{ metadata: { name: 'a', namespace: 'default', resourceVersion: '41' }, data: { k: 'v' } }],
})

t.test('upstream: no apiserver reachable is unavailable, and nothing is written: the router decides', async t => {
  const error = new UpstreamUnavailableError([{ server: 'https://apiserver.test:6443', error: 'connect ECONNREFUSED' }])
  const { upstream } = fakeUpstream(() => error)
  const s = await serve(t, upstreamAnswerer(upstream))
  const got = await send(`${s.base}/api/v1/namespaces/default/configmaps/a`, { headers: { 'user-agent': kubelet } })
  t.same(await s.outcomes[0], { kind: 'unavailable', reason: error.message })
  t.match(error.message, /connect ECONNREFUSED/)
  t.equal(got.status, marker, 'the response was left to the router')
  t.equal(got.body.toString(), "router's turn: unavailable")
})

t.test('upstream: a connection that broke before an answer is a 503 saying the request may have been applied', async t => {
  const { upstream, asked } = fakeUpstream(() => Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }))
  const s = await serve(t, upstreamAnswerer(upstream))
  const got = await send(`${s.base}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    headers: { 'user-agent': kubelet, 'content-type': 'application/json' },
    body: '{"metadata":{"name":"b"}}',
  })
  t.same(await s.outcomes[0], { kind: 'answered', source: 'hub' })
  t.equal(got.status, 503)
  t.match(got.json(), { kind: 'Status', code: 503, reason: 'ServiceUnavailable', message: /may have been applied.*UND_ERR_SOCKET: other side closed/ })
  t.equal(asked[0]!.method, 'POST')
  t.equal(asked[0]!.body?.toString(), '{"metadata":{"name":"b"}}', "the client's body went upstream")
})

t.test('upstream: a plain get is passed through byte for byte', async t => {
  // spacing no serializer would produce: only an untouched relay keeps it
  const raw = '{"kind":"ConfigMap",  "apiVersion":"v1","metadata":{"name":"a"}}\n'
  const { upstream, asked } = fakeUpstream(() => apiserverSays(raw, { 'x-from-apiserver': 'yes' }))
  const s = await serve(t, upstreamAnswerer(upstream, { recorder: untouchable }))
  const got = await send(`${s.base}/api/v1/namespaces/default/configmaps/a`, { headers: { 'user-agent': 'kubectl/v1.31.0' } })
  t.same(await s.outcomes[0], { kind: 'answered', source: 'cloud' })
  t.equal(got.status, 200)
  t.equal(got.body.toString(), raw)
  t.equal(got.headers['x-from-apiserver'], 'yes', "the apiserver's headers are relayed")
  t.equal(asked[0]!.path, '/api/v1/namespaces/default/configmaps/a')
  t.equal(asked[0]!.longRunning, false)
})

t.test('upstream: a recorded list is recorded before anything is sent, and sent as the apiserver sent it', async t => {
  const recorded: { info: RequestInfo; format: WireFormat; body: string; headersSent: boolean | undefined }[] = []
  let s: Serving
  const recorder = {
    store: undefined,
    async recordListPage(info: RequestInfo, format: WireFormat, body: Buffer) {
      await new Promise(resolve => setImmediate(resolve)) // a write that takes a while: the answer waits for it
      recorded.push({ info, format, body: body.toString(), headersSent: s.last?.headersSent })
    },
  } as unknown as Recorder
  const gzipped = gzipSync(configMapList)
  const { upstream } = fakeUpstream(() => apiserverSays(gzipped, { 'content-encoding': 'gzip' }))
  s = await serve(t, upstreamAnswerer(upstream, { recorder }), { facts: { cacheable: true } })
  const got = await send(`${s.base}/api/v1/configmaps`, { headers: { 'user-agent': kubelet, 'accept-encoding': 'gzip' } })
  t.same(await s.outcomes[0], { kind: 'answered', source: 'cloud' })
  t.equal(recorded.length, 1, 'one page recorded')
  t.equal(recorded[0]!.headersSent, false, 'the recording finished before the response was begun')
  t.equal(recorded[0]!.body, configMapList, 'the recorder gets the decompressed list')
  t.equal(recorded[0]!.format, 'json')
  t.equal(recorded[0]!.info.verb, 'list')
  t.equal(got.status, 200)
  t.equal(got.headers['content-encoding'], 'gzip', 'the client gets what the apiserver sent, gzip included')
  t.same(got.body, gzipped)
})

t.test("upstream: the client's filters change what it receives", async t => {
  const filtered = '{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[]}'
  const seen: string[] = []
  const filter = {
    names: ['test'],
    body: (_format: WireFormat, body: Buffer) => (seen.push(body.toString()), body.toString().includes('"kind":"ConfigMap"') ? null : Buffer.from(filtered)),
  } as unknown as ResponseFilter
  const remembered = new RememberedLists()
  const { upstream } = fakeUpstream(req =>
    req.path.startsWith('/api/v1/configmaps')
      ? apiserverSays(gzipSync(configMapList), { 'content-encoding': 'gzip' })
      : apiserverSays('{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"default"}}'),
  )
  const s = await serve(t, upstreamAnswerer(upstream, { rememberedLists: remembered }), { filter })

  const list = await send(`${s.base}/api/v1/configmaps`, { headers: { 'user-agent': 'nginx-ingress-controller/v1', 'accept-encoding': 'gzip' } })
  t.same(await s.outcomes[0], { kind: 'answered', source: 'cloud' })
  t.equal(seen[0], configMapList, 'the filter sees the decompressed list')
  t.equal(list.status, 200)
  t.equal(list.body.toString(), filtered, 'the filtered list is what the client gets')
  t.equal(list.headers['content-encoding'], undefined, 'sent plain')
  t.equal(list.headers['content-length'], String(filtered.length))
  const info = classify('GET', '/api/v1/configmaps?watch=true', 'nginx-ingress-controller/v1')
  t.same(
    remembered.take(info).map(o => o.name),
    ['a'],
    'the unfiltered list is remembered for the watch that follows',
  )

  const get = await send(`${s.base}/api/v1/namespaces/default/configmaps/a`, { headers: { 'user-agent': 'nginx-ingress-controller/v1' } })
  t.same(await s.outcomes[1], { kind: 'answered', source: 'cloud' })
  t.equal(get.status, 404, 'an object the filters drop is not there')
  t.match(get.json(), { kind: 'Status', code: 404, reason: 'NotFound', message: 'configmaps "a" not found', details: { name: 'a', kind: 'configmaps' } })
})

// ---- WatchCacheAnswerer --------------------------------------------------------------------

function configMap(name: string, rv: string): CachedObject {
  const body = Buffer.from(
    JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: rv }, data: { a: name } }),
  )
  return { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name, resourceVersion: rv, format: 'json', body, labels: {} }
}

async function watchCacheAnswerer() {
  const cache = new WatchCache({
    storeKey: { component: 'shared-json', group: '', version: 'v1', resource: 'configmaps' },
    scope: parseScope({ namespace: '', labelSelector: '', fieldSelector: '' }),
    format: 'json',
    log,
  })
  await cache.replace([configMap('a', '5'), configMap('b', '7')], '10', 'json')
  await cache.synced
  const caches = { cacheFor: () => cache } as unknown as WatchCaches
  return new WatchCacheAnswerer({ caches, filteredWatches: new FilteredWatches(), streams: new LiveStreams() })
}

t.test('watch cache: a Table is declined, nothing written', async t => {
  const s = await serve(t, await watchCacheAnswerer(), { facts: { watchCache: true } })
  const got = await send(`${s.base}/api/v1/configmaps`, { headers: { 'user-agent': kubeProxy, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } })
  t.match(await s.outcomes[0], { kind: 'declined', why: /Table/ })
  t.equal(got.status, marker, 'the next route answers it')
})

t.test("watch cache: a list, once synced, is the cache's items at its resourceVersion", async t => {
  const answerer = await watchCacheAnswerer()
  const online = await serve(t, answerer, { facts: { watchCache: true } })
  // an informer's list (resourceVersion=0: any state at least as new as the client has seen)
  const got = await send(`${online.base}/api/v1/configmaps?resourceVersion=0`, { headers: { 'user-agent': kubeProxy, accept: 'application/json' } })
  t.same(await online.outcomes[0], { kind: 'answered', source: 'cache' })
  t.equal(got.status, 200)
  t.match(got.headers['content-type'], /^application\/json/)
  const list = got.json()
  t.equal(list.kind, 'ConfigMapList')
  t.equal(list.metadata.resourceVersion, '10')
  t.same(
    list.items.map((i: { metadata: { name: string } }) => i.metadata.name),
    ['a', 'b'],
  )
  t.equal(got.headers['x-outpost-cache'], undefined, 'online, the watch cache is the cloud: no cache headers')

  const offline = await serve(t, answerer, { facts: { watchCache: true, online: false } })
  const away = await send(`${offline.base}/api/v1/configmaps`, { headers: { 'user-agent': kubeProxy, accept: 'application/json' } })
  t.equal(away.status, 200)
  t.equal(away.headers['x-outpost-cache'], 'hit', 'offline, curl -i shows the cache answered')
  t.equal(away.headers['x-outpost-cache-source'], 'shared-json')
})

// ---- OfflineAnswerer -----------------------------------------------------------------------

const outage = 'no apiserver reachable: https://apiserver.test:6443: connect ECONNREFUSED'
const nodeName = 'edge-1'

function offlineAnswerer(store: CacheStore | undefined) {
  return new OfflineAnswerer({ store, nodeName, outage: () => outage, streams: new LiveStreams(), bookmarkIntervalMs: 60_000 })
}

function memoryStore(t: Test) {
  const store = new CacheStore(undefined, log)
  t.teardown(() => store.close())
  return store
}

t.test('offline: a client with its own credentials is unavailable, and why', async t => {
  const reason = 'no apiserver reachable: https://10.0.0.1:6443: connect EHOSTUNREACH'
  const s = await serve(t, offlineAnswerer(memoryStore(t)), { reason, facts: { online: false } })
  const got = await send(`${s.base}/api/v1/namespaces/default/configmaps/a`, { headers: { 'user-agent': 'kubectl/v1.31.0', authorization: 'Bearer abc' } })
  const outcome = await s.outcomes[0]
  t.equal(outcome!.kind, 'unavailable')
  const said = outcome!.kind === 'unavailable' ? outcome!.reason : ''
  t.ok(said.startsWith(`${reason}: `), 'the earlier route’s reason comes first')
  t.match(said, /carries its own credentials/)
  t.equal(got.status, marker, 'the router writes the 503')
})

t.test('offline: a write is unavailable, and says nothing was written', async t => {
  const s = await serve(t, offlineAnswerer(memoryStore(t)), { facts: { online: false } })
  const got = await send(`${s.base}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    headers: { 'user-agent': kubelet, 'content-type': 'application/json' },
    body: '{"metadata":{"name":"b"}}',
  })
  const outcome = (await s.outcomes[0]) as { kind: string; reason: string }
  t.equal(outcome.kind, 'unavailable')
  t.ok(outcome.reason.startsWith(`${outage}: `), 'no earlier reason: the outage says why')
  t.match(outcome.reason, /create configmaps for kubelet cannot be answered from the cache; nothing was written$/)
  t.equal(got.status, marker)
})

t.test("offline: the node's own Lease renewal is acknowledged with what it sent", async t => {
  const store = memoryStore(t)
  const s = await serve(t, offlineAnswerer(store), { facts: { online: false } })
  const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${nodeName}`
  const lease = (rv: string) =>
    JSON.stringify({
      kind: 'Lease',
      apiVersion: 'coordination.k8s.io/v1',
      metadata: { name: nodeName, namespace: 'kube-node-lease', resourceVersion: rv },
      spec: { holderIdentity: nodeName, renewTime: '2025-01-01T00:00:00.000000Z' },
    })
  const headers = { 'user-agent': kubelet, 'content-type': 'application/json' }

  const renewed = await send(`${s.base}${path}`, { method: 'PUT', headers, body: lease('5') })
  t.same(await s.outcomes[0], { kind: 'answered', source: 'hub' })
  t.equal(renewed.status, 200)
  t.equal(renewed.body.toString(), lease('5'), 'the renewal is echoed')
  t.equal(renewed.headers['content-type'], 'application/json')

  // once the cache holds the Lease at 9, a renewal built from 5 is the apiserver's 409
  await new Recorder(store, log).recordObject(classify('GET', path, kubelet), 'json', Buffer.from(lease('9')))
  const stale = await send(`${s.base}${path}`, { method: 'PUT', headers, body: lease('5') })
  t.same(await s.outcomes[1], { kind: 'answered', source: 'hub' })
  t.equal(stale.status, 409)
  t.match(stale.json(), { kind: 'Status', reason: 'Conflict', details: { name: nodeName } })
  const current = await send(`${s.base}${path}`, { method: 'PUT', headers, body: lease('9') })
  t.equal(current.status, 200, 'one built from the cached version is acknowledged')

  // another node's Lease is not this node's to acknowledge
  const other = await send(`${s.base}${path.replace(nodeName, 'edge-2')}`, { method: 'PUT', headers, body: lease('5') })
  t.match(await s.outcomes[3], { kind: 'unavailable', reason: /update leases .*nothing was written$/ })
  t.equal(other.status, marker)
})

t.test("offline: an object cached in protobuf with a field the hub's schema does not know is never given as a shorter JSON", async t => {
  const store = memoryStore(t)
  const node = decodeUnknown(fixtureBytes('get-node-kind-worker2.pb'))
  // Node field 99, length-delimited: what a newer apiserver would send and this schema has never heard of
  const newer = Buffer.concat([node.raw, Buffer.from([0x9a, 0x06, 3]), Buffer.from('new')])
  const list = Buffer.concat(listWireParts('v1', 'NodeList', { resourceVersion: '900', continue: '', items: [newer] }))
  await new Recorder(store, log).recordListPage(classify('GET', '/api/v1/nodes', kubelet), 'protobuf', list)
  const s = await serve(t, offlineAnswerer(store), { facts: { online: false } })

  const asJson = await send(`${s.base}/api/v1/nodes/kind-worker2`, { headers: { 'user-agent': 'kubectl/v1.35.0', accept: 'application/json' } })
  const outcome = (await s.outcomes[0]) as { kind: string; reason: string }
  t.equal(outcome.kind, 'unavailable', 'a 503, for the router to write')
  t.match(
    outcome.reason,
    /Node kind-worker2 is cached as protobuf with fields the hub's schema does not know \(Node field 99\)/,
    'naming the object and the field',
  )
  t.equal(asJson.status, marker)

  const asProtobuf = await send(`${s.base}/api/v1/nodes/kind-worker2`, { headers: { 'user-agent': kubelet, accept: 'application/vnd.kubernetes.protobuf' } })
  t.equal(asProtobuf.status, 200, 'in its own format it is served as it is')
  t.ok(decodeUnknown(asProtobuf.body).raw.equals(newer), 'every byte, the unknown field included')

  const listJson = await send(`${s.base}/api/v1/nodes`, { headers: { 'user-agent': 'kubectl/v1.35.0', accept: 'application/json' } })
  t.equal(listJson.status, marker, 'a list holding it: the same refusal')
  t.match(((await s.outcomes[2]) as { reason: string }).reason, /Node field 99/)

  const watchJson = await send(`${s.base}/api/v1/nodes?watch=1`, { headers: { 'user-agent': 'kubectl/v1.35.0', accept: 'application/json' } })
  t.equal(watchJson.status, marker, 'a watch of it: refused before its head goes out')
})

t.test('offline: gets from the cache say so, found or not', async t => {
  const store = memoryStore(t)
  await new Recorder(store, log).recordListPage(classify('GET', '/api/v1/configmaps', kubelet), 'json', Buffer.from(configMapList))
  const s = await serve(t, offlineAnswerer(store), { facts: { online: false } })

  const hit = await send(`${s.base}/api/v1/namespaces/default/configmaps/a`, { headers: { 'user-agent': kubelet } })
  t.same(await s.outcomes[0], { kind: 'answered', source: 'cache' })
  t.equal(hit.status, 200)
  t.match(hit.json(), { metadata: { name: 'a', namespace: 'default', resourceVersion: '41' }, data: { k: 'v' } })
  t.equal(hit.headers['x-outpost-cache'], 'hit')
  t.equal(hit.headers['x-outpost-cache-source'], 'kubelet', 'whose copy answered')

  const absent = await send(`${s.base}/api/v1/namespaces/default/configmaps/zz`, { headers: { 'user-agent': kubelet } })
  t.equal(absent.status, 404, 'not in a list the cache holds whole: not found')
  t.equal(absent.headers['x-outpost-cache'], 'hit')

  const unlisted = await send(`${s.base}/api/v1/namespaces/default/secrets/s`, { headers: { 'user-agent': kubelet } })
  t.same(await s.outcomes[2], { kind: 'answered', source: 'cache' })
  t.equal(unlisted.status, 503)
  t.match(unlisted.json(), { kind: 'Status', code: 503, message: /^no apiserver reachable.*nothing on this node ever listed secrets/ })
  t.equal(unlisted.headers['x-outpost-cache'], 'hit', "the cache's refusal says it came from the cache")
  t.equal(unlisted.headers['x-outpost-cache-source'], undefined)
})
