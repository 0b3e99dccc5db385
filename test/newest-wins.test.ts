// One rule in memory and on disk: an object is never replaced by an older version of itself; a list
// older than what its scope has seen is a new history (etcd restored) and replaces the scope, and a
// watch cache then ends its watchers with 410; a cache takes only its resource's kind.
import t from 'tap'
import { pino } from 'pino'
import { WatchCache } from '../lib/watch/cache.ts'
import type { CacheEvent, CacheListener } from '../lib/watch/cache.ts'
import { CacheStore, RejectedError } from '../lib/cache/store.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { parseScope } from '../lib/cache/scope.ts'

const log = pino({ level: 'silent' })
const all = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })
const services: ResourceKey = { component: 'shared-json', group: '', version: 'v1', resource: 'services' }
const configmaps: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }

function object(kind: string, name: string, rv: number, value = `v${rv}`): CachedObject {
  const doc = { kind, apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: String(rv) }, data: { value } }
  return { apiVersion: 'v1', kind, namespace: 'default', name, resourceVersion: String(rv), format: 'json', body: Buffer.from(JSON.stringify(doc)), labels: {} }
}

const svc = (name: string, rv: number) => object('Service', name, rv)
const cm = (name: string, rv: number, value?: string) => object('ConfigMap', name, rv, value)

class Recording implements CacheListener {
  readonly events: string[] = []
  readonly expired: string[] = []
  onEvent(event: CacheEvent): void {
    this.events.push(`${event.type} ${event.object.name}@${event.object.resourceVersion}`)
  }
  onProgress(): void {}
  expire(why: string): void {
    this.expired.push(why)
  }
}

async function syncedCache(items: CachedObject[], rv: string): Promise<{ cache: WatchCache; watcher: Recording }> {
  const cache = new WatchCache({ storeKey: services, scope: all, format: 'json', log })
  await cache.replace(items, rv, 'json', { kind: 'Service', apiVersion: 'v1' })
  const watcher = new Recording()
  cache.subscribe(watcher, () => {})
  return { cache, watcher }
}

/** Waits for the cache to apply what it was given (events apply once written, in order). */
const settled = () => new Promise(resolve => setImmediate(resolve))

const versions = (cache: WatchCache) => cache.snapshot().items.map(o => `${o.name}@${o.resourceVersion}`)

t.test('watch cache: an event older than the copy held changes nothing and is told to nobody', async t => {
  const { cache, watcher } = await syncedCache([svc('a', 5)], '10')
  cache.event('MODIFIED', svc('a', 12))
  cache.event('MODIFIED', svc('a', 11))
  cache.event('DELETED', svc('a', 11))
  await settled()
  t.same(versions(cache), ['a@12'], 'rv 12 stays: the list at 12 never says 11')
  t.same(watcher.events, ['MODIFIED a@12'], 'only the newer event was told')
  t.equal(cache.stats.olderIgnored, 2)
  t.equal(cache.resourceVersion, 12n)
})

t.test('watch cache: a list naming an object twice keeps its newer version', async t => {
  const { cache } = await syncedCache([svc('a', 7), svc('a', 9), svc('a', 8)], '10')
  t.same(versions(cache), ['a@9'])
})

t.test('watch cache: a relist older than its version is a new history: taken as it is, watchers told 410', async t => {
  const { cache, watcher } = await syncedCache([svc('a', 5), svc('b', 6)], '10')
  cache.event('MODIFIED', svc('a', 20))
  await settled()
  await cache.replace([svc('a', 3), svc('c', 4)], '8', 'json', { kind: 'Service', apiVersion: 'v1' })
  t.same(versions(cache), ['a@3', 'c@4'], "the restored history's objects, older copies included")
  t.equal(cache.resourceVersion, 8n, "at the new history's version")
  t.equal(watcher.expired.length, 1, 'the watcher is told to list again')
  t.match(watcher.expired[0], /history went back from 20 to 8/)
  t.equal(cache.eventsAfter(5n), 'expired', 'nothing before the new history can be resumed from')
  t.same(cache.eventsAfter(8n), [], 'a watch from the new version resumes')
  t.equal(cache.stats.newHistories, 1)
})

t.test("watch cache: only its resource's kind; an empty list of another kind empties nothing", async t => {
  const { cache } = await syncedCache([svc('a', 5)], '10')
  await t.rejects(async () => cache.replace([], '11', 'json', { kind: 'ConfigMap', apiVersion: 'v1' }), /kind "ConfigMap" is not Service/)
  await t.rejects(async () => cache.replace([cm('x', 11)], '11', 'json'), /kind "ConfigMap" is not Service/)
  t.throws(() => cache.event('ADDED', cm('x', 12)), /kind "ConfigMap" is not Service/)
  await settled()
  t.same(versions(cache), ['a@5'], 'the Services are untouched')
})

