// Paths built to make the hub read a request differently from the apiserver (issue 30, case 3).
// kube-apiserver reads Go's req.URL.Path: the whole path percent-decoded first, then split on '/'.
// Through the hub, each of these must get the apiserver's answer, reach it only re-encoded from
// what the hub read, and leave nothing in any cache. The expected answers are kube-apiserver
// v1.24's (the simulator behind the hub answers as it does).
import t from 'tap'
import { Client } from 'undici'
import { startHub } from '../lib/hub.ts'
import type { Hub } from '../lib/hub.ts'
import { startHarness, goDark, eventually, hubConfig, quietLogger } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import type { LoggedRequest } from './simulator/requestlog.ts'

const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'

/** A GET of exactly this request target: undici's request(url) would normalize it (dot segments, escapes). */
async function rawGet(base: string, path: string, userAgent: string): Promise<{ status: number; body: any }> {
  const client = new Client(base)
  try {
    const res = await client.request({ method: 'GET', path, headers: { 'user-agent': userAgent, accept: 'application/json' } })
    const text = await res.body.text()
    let body: any = text
    try {
      body = JSON.parse(text)
    } catch {
      // not JSON: kept as text for the assertion message
    }
    return { status: res.statusCode, body }
  } finally {
    await client.close()
  }
}

async function debugCache(hub: Hub): Promise<any> {
  const client = new Client(hub.adminUrl)
  try {
    const res = await client.request({ method: 'GET', path: '/debug/cache' })
    return await res.body.json()
  } finally {
    await client.close()
  }
}

const notFoundRoute = {
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: 'the server could not find the requested resource',
  reason: 'NotFound',
  details: {},
  code: 404,
}

const fromHubReflector = (r: LoggedRequest) => String(r.headers['user-agent'] ?? '').startsWith('outpost/')
// what the hub asks for on its own whatever the clients do: health probes, the topology source's Nodes and Services
const background = new Set(['/readyz', '/healthz', '/livez', '/api/v1/nodes', '/api/v1/services'])

t.test(
  "the issue's path: relayed as the apiserver reads it, no ConfigMap list is made or kept as Services, kube-proxy's Services survive an offline restart",
  async t => {
    const h = await startHarness({ demo: true })
    let second: Hub | undefined
    t.teardown(async () => {
      await second?.close()
      await h.close()
    })
    h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'decoy-1', namespace: 'atk19' }, data: { a: '1' } })
    h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'decoy-2', namespace: 'atk19' }, data: { b: '2' } })
    const services = h.simulator
      .list('v1', 'Service')
      .map((s: any) => `${s.metadata.namespace}/${s.metadata.name}`)
      .sort()
    t.ok(services.length >= 3, `the demo cluster has Services (${services.join(', ')})`)

    // kube-proxy lists every Service (a shared watch cache, recorded whole)
    const before = await rawGet(h.url, '/api/v1/services?limit=500&resourceVersion=0', kubeProxy)
    t.equal(before.status, 200)
    t.equal(before.body.kind, 'ServiceList')

    const attack = await rawGet(h.url, '/api/v1/namespaces/atk19%2Fconfigmaps%3Fx%3D/services', kubeProxy)
    t.equal(attack.status, 404, "kube-apiserver's answer: it reads namespace atk19, resource 'configmaps?x=', name services, and serves no such resource")
    t.same(attack.body, notFoundRoute)
    t.equal(
      h.simulator.countRequests(r => r.path.startsWith('/api/v1/namespaces/atk19/configmaps') && r.verb === 'list'),
      0,
      'nobody listed ConfigMaps upstream',
    )
    t.same(
      h.simulator.requests.filter(r => r.path.startsWith('/api/v1/namespaces/atk19')).map(r => ({ url: r.url, agent: r.headers['user-agent'] })),
      [{ url: '/api/v1/namespaces/atk19/configmaps%3Fx=/services', agent: kubeProxy }],
      'what went upstream is the one request, re-encoded from what the hub read, as the client sent it',
    )

    const cache = await debugCache(h.hub)
    t.notMatch(JSON.stringify(cache), /atk19/, 'no watch cache, scope or collection for it')
    const sharedServices = cache.collections.filter((c: any) => c.resource === 'services.v1.core')
    t.ok(sharedServices.length > 0, 'the Services kube-proxy listed are cached')
    for (const c of sharedServices) t.equal(c.kind, 'Service', `${c.component}'s services hold Services only`)

    // the cloud goes away and the hub restarts on the same cache dir
    await goDark(h)
    await h.hub.close()
    second = await startHub(hubConfig([h.simulator.url], { cacheDir: h.cacheDir }), { logger: quietLogger() })
    const restarted = second
    await eventually(() => restarted.health.state === 'offline', 10_000, 'the restarted hub to find the cloud away')
    const after = await rawGet(second.proxyUrl, '/api/v1/services?limit=500&resourceVersion=0', kubeProxy)
    t.equal(after.status, 200, "kube-proxy's list of all Services, offline after a restart")
    t.equal(after.body.kind, 'ServiceList')
    t.same(after.body.items.map((s: any) => `${s.metadata.namespace}/${s.metadata.name}`).sort(), services, 'exactly the real Services')
  },
)

