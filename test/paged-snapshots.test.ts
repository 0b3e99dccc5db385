// Issue 40's paged-list contract through a hub against the simulator (which keeps versions as etcd):
// every page of a list is read at its continue token's version, equal to the apiserver's own `Exact`
// list there, while objects change between pages; `Exact` lists of the past likewise; a token or
// version the watch cache's window no longer reaches is the apiserver's to answer online, and the
// apiserver's 410 Expired offline; bad tokens and versions are the apiserver's 400/422.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { startHarness, eventually, goDark } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { decodeBody } from '../lib/codec/typed.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const ns = 'paged'
const path = `/api/v1/namespaces/${ns}/services`

const service = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: ns, labels },
  spec: { ports: [{ port: 80, protocol: 'TCP' }] },
})

const simulatorUrls = new Set<string>()

async function get(base: string, query: string): Promise<{ status: number; body: any }> {
  // straight to the simulator as another client: what the hub relays is kube-proxy's
  const userAgent = simulatorUrls.has(base) ? 'direct' : kubeProxy
  const res = await request(`${base}${path}?${query}`, { headers: { 'user-agent': userAgent, accept: 'application/json' } })
  return { status: res.statusCode, body: await res.body.json() }
}

const shown = (items: any[]) => items.map(i => `${i.metadata.name}@${i.metadata.resourceVersion}`)

/** One page as a client sees it: items, resourceVersion, continue, remainingItemCount. */
const pageOf = (body: any) => ({
  items: shown(body.items),
  resourceVersion: body.metadata.resourceVersion,
  continue: body.metadata.continue ?? '',
  remainingItemCount: body.metadata.remainingItemCount,
})

/** The apiserver's own pages at version `rv` (a legacy resourceVersion=N with limit reads exactly N). */
async function simulatorPages(h: Harness, rv: string, limit: number, selector = '') {
  const pages = []
  let query = `limit=${limit}&resourceVersion=${rv}${selector}`
  for (;;) {
    const { status, body } = await get(h.simulator.url, query)
    if (status !== 200) throw new Error(`the simulator answered ${status}: ${body.message}`)
    pages.push(pageOf(body))
    if (!body.metadata.continue) return pages
    query = `limit=${limit}&continue=${body.metadata.continue}${selector}`
  }
}

/** Until the hub's cache holds the simulator's newest version (a list at 0 is the cache's state). */
async function caughtUp(h: Harness): Promise<void> {
  const wanted = BigInt(h.simulator.currentResourceVersion())
  await eventually(async () => BigInt((await get(h.url, 'resourceVersion=0')).body.metadata.resourceVersion) >= wanted, 10_000, 'the cache to catch up')
}

const pagesRelayed = (h: Harness) =>
  h.simulator.countRequests(r => r.path === path && r.query.continue !== undefined && String(r.headers['user-agent']).startsWith('kube-proxy'))

async function seeded(window?: number): Promise<Harness> {
  const h = await startHarness({ start: { watchCacheWindow: window } })
  simulatorUrls.add(h.simulator.url)
  h.simulator.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })
  for (let i = 0; i < 12; i++) h.simulator.create(service(`s${String(i).padStart(2, '0')}`))
  await eventually(async () => (await get(h.url, 'resourceVersion=0')).body.items?.length === 12, 10_000, 'the cache to hold the services')
  return h
}

t.test('a paged list read while objects change is one snapshot: the apiserver’s own pages at the first page’s version', async t => {
  const h = await seeded()
  t.teardown(() => h.close())
  const relayedBefore = pagesRelayed(h)
  const first = await get(h.url, 'limit=5')
  t.equal(first.status, 200)
  const rv = first.body.metadata.resourceVersion
  const pages = [pageOf(first.body)]
  const changes = [
    () => {
      h.simulator.create(service('s05a')) // lands on page 2
      h.simulator.remove('v1', 'Service', ns, 's07')
      h.simulator.patch('v1', 'Service', ns, 's08', { metadata: { labels: { changed: 'yes' } } })
    },
    () => {
      h.simulator.remove('v1', 'Service', ns, 's11')
      h.simulator.create(service('s99'))
      h.simulator.patch('v1', 'Service', ns, 's10', { metadata: { labels: { changed: 'yes' } } })
    },
  ]
  let token = first.body.metadata.continue
  for (const change of changes) {
    change()
    await caughtUp(h)
    const next = await get(h.url, `limit=5&continue=${token}`)
    t.equal(next.status, 200, next.body.message)
    pages.push(pageOf(next.body))
    token = next.body.metadata.continue
  }
  t.notOk(token, 'three pages')
  t.same(pages, await simulatorPages(h, rv, 5), 'items, versions, tokens and remainingItemCount as the apiserver pages at that version')
  t.equal(pagesRelayed(h), relayedBefore, 'every page came from the watch cache')

  // an Exact list of that past version, and a legacy resourceVersion=N with limit
  const exact = await get(h.url, `resourceVersion=${rv}&resourceVersionMatch=Exact`)
  const direct = await get(h.simulator.url, `resourceVersion=${rv}&resourceVersionMatch=Exact`)
  t.same(pageOf(exact.body), pageOf(direct.body), 'an Exact list of the past equals the apiserver’s')
  t.same(
    pageOf(exact.body).items,
    pages.flatMap(p => p.items),
    'and the pages',
  )
})

