// The simulator's faults and the apiserver behaviour the hub's failure tests lean on: a blackholed
// link (half-open connections), an event window expired on command (410 for watches, exact lists
// and continue tokens, with the apiserver's inconsistent-continue token), WatchList
// (sendInitialEvents) with its validation, and the request log's counts.

import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import tls from 'node:tls'
import { readFileSync } from 'node:fs'
import { ApiServerSimulator, type SimulatorOptions } from './simulator/index.ts'
import { request, watch } from './simulator/testclient.ts'
import { createTestPki } from './helpers/pki.ts'

const fixtures = new URL('./fixtures/apiserver-v1.24/', import.meta.url)
const fixtureText = (name: string) => readFileSync(new URL(name, fixtures), 'utf8')

const cm = (name: string, namespace = 'default', labels?: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace, ...(labels ? { labels } : {}) },
  data: { k: 'v' },
})

async function sim(t: { teardown(fn: () => unknown): void }, options: SimulatorOptions = {}): Promise<ApiServerSimulator> {
  const s = await ApiServerSimulator.start(options)
  t.teardown(() => s.close())
  return s
}

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now()
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error('condition not met in time')
    await new Promise(r => setTimeout(r, 5))
  }
}

/** A raw TCP client that records what it receives and how it ends. */
function rawClient(port: number) {
  const sock = net.connect(port, '127.0.0.1')
  const state = { received: '', error: undefined as string | undefined, closed: false }
  sock.on('data', d => (state.received += d.toString('latin1')))
  sock.on('error', (err: NodeJS.ErrnoException) => (state.error = err.code))
  sock.on('close', () => (state.closed = true))
  const connected = new Promise<void>((resolve, reject) => {
    sock.once('connect', () => resolve())
    sock.once('error', reject)
  })
  return { sock, state, connected }
}

const decodeToken = (token: string) => JSON.parse(Buffer.from(token, 'base64url').toString('utf8'))

t.test('blackhole: open connections go silent, new ones are accepted and never answered, then all are reset', async t => {
  const s = await sim(t, { bookmarkIntervalMs: 30 })
  const w = await watch(`${s.url}/api/v1/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${s.currentResourceVersion()}`)
  t.equal((await w.next()).type, 'BOOKMARK', 'the watch is alive')

  // a keep-alive connection that has answered once, and an upgraded (SPDY-style) echo
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const get = (path: string, timeoutMs = 200) =>
    new Promise<number>((resolve, reject) => {
      const req = http.get(`${s.url}${path}`, { agent }, res => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      })
      req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })))
      req.on('error', reject)
    })
  t.equal(await get('/healthz', 5000), 200)
  const spdy = rawClient(s.port)
  spdy.sock.write('POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n')
  await waitFor(() => spdy.state.received.includes('\r\n\r\n'))
  spdy.sock.write('one')
  await waitFor(() => spdy.state.received.endsWith('one'))

  await s.setFault('blackhole')
  await new Promise(r => setTimeout(r, 50)) // what was written before it is through
  while (w.pending() > 0) await w.next()
  s.create(cm('during'))
  await t.rejects(w.next(300), /no watch event within/, 'no event, no BOOKMARK')
  t.equal(w.pending(), 0)
  spdy.sock.write('two')
  await t.rejects(get('/healthz'), { code: 'TIMEOUT' }, 'a request on a kept-alive connection is not answered')
  t.notOk(spdy.state.received.endsWith('two'), 'the upgraded connection does not echo')

  const fresh = rawClient(s.port)
  await fresh.connected
  fresh.sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  await t.rejects(request(`${s.url}/version`, { timeoutMs: 200 }), { code: 'TIMEOUT' }, 'new connections are never answered')
  t.equal(fresh.state.received, '', 'accepted at TCP level, nothing written')
  t.notOk(fresh.state.closed || spdy.state.closed, 'nothing is closed')
  let watchEnded = false
  void w.ended.then(() => (watchEnded = true))
  await new Promise(r => setImmediate(r))
  t.notOk(watchEnded, 'the silent watch is still open')

  await s.setFault('none')
  t.equal(await w.ended, 'error', 'the silenced watch is cut')
  await waitFor(() => fresh.state.closed && spdy.state.closed)
  t.equal(fresh.state.error, 'ECONNRESET', 'a connection made during the blackhole is reset')
  t.equal(spdy.state.error, 'ECONNRESET', 'so is one silenced in it')
  t.equal(fresh.state.received, '')
  t.equal((await request(`${s.url}/healthz`)).text, 'ok', 'new connections work again')
  t.equal(s.countRequests({ path: '/healthz' }), 2, 'the request sent on the kept-alive connection during the blackhole was never read')
})