interface HostileRow {
  name: string
  path: string
  userAgent: string
  /** the status code kube-apiserver answers, and what its answer is (a Status, or a list's kind and length) */
  status: number
  want: Record<string, unknown>
  /** the request target the apiserver gets from the hub, or null when the hub answers itself */
  upstream: string | null
}

const rows: HostileRow[] = [
  {
    name: 'an encoded .. as a name: the name is "..", which the apiserver refuses',
    path: '/api/v1/namespaces/default/configmaps/%2e%2e',
    userAgent: kubelet,
    status: 400,
    want: { kind: 'Status', reason: 'BadRequest', message: 'Name parameter invalid: "..": may not be \'..\'' },
    upstream: '/api/v1/namespaces/default/configmaps/%2E%2E',
  },
  {
    name: 'an encoded ../ inside a segment: the apiserver splits it, and has no route for it',
    path: '/api/v1/namespaces/default/configmaps%2F..%2Fsecrets',
    userAgent: kubelet,
    status: 404,
    want: notFoundRoute,
    upstream: '/api/v1/namespaces/default/configmaps/%2E%2E/secrets',
  },
  {
    name: '%00 in a namespace: a namespace that cannot exist lists empty, and is not kept',
    path: '/api/v1/namespaces/kube%00system/configmaps',
    userAgent: kubelet,
    status: 200,
    want: { kind: 'ConfigMapList', items: [] },
    upstream: '/api/v1/namespaces/kube%00system/configmaps',
  },
  {
    name: 'an overlong namespace (64 characters): lists empty, and is not kept',
    path: `/api/v1/namespaces/${'n'.repeat(64)}/configmaps?limit=500`,
    userAgent: kubelet,
    status: 200,
    want: { kind: 'ConfigMapList', items: [] },
    upstream: `/api/v1/namespaces/${'n'.repeat(64)}/configmaps?limit=500`,
  },
  {
    name: 'an overlong name (300 characters): not found',
    path: `/api/v1/namespaces/default/configmaps/${'c'.repeat(300)}`,
    userAgent: kubelet,
    status: 404,
    want: { kind: 'Status', reason: 'NotFound', code: 404 },
    upstream: `/api/v1/namespaces/default/configmaps/${'c'.repeat(300)}`,
  },
  {
    name: 'a name with %25: "%" is no name the apiserver takes',
    path: '/api/v1/namespaces/default/configmaps/app%25config',
    userAgent: kubelet,
    status: 400,
    want: { kind: 'Status', reason: 'BadRequest', message: 'Name parameter invalid: "app%config": may not contain \'%\'' },
    upstream: '/api/v1/namespaces/default/configmaps/app%25config',
  },
  {
    name: 'a %252F namespace of Services: decoded once it is "a%2Fb", never "a/b"',
    path: '/api/v1/namespaces/a%252Fb/services',
    userAgent: kubeProxy,
    status: 200,
    want: { kind: 'ServiceList', items: [] },
    upstream: '/api/v1/namespaces/a%252Fb/services',
  },
  {
    name: 'an upper-case namespace: lists empty, and is not kept',
    path: '/api/v1/namespaces/Default/configmaps',
    userAgent: kubelet,
    status: 200,
    want: { kind: 'ConfigMapList', items: [] },
    upstream: '/api/v1/namespaces/Default/configmaps',
  },
  {
    name: 'an empty namespace segment: the apiserver lists every namespace; never kept as the Namespace "configmaps"',
    path: '/api/v1/namespaces//configmaps',
    userAgent: kubelet,
    status: 200,
    want: { kind: 'ConfigMapList' },
    upstream: '/api/v1/namespaces//configmaps',
  },
  {
    name: 'the watch form of the issue path: no route, and no watch of anything',
    path: '/api/v1/watch/namespaces/atk19%2Fconfigmaps%3Fx%3D/services',
    userAgent: kubeProxy,
    status: 404,
    want: notFoundRoute,
    upstream: '/api/v1/watch/namespaces/atk19/configmaps%3Fx=/services',
  },
  {
    name: 'a watch of nothing: the apiserver cannot build its RequestInfo (500)',
    path: '/api/v1/watch',
    userAgent: kubelet,
    status: 500,
    want: {
      kind: 'Status',
      reason: 'InternalError',
      message: 'Internal Server Error: "/api/v1/watch": failed to create RequestInfo: unable to determine kind and namespace from url, /api/v1/watch',
    },
    upstream: null,
  },
  {
    name: "an invalid escape: Go's net/http refuses the request line",
    path: '/api/v1/namespaces/default/configmaps/a%zz',
    userAgent: kubelet,
    status: 400,
    want: { kind: 'Status', reason: 'BadRequest', message: 'invalid URL escape "%zz"' },
    upstream: null,
  },
]