t.test('paged with a label selector, and in protobuf: the same snapshot', async t => {
  const h = await seeded()
  t.teardown(() => h.close())
  const selector = `&labelSelector=${encodeURIComponent('!service.kubernetes.io/headless')}`
  const first = await get(h.url, `limit=5${selector}`)
  const rv = first.body.metadata.resourceVersion
  h.simulator.remove('v1', 'Service', ns, 's06')
  h.simulator.create(service('s06a'))
  await caughtUp(h)
  const pages = [pageOf(first.body)]
  for (let token = first.body.metadata.continue; token;) {
    const next = await get(h.url, `limit=5&continue=${token}${selector}`)
    pages.push(pageOf(next.body))
    token = next.body.metadata.continue
  }
  t.same(pages, await simulatorPages(h, rv, 5, selector), 'as the apiserver pages a selected list (no remainingItemCount)')
  t.equal(pages[0].remainingItemCount, undefined)

  const res = await request(`${h.url}${path}?limit=5&continue=${first.body.metadata.continue}`, {
    headers: { 'user-agent': kubeProxy, accept: 'application/vnd.kubernetes.protobuf' },
  })
  const decoded = decodeBody(Buffer.from(await res.body.arrayBuffer())) as any
  t.same(pageOf(decoded), (await simulatorPages(h, rv, 5))[1], 'a protobuf page at the token’s version')
})

t.test('@kubernetes/client-node paging with limit/continue while objects change', async t => {
  const h = await seeded()
  t.teardown(() => h.close())
  const api = kubeConfigFor(h.url, kubeProxy).makeApiClient(k8s.CoreV1Api)
  const items: string[] = []
  let next: string | undefined
  let rv = ''
  let round = 0
  do {
    const page: k8s.V1ServiceList = await api.listNamespacedService({ namespace: ns, limit: 4, _continue: next })
    rv ||= page.metadata!.resourceVersion!
    items.push(...shown(page.items))
    next = page.metadata?._continue
    h.simulator.create(service(`s0${round}b`))
    h.simulator.remove('v1', 'Service', ns, `s1${round}`)
    await caughtUp(h)
    round++
  } while (next)
  t.equal(round, 3, 'three pages of four')
  const direct = await get(h.simulator.url, `resourceVersion=${rv}&resourceVersionMatch=Exact`)
  t.same(items, shown(direct.body.items), 'the pages are the apiserver’s list at the first page’s version')
})

