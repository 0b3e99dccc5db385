// A watch cache's past, rebuilt from its objects and event window (lib/watch/past-state.ts), and the
// version a list reads at with the apiserver's answers to parameters that do not go together
// (lib/cache/list-version.ts), as tables of cases.
import t from 'tap'
import { pino } from 'pino'
import { WatchCache } from '../lib/watch/cache.ts'
import { parseScope } from '../lib/cache/scope.ts'
import { inListOrder, itemsAt, stateBefore } from '../lib/watch/past-state.ts'
import type { PastSource, UndoableEvent } from '../lib/watch/past-state.ts'
import { listVersionOf, pastExpired } from '../lib/cache/list-version.ts'
import { encodeContinue } from '../lib/api/continue-token.ts'
import { classify } from '../lib/api/requestinfo.ts'
import type { CachedObject } from '../lib/cache/types.ts'

const obj = (name: string, rv: number, namespace = 'ns'): CachedObject => ({
  apiVersion: 'v1',
  kind: 'Service',
  namespace,
  name,
  resourceVersion: String(rv),
  format: 'json',
  body: Buffer.from(`{"name":"${name}","rv":${rv}}`),
})
const key = (o: CachedObject) => `${o.namespace}/${o.name}`
const mapOf = (...objects: CachedObject[]) => new Map(objects.map(o => [key(o), o]))
const show = (items: Iterable<CachedObject>) => [...items].map(o => `${o.name}@${o.resourceVersion}`)

type Event = UndoableEvent & { resourceVersion: bigint }
const added = (o: CachedObject): Event => ({ object: o, resourceVersion: BigInt(o.resourceVersion) })
const modified = (o: CachedObject, previous: CachedObject): Event => ({ object: o, previous, resourceVersion: BigInt(o.resourceVersion) })
const deleted = (previous: CachedObject, at: number): Event => ({ object: previous, previous, resourceVersion: BigInt(at) })

t.test('undoing the events after N, newest first, gives the state at N', async t => {
  const a1 = obj('a', 1)
  const b2 = obj('b', 2)
  const a3 = obj('a', 3)
  const c4 = obj('c', 4)
  const a5 = obj('a', 5)
  // history: a@1, b@2, a@3 (modified), c@4 (added), b deleted at 6, a@5 modified... in version order:
  const history: Event[] = [added(a1), added(b2), modified(a3, a1), added(c4), modified(a5, a3), deleted(b2, 6)]
  const now = mapOf(a5, c4)
  const cases: { at: number; want: string[] }[] = [
    { at: 6, want: ['a@5', 'c@4'] },
    { at: 5, want: ['a@5', 'b@2', 'c@4'] },
    { at: 4, want: ['a@3', 'b@2', 'c@4'] },
    { at: 3, want: ['a@3', 'b@2'] },
    { at: 2, want: ['a@1', 'b@2'] },
    { at: 1, want: ['a@1'] },
    { at: 0, want: [] },
  ]
  for (const { at, want } of cases) {
    const after = history.filter(e => e.resourceVersion > BigInt(at))
    t.same(show(inListOrder(stateBefore(now, after))), want, `state at ${at}`)
  }
  t.same(show(now.values()), ['a@5', 'c@4'], 'the cache itself is not changed')
  // an ADDED for an object already held (a replay) and a DELETED of one never held undo to what was held
  t.same(show(stateBefore(mapOf(a3), [modified(a3, a1)]).values()), ['a@1'], 'a replayed ADDED restores the held copy')
  t.same(
    show(
      stateBefore(
        mapOf(a1),
        [deleted(b2, 7)].map(({ object }) => ({ object })),
      ).values(),
    ),
    ['a@1'],
    'a DELETED of an object never held adds nothing back',
  )
})

t.test('the state at N is known only from the window and the last list on, up to the cache version', async t => {
  const a1 = obj('a', 1)
  const a8 = obj('a', 8)
  const events: Event[] = [modified(a8, a1)]
  const source = (exactSince: bigint, oldest: bigint): PastSource => ({
    objects: mapOf(a8),
    resourceVersion: 9n,
    exactSince,
    eventsAfter: v => (v < oldest ? 'expired' : events.filter(e => e.resourceVersion > v)),
  })
  const cases: { at: bigint; exactSince: bigint; oldest: bigint; want: string[] | undefined }[] = [
    { at: 5n, exactSince: 1n, oldest: 1n, want: ['a@1'] },
    { at: 9n, exactSince: 1n, oldest: 1n, want: ['a@8'] },
    { at: 10n, exactSince: 1n, oldest: 1n, want: undefined }, // not reached yet
    { at: 5n, exactSince: 6n, oldest: 1n, want: undefined }, // before a relist
    { at: 5n, exactSince: 1n, oldest: 6n, want: undefined }, // the window no longer reaches
  ]
  for (const c of cases) {
    const items = itemsAt(source(c.exactSince, c.oldest), c.at)
    t.same(items && show(items), c.want, `at ${c.at}, exact since ${c.exactSince}, window from ${c.oldest}`)
  }
  t.same(show(inListOrder(mapOf(obj('b', 1, 'x'), obj('a', 2, 'y'), obj('a', 3, 'x')))), ['a@3', 'b@1', 'a@2'], 'list order is by storage key')
})