t.test('hostile paths: the apiserver’s answer, re-encoded upstream, nothing kept', async t => {
  const h: Harness = await startHarness({ demo: true })
  t.teardown(() => h.close())
  // what kubelet reads all day is cached, so a path read the wrong way would have somewhere to land
  t.equal((await rawGet(h.url, '/api/v1/namespaces/default/configmaps', kubelet)).status, 200)
  const cachedBefore = JSON.stringify((await debugCache(h.hub)).collections.map((c: any) => [c.component, c.resource, c.kind, c.objects, c.scopes]))

  for (const row of rows) {
    const seen = h.simulator.requests.length
    const got = await rawGet(h.url, row.path, row.userAgent)
    t.equal(got.status, row.status, `${row.name}: status`)
    t.match(got.body, row.want, `${row.name}: answer`)
    const upstream = h.simulator.requests.slice(seen).filter(r => !background.has(r.path))
    t.same(
      upstream.map(r => r.url),
      row.upstream === null ? [] : [row.upstream],
      `${row.name}: ${row.upstream === null ? 'answered by the hub' : 'relayed once, re-encoded'}`,
    )
    t.equal(upstream.filter(fromHubReflector).length, 0, `${row.name}: no watch cache of the hub's own went upstream for it`)
  }
  const cachedAfter = JSON.stringify((await debugCache(h.hub)).collections.map((c: any) => [c.component, c.resource, c.kind, c.objects, c.scopes]))
  t.equal(cachedAfter, cachedBefore, 'no collection, scope or object came of them')

  // offline, none of them is answered from what the node cached: the apiserver's answer cannot be known
  await goDark(h)
  for (const row of rows) {
    const got = await rawGet(h.url, row.path, row.userAgent)
    if (row.upstream === null) t.equal(got.status, row.status, `${row.name}: offline, the hub's own answer is the same`)
    else t.equal(got.status, 503, `${row.name}: offline, 503 (${JSON.stringify(got.body).slice(0, 160)})`)
  }
})