t.test('a version the window no longer reaches: online the apiserver answers, offline its 410 Expired', async t => {
  const h = await seeded(4)
  t.teardown(() => h.close())
  const first = await get(h.url, 'limit=5')
  const rv = first.body.metadata.resourceVersion
  const token = first.body.metadata.continue
  for (let i = 0; i < 6; i++) h.simulator.patch('v1', 'Service', ns, 's09', { metadata: { labels: { round: String(i) } } })
  await caughtUp(h)

  const relayedBefore = pagesRelayed(h)
  const page2 = await get(h.url, `limit=5&continue=${token}`)
  t.equal(page2.status, 200)
  t.same(pageOf(page2.body), (await simulatorPages(h, rv, 5))[1], 'online: the apiserver’s page at the token’s version')
  t.equal(pagesRelayed(h), relayedBefore + 1, 'relayed')
  const exact = await get(h.url, `resourceVersion=${rv}&resourceVersionMatch=Exact`)
  t.same(pageOf(exact.body), pageOf((await get(h.simulator.url, `resourceVersion=${rv}&resourceVersionMatch=Exact`)).body), 'an Exact list too')

  h.simulator.compact()
  const compacted = await get(h.url, `limit=5&continue=${token}`)
  const direct = await get(h.simulator.url, `limit=5&continue=${token}`)
  t.equal(compacted.status, 410)
  t.same(compacted.body, direct.body, 'compacted: the apiserver’s 410, relayed')

  // bad input, as the apiserver answers it (asked online, straight)
  const badQueries = [
    'limit=5&continue=garbage!',
    `limit=5&continue=${Buffer.from('{"v":"meta.k8s.io/v1","rv":5}').toString('base64url')}`,
    `limit=5&resourceVersion=${rv}&continue=${token}`,
    `limit=5&resourceVersion=${rv}&resourceVersionMatch=Exact&continue=${token}`,
    'resourceVersion=abc',
    'limit=5&resourceVersion=12x',
  ]
  const apiserverSays = await Promise.all(badQueries.map(q => get(h.simulator.url, q)))

  const latest = await get(h.url, 'limit=5')
  await goDark(h)
  const expired = await get(h.url, `limit=5&continue=${token}`)
  t.equal(expired.status, 410, 'offline: a token the window no longer reaches is 410')
  t.same({ ...expired.body, metadata: {} }, { ...direct.body, metadata: {} }, 'the apiserver’s Status, word for word')
  t.ok(expired.body.metadata.continue, 'with a token for the rest at the latest version')
  const exactOffline = await get(h.url, `resourceVersion=${rv}&resourceVersionMatch=Exact`)
  t.match(exactOffline, { status: 410, body: { reason: 'Expired', message: 'The resourceVersion for the provided list is too old.' } }, 'an Exact list too')

  const page2Now = await get(h.url, `limit=5&continue=${latest.body.metadata.continue}`)
  t.equal(page2Now.status, 200, 'offline: a token at the cache’s version pages on')
  t.equal(page2Now.body.metadata.resourceVersion, latest.body.metadata.resourceVersion, 'at its version')

  for (const [i, q] of badQueries.entries()) {
    const offline = await get(h.url, q)
    t.same(
      { status: offline.status, message: offline.body.message, reason: offline.body.reason },
      {
        status: apiserverSays[i].status,
        message: apiserverSays[i].body.message,
        reason: apiserverSays[i].body.reason,
      },
      `offline, as the apiserver: ${q}`,
    )
  }
})

t.test('offline from the disk cache: a token of another version than the cached list’s is 410, never a list of another version', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89', accept: 'application/json' }
  const base = `${h.url}/api/v1/namespaces/default/configmaps`
  const list = async (query: string) => {
    const res = await request(`${base}?${query}`, { headers: kubelet })
    return { status: res.statusCode, body: (await res.body.json()) as any }
  }
  const readAll = async () => {
    const first = await list('limit=2')
    for (let token = first.body.metadata.continue; token;) token = (await list(`limit=2&continue=${token}`)).body.metadata.continue
    return first.body.metadata.continue as string
  }
  for (let i = 0; i < 5; i++) h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'default' } })
  const older = await readAll()
  h.simulator.remove('v1', 'ConfigMap', 'default', 'cm-3')
  const newer = await readAll() // the disk now holds the list at the newer version
  await goDark(h)

  const stale = await list(`limit=2&continue=${older}`)
  t.equal(stale.status, 410)
  t.match(stale.body, { reason: 'Expired', message: /^The provided continue parameter is too old/ })
  const rest = await list(`limit=2&continue=${stale.body.metadata.continue}`)
  t.equal(rest.status, 200, 'the 410’s own token reads the rest at the latest version')
  t.same(
    shown(rest.body.items).map(s => s.split('@')[0]),
    ['cm-2', 'cm-4'],
  )
  t.equal(rest.body.metadata.resourceVersion, JSON.parse(Buffer.from(newer, 'base64url').toString()).rv.toString())
  const current = await list(`limit=2&continue=${newer}`)
  t.equal(current.status, 200, 'a token of the cached version pages on')
  t.same(
    shown(current.body.items).map(s => s.split('@')[0]),
    ['cm-2', 'cm-4'],
  )
  const exact = await list(`resourceVersion=${JSON.parse(Buffer.from(older, 'base64url').toString()).rv}&resourceVersionMatch=Exact`)
  t.match(exact, { status: 410, body: { message: 'The resourceVersion for the provided list is too old.' } }, 'an Exact list of the older version')
  const watch = await request(`${base}?watch=true&resourceVersion=abc`, { headers: kubelet })
  t.match(
    { status: watch.statusCode, body: await watch.body.json() },
    { status: 400, body: { reason: 'BadRequest', message: 'invalid resource version "abc"' } },
    'a watch from a version that is not a number, as the apiserver',
  )
})