t.test('store: newest wins for gets, events and deletions; a list naming one twice keeps the newer', async t => {
  const store = new CacheStore(undefined, log)
  await store.put(configmaps, cm('a', 10))
  await store.put(configmaps, cm('a', 9))
  t.equal((await store.get(configmaps, 'default', 'a'))?.resourceVersion, '10', 'a get of an older copy does not replace')
  await store.remove(configmaps, 'default', 'a', undefined, '8')
  t.ok(await store.get(configmaps, 'default', 'a'), 'a deletion older than the copy held (made again since) removes nothing')
  await store.replaceScope(configmaps, all, {
    items: [cm('b', 3), cm('b', 5), cm('b', 4), cm('a', 10)],
    kind: 'ConfigMap',
    apiVersion: 'v1',
    resourceVersion: '12',
  })
  t.equal((await store.get(configmaps, 'default', 'b'))?.resourceVersion, '5')
  t.equal(store.stats.olderIgnored, 2, 'the older get and the older deletion')
})

t.test('store: a relist not older than the scope keeps newer copies that came through other ways', async t => {
  const store = new CacheStore(undefined, log)
  const labelled = parseScope({ namespace: 'default', labelSelector: '', fieldSelector: '' })
  await store.replaceScope(configmaps, all, { items: [cm('a', 5)], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '10' })
  await store.put(configmaps, cm('a', 15, 'newer'), labelled)
  await store.put(configmaps, cm('n', 16), labelled)
  await store.replaceScope(configmaps, all, { items: [cm('a', 5)], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '12' })
  t.equal((await store.get(configmaps, 'default', 'a'))?.resourceVersion, '15', 'the list at 12 does not take a back to 5')
  t.ok(await store.get(configmaps, 'default', 'n'), 'an object made after the list was taken stays')
})

t.test("store: a list older than what its scope has seen replaces the scope, and the collection's other scopes are no longer whole", async t => {
  const store = new CacheStore(undefined, log)
  const here = parseScope({ namespace: 'default', labelSelector: '', fieldSelector: '' })
  const elsewhere = parseScope({ namespace: 'other', labelSelector: '', fieldSelector: '' })
  const other = { ...cm('o', 7), namespace: 'other' }
  await store.replaceScope(configmaps, here, { items: [cm('a', 5), cm('b', 6)], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '10' })
  await store.replaceScope(configmaps, elsewhere, { items: [other], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '10' })
  await store.put(configmaps, cm('a', 20, 'lost history'), here)
  await store.put(configmaps, cm('z', 21), here)
  await store.replaceScope(configmaps, here, { items: [cm('a', 4, 'restored'), cm('b', 6)], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '8' })
  const listed = (await store.list(configmaps, here))!
  t.same(
    listed.items.map(o => `${o.name}@${o.resourceVersion}`),
    ['a@4', 'b@6'],
    "the restored history's objects, the newer copy replaced",
  )
  t.equal(listed.resourceVersion, '8', "the list's version is the new history's")
  t.ok(listed.complete)
  t.notOk((await store.list(configmaps, elsewhere))!.complete, 'a scope listed in the old history is no longer whole')
  t.match(store.find(configmaps)!.whyIncomplete(elsewhere), /history went back/)
  t.equal(store.stats.newHistories, 1)
})

t.test("store: a collection takes only its resource's kind, lists included, empty or not", async t => {
  const store = new CacheStore(undefined, log)
  const key: ResourceKey = { component: 'kube-proxy', group: '', version: 'v1', resource: 'services' }
  await store.replaceScope(key, all, { items: [svc('a', 5)], kind: 'Service', apiVersion: 'v1', resourceVersion: '10' })
  await t.rejects(store.replaceScope(key, all, { items: [], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '11' }), RejectedError)
  await t.rejects(store.put(key, cm('x', 12)), RejectedError)
  const slices: ResourceKey = { component: 'kube-proxy', group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices' }
  await t.rejects(store.put(slices, svc('b', 13)), /apiVersion "v1" is not discovery.k8s.io\/v1/)
  t.same(
    (await store.list(key, all))!.items.map(o => o.name),
    ['a'],
    'the Services are untouched',
  )
  t.equal(store.stats.rejectedKind, 3)
  const crds: ResourceKey = { component: 'kubelet', group: 'apps.openyurt.io', version: 'v1beta1', resource: 'nodepools' }
  await store.replaceScope(crds, all, { items: [], kind: 'NodePool', apiVersion: 'apps.openyurt.io/v1beta1', resourceVersion: '3' })
  t.equal(store.find(crds)!.kind, 'NodePool', 'a resource the hub has no table for takes the kind its first answer names')
  await t.rejects(
    store.replaceScope(crds, all, { items: [], kind: 'Other', apiVersion: 'apps.openyurt.io/v1beta1', resourceVersion: '4' }),
    RejectedError,
    'and keeps it',
  )
})
