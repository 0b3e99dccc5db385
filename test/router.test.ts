// The router, as a table: the plan's routes × what each answerer says → who answered, and what a
// client gets when nobody does; and over a real socket, that whatever an answerer throws reaches the
// client as a 500 Status, and who may not use a port never reaches an answerer.
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { pino } from 'pino'
import { classify } from '../lib/api/requestinfo.ts'
import { failure } from '../lib/api/status.ts'
import { Router, tryInOrder } from '../lib/front/router.ts'
import type { PlanSources } from '../lib/front/router.ts'
import { ClientGone, answered, declined, unavailable } from '../lib/front/answerer.ts'
import type { Answerer, Call, Outcome } from '../lib/front/answerer.ts'
import type { Route } from '../lib/front/plan.ts'

const log = pino({ level: 'silent' })

/** An answerer that says `outcome` and notes that it was asked, and with what reason. */
function stub(name: string, outcome: Outcome, asked: string[]): Answerer {
  return {
    async answer(_call, reason) {
      asked.push(reason === undefined ? name : `${name}(${reason})`)
      return outcome
    },
  }
}

function callWith(routes: Route[]): Call {
  const info = classify('GET', '/api/v1/namespaces/default/configmaps', 'kubelet/v1.33.0')
  return {
    info,
    req: {} as Call['req'],
    res: {} as Call['res'],
    body: undefined,
    plan: { routes, actsAsNode: true, online: true, record: undefined, filter: false },
    filter: undefined,
    clientGone: new ClientGone(),
  }
}

t.test('routes × outcomes → who answered', async t => {
  const up = unavailable('no apiserver reachable')
  const cases: { name: string; routes: Route[]; says: Partial<Record<Route, Outcome>>; asked: string[]; result: Outcome }[] = [
    {
      name: 'the watch cache answers: nobody else is asked',
      routes: ['watch-cache', 'upstream', 'offline'],
      says: { 'watch-cache': answered('cache') },
      asked: ['watch-cache'],
      result: answered('cache'),
    },
    {
      name: 'the watch cache declines a read of the past: the apiserver answers it',
      routes: ['watch-cache', 'upstream', 'offline'],
      says: { 'watch-cache': declined('a read of the past'), upstream: answered('cloud') },
      asked: ['watch-cache', 'upstream'],
      result: answered('cloud'),
    },
    {
      name: 'no apiserver reachable: the disk cache answers, told why the cloud did not',
      routes: ['upstream', 'offline'],
      says: { upstream: up, offline: answered('cache') },
      asked: ['upstream', 'offline(no apiserver reachable)'],
      result: answered('cache'),
    },
    {
      name: 'declined, then unavailable, then the disk cache: the reason is the unavailable one',
      routes: ['watch-cache', 'upstream', 'offline'],
      says: { 'watch-cache': declined('a Table'), upstream: up, offline: answered('cache') },
      asked: ['watch-cache', 'upstream', 'offline(no apiserver reachable)'],
      result: answered('cache'),
    },
    {
      name: 'a write with no apiserver: nobody answers, the reason stands',
      routes: ['upstream'],
      says: { upstream: up },
      asked: ['upstream'],
      result: up,
    },
    {
      name: 'offline and the disk cache cannot: its own reason stands',
      routes: ['offline'],
      says: { offline: unavailable('cannot be answered from the cache') },
      asked: ['offline'],
      result: unavailable('cannot be answered from the cache'),
    },
    {
      name: 'a route whose answerer this hub does not have (shared watches off) is declined',
      routes: ['watch-cache', 'upstream'],
      says: { upstream: answered('cloud') },
      asked: ['upstream'],
      result: answered('cloud'),
    },
  ]
  for (const c of cases) {
    const asked: string[] = []
    const answerers = Object.fromEntries(Object.entries(c.says).map(([route, outcome]) => [route, stub(route, outcome, asked)]))
    t.same(await tryInOrder(callWith(c.routes), answerers), c.result, `${c.name}: outcome`)
    t.same(asked, c.asked, `${c.name}: who was asked`)
  }
})

const sources: PlanSources = {
  cloud: { isOnline: () => true },
  caching: undefined,
  watchCaches: undefined,
  filters: { forRequest: () => undefined },
}

async function serve(t: Test, handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler)
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

t.test('whatever an answerer throws, the client gets a 500 Status and the hub goes on', async t => {
  let calls = 0
  const throwing: Answerer = {
    async answer() {
      calls++
      throw new Error('boom')
    },
  }
  const router = new Router({ answerers: { upstream: throwing }, sources, log, body: { maxBytes: 1024, idleMs: 1_000 } })
  const url = await serve(t, (req, res) => void router.handlerFor()(req, res))
  for (let i = 0; i < 2; i++) {
    const res = await request(`${url}/api/v1/pods`)
    t.equal(res.statusCode, 500)
    t.match(await res.body.json(), { kind: 'Status', code: 500, reason: 'InternalError', message: /boom/ })
  }
  t.equal(calls, 2, 'the second request is answered as the first: nothing was left broken')
})

t.test('nobody answers: a 503 Status with the last reason; a port that turns the client away asks nobody', async t => {
  const asked: string[] = []
  const router = new Router({
    answerers: { upstream: stub('upstream', unavailable('no apiserver reachable: https://10.0.0.1:6443: connect ECONNREFUSED'), asked) },
    sources,
    log,
    body: { maxBytes: 1024, idleMs: 1_000 },
  })
  const open = await serve(t, (req, res) => void router.handlerFor()(req, res))
  const res = await request(`${open}/api/v1/namespaces/default/configmaps`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
  t.equal(res.statusCode, 503)
  t.match(await res.body.json(), { kind: 'Status', reason: 'ServiceUnavailable', message: /ECONNREFUSED/ })

  const guarded = router.handlerFor({ authenticate: () => failure(401, 'Unauthorized: this port needs a bearer token', 'Unauthorized') })
  const closed = await serve(t, (req, res) => void guarded(req, res))
  const denied = await request(`${closed}/api/v1/pods`)
  t.equal(denied.statusCode, 401)
  t.match(await denied.body.json(), { kind: 'Status', reason: 'Unauthorized' })
  t.same(asked, ['upstream'], 'only the open port reached an answerer')
})

t.test('a body past the limit is a 413 Status, and no answerer sees the request', async t => {
  const asked: string[] = []
  const router = new Router({ answerers: { upstream: stub('upstream', answered('cloud'), asked) }, sources, log, body: { maxBytes: 16, idleMs: 1_000 } })
  const url = await serve(t, (req, res) => void router.handlerFor()(req, res))
  const res = await request(`${url}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    body: 'x'.repeat(64),
    headers: { 'content-type': 'application/json' },
  })
  t.equal(res.statusCode, 413)
  t.match(await res.body.json(), { kind: 'Status', code: 413 })
  t.same(asked, [])
})
