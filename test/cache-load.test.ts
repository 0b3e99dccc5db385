// The hub serves while its cache loads: the disk cache is read smallest collection first, and each
// collection can be read and written as soon as it is in, while the others wait for theirs. A write
// that came before its collection was read would cut that collection's journal to nothing.
import t from 'tap'
import { pino } from 'pino'
import { DiskCache } from '../lib/cache/disk.ts'
import { CacheStore } from '../lib/cache/store.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { parseScope } from '../lib/cache/scope.ts'

const log = pino({ level: 'silent' })
const all = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })
const configmaps: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }
const secrets: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'secrets' }

function object(kind: string, name: string, rv: number): CachedObject {
  const body = Buffer.from(
    JSON.stringify({ kind, apiVersion: 'v1', metadata: { name, namespace: 'app', resourceVersion: String(rv) }, data: { pad: 'x'.repeat(500) } }),
  )
  return { apiVersion: 'v1', kind, namespace: 'app', name, resourceVersion: String(rv), format: 'json', body, labels: {} }
}

async function open(dir: string): Promise<CacheStore> {
  return new CacheStore(await DiskCache.open(dir, log), log)
}

t.test('a collection answers once it is read; the others load meanwhile; writes wait for their collection and lose nothing', async t => {
  const dir = tempDir(t, 'outpost-load-')
  const first = await open(dir)
  await first.load()
  await first.replaceScope(configmaps, all, {
    items: Array.from({ length: 5_000 }, (_, i) => object('ConfigMap', `cm-${i}`, 1_000 + i)),
    kind: 'ConfigMap',
    apiVersion: 'v1',
    resourceVersion: '9000',
  })
  await first.replaceScope(secrets, all, { items: [object('Secret', 's-1', 10)], kind: 'Secret', apiVersion: 'v1', resourceVersion: '9000' })
  await first.close()

  const store = await open(dir)
  const loading = store.load()
  t.ok(store.loading, 'loading')
  // before anything is read: a write to each collection, and a read of the small one
  const writes = Promise.all([store.put(configmaps, object('ConfigMap', 'cm-7', 9_500), all), store.put(secrets, object('Secret', 's-2', 9_501), all)])
  const secret = await store.get(secrets, 'app', 's-1')
  t.equal(secret?.name, 's-1', 'the small collection answers')
  t.ok(store.loading, 'while the larger one is still being read')
  await Promise.all([writes, loading])
  t.notOk(store.loading, 'loaded')
  t.equal((await store.list(configmaps, all))!.items.length, 5_000, 'every ConfigMap, the one written while loading among them')
  t.equal((await store.get(configmaps, 'app', 'cm-7'))?.resourceVersion, '9500', 'at the version written while loading')
  await store.close()

  const again = await open(dir)
  t.teardown(() => again.close())
  await again.load()
  const listed = (await again.list(configmaps, all))!
  t.equal(listed.items.length, 5_000, 'after a restart: nothing the early write could have cut')
  t.ok(listed.complete, 'and the scope still whole')
  t.same(
    (await again.list(secrets, all))!.items.map(o => `${o.name}@${o.resourceVersion}`),
    ['s-1@10', 's-2@9501'],
  )
})