const list = (query: string) => classify('GET', `/api/v1/namespaces/ns/services?${query}`, 'kube-proxy/v1.24.0')
const token = (rv: number, start = 's02\u0000') => encodeContinue({ rv, start })

t.test('the version a list reads at, and the apiserver’s answers to bad input', async t => {
  const cases: { query: string; want: unknown }[] = [
    { query: '', want: { kind: 'state' } },
    { query: 'resourceVersion=0&limit=5', want: { kind: 'state' } },
    { query: 'resourceVersion=7', want: { kind: 'state' } },
    { query: 'resourceVersion=7&resourceVersionMatch=NotOlderThan&limit=5', want: { kind: 'state' } },
    { query: 'resourceVersion=7&resourceVersionMatch=Exact', want: { kind: 'exact', version: 7n, from: 'resourceVersion' } },
    { query: 'resourceVersion=7&limit=5', want: { kind: 'exact', version: 7n, from: 'resourceVersion' } },
    { query: `limit=5&continue=${token(42)}`, want: { kind: 'exact', version: 42n, from: 'continue' } },
    { query: `resourceVersion=0&limit=5&continue=${token(42)}`, want: { kind: 'exact', version: 42n, from: 'continue' } },
    { query: `limit=5&continue=${token(-1)}`, want: { kind: 'latest' } },
    { query: 'resourceVersion=abc', want: { code: 400, message: 'invalid resource version "abc"' } },
    { query: 'resourceVersion=-3&limit=5', want: { code: 400, message: 'invalid resource version "-3"' } },
    { query: 'continue=garbage!', want: { code: 400, message: 'invalid continue token: continue key is not valid: illegal base64 data at input byte 7' } },
    {
      query: `continue=${Buffer.from('{"v":"x"}').toString('base64url')}`,
      want: { code: 400, message: 'invalid continue token: continue key is not valid: server does not recognize this encoded version' },
    },
    {
      query: `continue=${token(0)}`,
      want: { code: 400, message: 'invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)' },
    },
    { query: `resourceVersion=42&continue=${token(42)}`, want: { code: 400, message: 'specifying resource version is not allowed when using continue' } },
    {
      query: `resourceVersion=42&resourceVersionMatch=Exact&continue=${token(42)}`,
      want: {
        code: 422,
        message: 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided',
      },
    },
  ]
  for (const { query, want } of cases) {
    const got = listVersionOf(list(query)) as Record<string, unknown>
    const shown = got.kind === 'Status' ? { code: got.code, message: got.message } : got
    t.same(shown, want, query)
  }
})

t.test('410 Expired as the apiserver writes it', async t => {
  const byVersion = pastExpired(list('resourceVersion=7&resourceVersionMatch=Exact'), { kind: 'exact', version: 7n, from: 'resourceVersion' })
  t.match(byVersion, { code: 410, reason: 'Expired', message: 'The resourceVersion for the provided list is too old.', metadata: {} })
  const byToken = pastExpired(list(`limit=5&continue=${token(42)}`), { kind: 'exact', version: 42n, from: 'continue' })
  t.match(byToken, { code: 410, reason: 'Expired', message: /^The provided continue parameter is too old to display a consistent list result\./ })
  t.equal(byToken.metadata.continue, token(-1), 'with a token for the rest at the latest version')
})

t.test('a watch cache’s past: every version from its last list on, until the window drops it; none before a relist', async t => {
  const log = pino({ level: 'silent' })
  const scope = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })
  const cache = new WatchCache({
    storeKey: { component: 'shared-json', group: '', version: 'v1', resource: 'services' },
    scope,
    format: 'json',
    log,
    windowSize: 4,
  })
  const settled = () => new Promise(resolve => setImmediate(resolve))
  await cache.replace([obj('a', 5), obj('b', 6)], '10', 'json', { kind: 'Service', apiVersion: 'v1' })
  cache.event('ADDED', obj('c', 11))
  cache.event('MODIFIED', obj('a', 12))
  cache.event('DELETED', obj('b', 13))
  await settled()
  const at = (v: bigint) => {
    const items = itemsAt(cache, v)
    return items && show(items)
  }
  t.same(at(10n), ['a@5', 'b@6'], 'the list’s own version')
  t.same(at(11n), ['a@5', 'b@6', 'c@11'])
  t.same(at(12n), ['a@12', 'b@6', 'c@11'])
  t.same(at(13n), ['a@12', 'c@11'], 'now')
  t.equal(at(9n), undefined, 'before the first list')
  t.equal(at(14n), undefined, 'not reached')
  cache.event('MODIFIED', obj('c', 14))
  cache.event('MODIFIED', obj('c', 15))
  await settled()
  t.equal(at(10n), undefined, 'the window of 4 dropped the event after 10')
  t.same(at(11n), ['a@5', 'b@6', 'c@11'], 'the oldest version the window still reaches')
  // a relist says what changed since 15, not when: nothing between is known
  await cache.replace([obj('a', 12), obj('c', 15), obj('d', 18)], '20')
  t.same(at(20n), ['a@12', 'c@15', 'd@18'], 'the relist’s version')
  t.equal(at(15n), undefined, 'before the relist')
  t.equal(at(18n), undefined, 'between the old version and the relist’s')
})