t.test('blackhole over TLS: no handshake for a new connection', async t => {
  const pki = await createTestPki()
  const s = await sim(t, { tls: { key: pki.server.key, cert: pki.server.cert } })
  const kept = await watch(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${s.currentResourceVersion()}`, {}, { ca: pki.ca.cert })
  await s.setFault('blackhole')
  s.create(cm('during'))
  await t.rejects(kept.next(200), /no watch event within/)
  const sock = tls.connect({ port: s.port, host: '127.0.0.1', ca: pki.ca.cert, servername: 'localhost' })
  let secure = false
  let error: string | undefined
  sock.on('secureConnect', () => (secure = true))
  sock.on('error', (err: NodeJS.ErrnoException) => (error = err.code))
  await waitFor(() => s.openConnections() >= 2)
  await new Promise(r => setTimeout(r, 200))
  t.notOk(secure, 'the TLS handshake is never answered')
  await s.setFault('none')
  await waitFor(() => sock.destroyed)
  t.notOk(secure)
  t.match(error, /ECONNRESET|ECONNABORTED/, 'reset when the blackhole ends')
  t.equal(await kept.ended, 'error')
  t.equal((await request(`${s.url}/healthz`, { tls: { ca: pki.ca.cert } })).status, 200)
})

t.test('blackhole from refuse and hang, and to the other faults', async t => {
  const s = await sim(t)
  await s.setFault('refuse')
  await s.setFault('blackhole')
  const c = rawClient(s.port)
  await c.connected
  t.pass('a blackhole after refuse accepts connections again')
  await s.setFault('hang')
  await waitFor(() => c.state.closed)
  t.equal(c.state.error, 'ECONNRESET', 'leaving the blackhole for another fault resets what it held')

  const pending = request(`${s.url}/version`, { timeoutMs: 2000 })
  await waitFor(() => s.countRequests({ path: '/version' }) === 1)
  await s.setFault('blackhole')
  await s.setFault('none')
  await t.rejects(pending, { code: /ECONNRESET|EPIPE/ }, 'a request held by hang is not answered through a blackhole')
  t.equal((await request(`${s.url}/healthz`)).status, 200)
})

t.test('compact(): watches and exact lists from before it are 410, as recorded', async t => {
  const s = await sim(t)
  s.create(cm('a'))
  const old = s.currentResourceVersion()
  s.create(cm('b'))
  s.compact()
  const we = await request(`${s.url}/api/v1/configmaps?watch=true&resourceVersion=${old}`)
  t.equal(we.status, 200)
  t.equal(we.text, fixtureText('watch-expired.json'), 'one ERROR event, byte for byte')
  const recorded = Object.fromEntries(
    fixtureText('watch-expired.json.headers')
      .split('\n')
      .slice(1)
      .filter(l => l.includes(':'))
      .map(l => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  )
  t.equal(we.headers['content-type'], recorded['content-type'])
  t.equal(we.headers['cache-control'], recorded['cache-control'])
  t.match(we.headers['audit-id'], /^[0-9a-f-]{36}$/)

  const le = await request(`${s.url}/api/v1/configmaps?resourceVersion=${old}&resourceVersionMatch=Exact`)
  t.equal(le.status, 410)
  t.equal(le.text, JSON.stringify(JSON.parse(fixtureText('list-expired.json'))), 'the recorded Status, in its field order')
  const now = await request(`${s.url}/api/v1/configmaps?resourceVersion=${s.currentResourceVersion()}&resourceVersionMatch=Exact`)
  t.equal(now.status, 200, 'the compacted revision itself is still readable, as in etcd')
})

t.test('compact(): an old continue token gets 410 with a token for the rest, inconsistent, at the latest', async t => {
  const s = await sim(t)
  for (const n of ['a', 'b', 'c', 'd']) s.create(cm(n))
  const base = `${s.url}/api/v1/namespaces/default/configmaps`
  const first = await request(`${base}?limit=2`)
  t.same(
    first.json.items.map((i: any) => i.metadata.name),
    ['a', 'b'],
  )
  const token = first.json.metadata.continue
  const listRV = first.json.metadata.resourceVersion

  s.remove('v1', 'ConfigMap', 'default', 'c')
  s.create(cm('bb'))
  s.create(cm('e'))
  s.compact()

  const expired = await request(`${base}?limit=2&continue=${token}`)
  t.equal(expired.status, 410)
  t.same(Object.keys(expired.json), ['kind', 'apiVersion', 'metadata', 'status', 'message', 'reason', 'code'])
  t.same(
    { ...expired.json, metadata: {} },
    {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.',
      reason: 'Expired',
      code: 410,
    },
  )
  const fresh = expired.json.metadata.continue
  t.same(Object.keys(expired.json.metadata), ['continue'])
  t.notMatch(fresh, /[=+/]/, 'unpadded base64url')
  t.same(decodeToken(fresh), { v: 'meta.k8s.io/v1', rv: -1, start: decodeToken(token).start }, 'the same key, rv -1: "at the latest"')
  t.same(Object.keys(decodeToken(fresh)), ['v', 'rv', 'start'])

  const rest = await request(`${base}?limit=2&continue=${fresh}`)
  t.equal(rest.status, 200)
  t.same(
    rest.json.items.map((i: any) => i.metadata.name),
    ['bb', 'd'],
    'from the same key, as things are now (c gone, bb new)',
  )
  t.equal(rest.json.metadata.resourceVersion, s.currentResourceVersion(), 'at the current resourceVersion')
  t.not(rest.json.metadata.resourceVersion, listRV)
  t.equal(decodeToken(rest.json.metadata.continue).rv, Number(s.currentResourceVersion()), 'the next token pins the current revision')
  const last = await request(`${base}?limit=2&continue=${rest.json.metadata.continue}`)
  t.same(
    last.json.items.map((i: any) => i.metadata.name),
    ['e'],
  )
  t.equal(last.json.metadata.continue, undefined)

  t.equal((await request(`${base}?limit=2&continue=${token}`)).status, 410, 'the old token stays expired')
  t.equal((await request(`${base}?limit=2&resourceVersion=0&continue=${fresh}`)).status, 200, 'resourceVersion=0 may go with continue')
  const withRV = await request(`${base}?limit=2&resourceVersion=${listRV}&continue=${fresh}`)
  t.equal(withRV.status, 400)
  t.equal(withRV.json.message, 'specifying resource version is not allowed when using continue')
  const zero = await request(`${base}?continue=${Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 0, start: 'a' })).toString('base64url')}`)
  t.equal(zero.json.message, 'invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)')
})

t.test('a continue token expires with the event window, like an etcd compaction', async t => {
  const s = await sim(t, { eventWindow: 2 })
  for (const n of ['a', 'b', 'c']) s.create(cm(n))
  const first = await request(`${s.url}/api/v1/namespaces/default/configmaps?limit=1`)
  for (const n of ['x', 'y', 'z']) s.create(cm(n, 'kube-system'))
  const next = await request(`${s.url}/api/v1/namespaces/default/configmaps?limit=1&continue=${first.json.metadata.continue}`)
  t.equal(next.status, 410)
  t.equal(next.json.reason, 'Expired')
  t.ok(next.json.metadata.continue)
})

const watchList = 'watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan'

t.test('WatchList: the state as ADDED, a BOOKMARK marking its end, then live events', async t => {
  const s = await sim(t, { bookmarkIntervalMs: 60_000 })
  s.create(cm('a', 'default', { app: 'web' }))
  s.create(cm('b', 'default', { app: 'db' }))
  s.create(cm('c', 'kube-system', { app: 'web' }))
  const stateRV = s.currentResourceVersion()
  const w = await watch(`${s.url}/api/v1/namespaces/default/configmaps?${watchList}&allowWatchBookmarks=true&labelSelector=app%3Dweb`)
  t.equal(w.status, 200)
  const added = await w.next()
  t.same([added.type, added.object.metadata.name], ['ADDED', 'a'], 'selectors and namespace respected')
  const end = await w.next()
  t.same(end, {
    type: 'BOOKMARK',
    object: {
      kind: 'ConfigMap',
      apiVersion: 'v1',
      metadata: { resourceVersion: stateRV, creationTimestamp: null, annotations: { 'k8s.io/initial-events-end': 'true' } },
    },
  })
  t.same(Object.keys(end.object.metadata), ['resourceVersion', 'creationTimestamp', 'annotations'], "ObjectMeta's field order")
  s.patch('v1', 'ConfigMap', 'default', 'b', { metadata: { labels: { app: 'web' } } })
  const live = await w.next()
  t.same([live.type, live.object.metadata.name], ['ADDED', 'b'], 'then live events, with selector transitions')
  w.close()

  // resourceVersion is only a lower bound: an old one (even compacted) still gets the current state, no replay
  const oldRV = s.currentResourceVersion()
  s.patch('v1', 'ConfigMap', 'default', 'a', { data: { k: 'new' } })
  s.compact()
  s.create(cm('d'))
  for (const rv of ['0', oldRV]) {
    const o = await watch(`${s.url}/api/v1/namespaces/default/configmaps?${watchList}&allowWatchBookmarks=true&resourceVersion=${rv}`)
    const events = [await o.next(), await o.next(), await o.next(), await o.next()]
    t.same(
      events.map(e => [e.type, e.object.metadata.name ?? e.object.metadata.resourceVersion]),
      [
        ['ADDED', 'a'],
        ['ADDED', 'b'],
        ['ADDED', 'd'],
        ['BOOKMARK', s.currentResourceVersion()],
      ],
      `resourceVersion=${rv}: the current state`,
    )
    t.equal(events[0].object.data.k, 'new')
    o.close()
  }

  const future = await request(`${s.url}/api/v1/configmaps?${watchList}&allowWatchBookmarks=true&resourceVersion=${Number(s.currentResourceVersion()) + 10}`)
  t.equal(future.status, 504)
  t.match(future.json, { reason: 'Timeout', details: { causes: [{ reason: 'ResourceVersionTooLarge' }] } })
})

t.test('WatchList: no end BOOKMARK without allowWatchBookmarks; sendInitialEvents=false starts now', async t => {
  const s = await sim(t, { bookmarkIntervalMs: 20 })
  s.create(cm('a'))
  const quiet = await watch(`${s.url}/api/v1/configmaps?${watchList}`)
  t.equal((await quiet.next()).object.metadata.name, 'a')
  s.create(cm('b'))
  const next = await quiet.next()
  t.same([next.type, next.object.metadata.name], ['ADDED', 'b'], 'no BOOKMARK at all: the apiserver only marks the end for bookmark-aware clients')
  quiet.close()

  const now = await watch(`${s.url}/api/v1/configmaps?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan`)
  s.create(cm('c'))
  const first = await now.next()
  t.same([first.type, first.object.metadata.name], ['ADDED', 'c'], 'no initial state')
  now.close()

  const partial = await watch(`${s.url}/api/v1/configmaps?${watchList}&allowWatchBookmarks=true&labelSelector=none%3Dsuch`, {
    Accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
  })
  t.same(await partial.next(), {
    type: 'BOOKMARK',
    object: {
      kind: 'PartialObjectMetadata',
      apiVersion: 'meta.k8s.io/v1',
      metadata: { resourceVersion: s.currentResourceVersion(), creationTimestamp: null, annotations: { 'k8s.io/initial-events-end': 'true' } },
    },
  })
  partial.close()
})

t.test('list and watch options are validated as the apiserver does: 422 Invalid ListOptions', async t => {
  const s = await sim(t)
  const invalid = async (query: string, errors: { field: string; reason: string; body: string }[]) => {
    const r = await request(`${s.url}/api/v1/configmaps?${query}`)
    t.equal(r.status, 422, query)
    const messages = errors.map(e => `${e.field}: ${e.body}`)
    t.same(r.json, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `ListOptions.meta.k8s.io "" is invalid: ${messages.length === 1 ? messages[0] : `[${messages.join(', ')}]`}`,
      reason: 'Invalid',
      details: { group: 'meta.k8s.io', kind: 'ListOptions', causes: errors.map(e => ({ reason: e.reason, message: e.body, field: e.field })) },
      code: 422,
    })
  }
  const forbidden = (field: string, detail: string) => ({ field, reason: 'FieldValueForbidden', body: `Forbidden: ${detail}` })
  await invalid('watch=true&sendInitialEvents=true', [
    forbidden('resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'),
  ])
  await invalid('watch=true&resourceVersionMatch=NotOlderThan', [
    forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'),
  ])
  await invalid('watch=true&sendInitialEvents=true&resourceVersionMatch=Exact', [
    forbidden('resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'),
    { field: 'resourceVersionMatch', reason: 'FieldValueNotSupported', body: 'Unsupported value: "Exact": supported values: "NotOlderThan"' },
  ])
  await invalid('sendInitialEvents=true', [forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list')])
  await invalid('resourceVersionMatch=Exact', [forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden unless resourceVersion is provided')])
  await invalid('resourceVersion=0&resourceVersionMatch=Exact', [
    forbidden('resourceVersionMatch', 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
  ])
  await invalid('resourceVersion=1&resourceVersionMatch=Foo', [
    { field: 'resourceVersionMatch', reason: 'FieldValueNotSupported', body: 'Unsupported value: "Foo": supported values: "Exact", "NotOlderThan", ""' },
  ])

  const v124 = await sim(t, { watchList: false })
  const refused = await request(`${v124.url}/api/v1/configmaps?${watchList}&allowWatchBookmarks=true`)
  t.equal(refused.status, 422, 'v1.24 refuses resourceVersionMatch on a watch, so a WatchList client falls back to list+watch')
  t.equal(
    refused.json.message,
    'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided]',
  )
  t.equal((await request(`${v124.url}/api/v1/configmaps?sendInitialEvents=true`)).status, 200, 'and ignores sendInitialEvents, a parameter it does not know')
})

t.test('the request log: verb, path and query of each request, and countRequests', async t => {
  const s = await sim(t)
  const table = 'application/json;as=Table;g=meta.k8s.io;v=v1'
  await request(`${s.url}/api/v1/namespaces/default/configmaps?limit=5`)
  const w1 = await watch(`${s.url}/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1&resourceVersion=0`)
  const w2 = await watch(`${s.url}/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn2`, { Accept: table })
  const w3 = await watch(`${s.url}/api/v1/namespaces/default/configmaps?watch=1`)
  t.teardown(() => [w1, w2, w3].forEach(w => w.close()))
  t.match(s.requests[0], { method: 'GET', path: '/api/v1/namespaces/default/configmaps', query: { limit: '5' }, verb: 'list', watch: false })
  t.match(s.requests[1], {
    path: '/api/v1/pods',
    query: { watch: 'true', fieldSelector: 'spec.nodeName=n1', resourceVersion: '0' },
    verb: 'watch',
    watch: true,
  })
  t.equal(s.countRequests({ watch: true }), 3)
  t.equal(s.countRequests({ watch: true, path: '/api/v1/pods' }), 2, 'per scope')
  t.equal(s.countRequests({ watch: true, query: { fieldSelector: 'spec.nodeName=n2' } }), 1, 'per selector')
  t.equal(
    s.countRequests(r => r.watch && r.headers.accept === table),
    1,
    'per format',
  )
  t.equal(s.countRequests({ verb: 'list' }), 1)
  t.equal(s.countRequests(), s.requests.length)
})
