// What the cache keeps about where objects came from, on a real disk and across restarts: field
// values a scope vouched for, the scopes each object belongs to, the scopes listed whole and the
// newest list version; and what it does when the disk fails it.
import t from 'tap'
import { mkdir, mkdtemp, rm, unlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { DiskCache } from '../lib/cache/disk.ts'
import { CacheStore, LostObjectError } from '../lib/cache/store.ts'
import { Recorder } from '../lib/cache/recorder.ts'
import { parseScope } from '../lib/cache/scope.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { decodeUnknown, encodeUnknown, objectMeta, splitList, withResourceVersion } from '../lib/codec/protobuf.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { fixtureBytes } from './helpers/fixtures.ts'
import { eventually } from './helpers/hub.ts'
import { scopeOf } from '../lib/cache/scope.ts'
import { resourceKeyOf } from '../lib/cache/types.ts'

const log = pino({ level: process.env.OUTPOST_TEST_LOG ?? 'silent' })
const kubeletUA = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'

async function cacheDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-scopes-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

async function openStore(
  t: { teardown(fn: () => unknown): void },
  dir: string,
  options: { maxBodyBytes?: number; retryMs?: number } = {},
): Promise<{ store: CacheStore; disk: DiskCache; recorder: Recorder }> {
  const disk = await DiskCache.open(dir, log)
  const store = new CacheStore(disk, log, options)
  t.teardown(() => store.close())
  await store.load()
  return { store, disk, recorder: new Recorder(store, log) }
}

const names = (items: CachedObject[]) => items.map(o => o.name)

t.test("a GET of kubelet's pod never makes its offline spec.nodeName list forget it, before or after a restart", async t => {
  const dir = await cacheDir(t)
  const { store, recorder } = await openStore(t, dir)
  const list = classify('GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2&resourceVersion=0', kubeletUA)
  await recorder.recordListPage(list, 'protobuf', fixtureBytes('list-pods-kind-worker2.pb'))
  const items = splitList(decodeUnknown(fixtureBytes('list-pods-kind-worker2.pb')).raw).items
  const pod = objectMeta(Buffer.from(items[0]))
  const get = classify('GET', `/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`, kubeletUA)
  // kubelet GETs the pod before each status PATCH: the same version, then a newer one
  await recorder.recordObject(get, 'protobuf', encodeUnknown({ apiVersion: 'v1', kind: 'Pod', raw: Buffer.from(items[0]) }))
  const newer = String(Number(pod.resourceVersion) + 1000)
  await recorder.recordObject(get, 'protobuf', encodeUnknown({ apiVersion: 'v1', kind: 'Pod', raw: withResourceVersion(Buffer.from(items[0]), newer) }))

  const scope = scopeOf(list)
  const before = (await store.list(resourceKeyOf(list), scope))!
  t.ok(names(before.items).includes(pod.name), 'still in the node’s list')
  t.equal(before.items.find(o => o.name === pod.name)?.resourceVersion, newer, 'with the newer body')
  t.equal(before.items.length, items.length)
  await store.flush()
  await store.close()

  const restarted = await openStore(t, dir)
  const after = (await restarted.store.list(resourceKeyOf(list), scope))!
  t.ok(after.complete, 'the listed scope is known after a restart')
  t.same(names(after.items).sort(), names(before.items).sort(), 'and after a restart')
})

const cm = (name: string, rv: number, labels: Record<string, string>): CachedObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  namespace: 'default',
  name,
  resourceVersion: String(rv),
  format: 'json',
  body: Buffer.from(JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: String(rv), labels } })),
})
const key: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }
const byApp = parseScope({ namespace: '', labelSelector: 'app=a', fieldSelector: '' })
const byTier = parseScope({ namespace: '', labelSelector: 'tier=web', fieldSelector: '' })
const everything = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })

t.test('a DELETED seen through one scope leaves the object in another scope that holds it', async t => {
  const dir = await cacheDir(t)
  const { store } = await openStore(t, dir)
  const both = cm('both', 10, { app: 'a', tier: 'web' })
  await store.replaceScope(key, byApp, { items: [both, cm('only-app', 11, { app: 'a' })], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '20' })
  await store.replaceScope(key, byTier, { items: [both], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '21' })
  // its app label changed: the app=a watch sees it leave (DELETED), the tier=web watch a MODIFIED
  await store.remove(key, 'default', 'both', byApp)
  await store.put(key, cm('both', 22, { app: 'b', tier: 'web' }), byTier)
  t.same(names((await store.list(key, byTier))!.items), ['both'], 'the other scope still serves it')
  t.same(names((await store.list(key, byApp))!.items), ['only-app'], 'the scope it left does not')
  await store.flush()
  await store.close()
  const restarted = await openStore(t, dir)
  t.same(names((await restarted.store.list(key, byTier))!.items), ['both'], 'the same after a restart')
  await restarted.store.remove(key, 'default', 'both', byTier)
  t.same(names((await restarted.store.list(key, byTier))!.items), [], 'gone once no scope holds it')
  t.equal(await restarted.store.get(key, 'default', 'both'), undefined)
})

t.test('a relist removes what its scope no longer has, and only that', async t => {
  const { store } = await openStore(t, await cacheDir(t))
  await store.replaceScope(key, byApp, { items: [cm('x', 10, { app: 'a', tier: 'web' })], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '20' })
  await store.replaceScope(key, byTier, { items: [cm('x', 10, { app: 'a', tier: 'web' })], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '20' })
  await store.replaceScope(key, byApp, { items: [], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '30' })
  t.same(names((await store.list(key, byTier))!.items), ['x'], 'tier=web did not list it away')
  await store.replaceScope(key, everything, { items: [], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '40' })
  t.same(names((await store.list(key, byTier))!.items), [], 'a list of everything is the word on every narrower scope')
})

t.test('the scopes listed whole and the newest list version survive a restart', async t => {
  const dir = await cacheDir(t)
  const { store } = await openStore(t, dir)
  await store.replaceScope(key, byApp, { items: [cm('x', 10, { app: 'a' })], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '500' })
  await store.flush()
  await store.close()
  const restarted = await openStore(t, dir)
  const selection = (await restarted.store.list(key, parseScope({ namespace: 'default', labelSelector: 'app=a', fieldSelector: '' })))!
  t.ok(selection.complete, 'a narrower scope of the listed one is answered whole')
  t.equal(selection.resourceVersion, '500', 'at the version of the list, not only of its newest item')
  t.notOk((await restarted.store.list(key, everything))!.complete, 'a wider scope is not')
})

t.test('a relist of what the cache already holds writes nothing', async t => {
  const { store, disk } = await openStore(t, await cacheDir(t))
  const items = Array.from({ length: 20 }, (_, i) => cm(`cm-${i}`, 100 + i, { app: 'a' }))
  await store.replaceScope(key, byApp, { items, kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '200' })
  await store.flush()
  const writes = disk.stats.writes
  const syncs = disk.stats.syncs
  await store.replaceScope(key, byApp, {
    items: items.map(o => ({ ...o, body: Buffer.from(o.body) })),
    kind: 'ConfigMap',
    apiVersion: 'v1',
    resourceVersion: '200',
  })
  t.equal(disk.stats.writes - writes, 0, 'no object is written again (only the scope list, which carries the new list version)')
  await store.put(key, { ...items[0], body: Buffer.from(items[0].body) }, byApp)
  t.equal(disk.stats.writes - writes, 0, 'nor by a watch event that repeats it')
  await store.flush()
  t.ok(disk.stats.syncs - syncs <= 1, 'one sync at most, for the scope list')
})

t.test('a write the disk refuses stays in memory, is counted, and lands once the disk takes it', async t => {
  const dir = await cacheDir(t)
  const { store, disk } = await openStore(t, dir, { retryMs: 50 })
  // a file where the collection's directory should be: its journal cannot be created
  await mkdir(path.join(dir, 'kubelet'), { recursive: true })
  const blocker = path.join(dir, 'kubelet', 'configmaps.v1.core')
  await writeFile(blocker, 'not a directory')
  await store.put(key, cm('x', 10, { app: 'a' }), everything)
  t.ok(store.writeFailures >= 1, 'the failure is counted')
  t.equal(store.unsavedCount, 1, 'and the object is held as unsaved')
  t.equal((await store.get(key, 'default', 'x'))?.resourceVersion, '10', 'memory still answers with it')
  await unlink(blocker)
  await eventually(() => store.unsavedCount === 0, 10_000, 'the retry to land')
  await disk.flush()
  await store.close()
  const restarted = await openStore(t, dir)
  t.equal((await restarted.store.get(key, 'default', 'x'))?.resourceVersion, '10', 'on disk now')
})

t.test('objects whose journal vanished are reported, not dropped from a list that claims to be whole', async t => {
  const dir = await cacheDir(t)
  const { store } = await openStore(t, dir, { maxBodyBytes: 1 })
  await store.replaceScope(key, everything, { items: [cm('a', 10, {}), cm('b', 11, {})], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '20' })
  await store.flush()
  await unlink(path.join(dir, 'kubelet', 'configmaps.v1.core', 'journal.0'))
  const selection = (await store.list(key, everything))!
  t.same(names(selection.items), [])
  t.match(selection.lost, [/default\/a/, /default\/b/], 'the list says what it lacks')
  await t.rejects(store.get(key, 'default', 'b'), LostObjectError)
  t.equal(store.stats.lostObjects, 2)
})

t.test("JSON objects are stored as the apiserver's bytes: integers past 2^53 survive, nothing is re-serialized", async t => {
  const { store, recorder } = await openStore(t, await cacheDir(t))
  const big = '9007199254740993'
  const item = `{"metadata":{"name":"p","namespace":"default","resourceVersion":"7","labels":{"app":"a"}},"spec":{"activeDeadlineSeconds":${big},"x":"caf\\u00e9 \\"q\\" ]}"}}`
  const list = Buffer.from(
    `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[${item}, {"metadata":{"name":"q","namespace":"default","resourceVersion":"8"}}]}`,
  )
  const info = classify('GET', '/api/v1/pods', kubeletUA)
  await recorder.recordListPage(info, 'json', list)
  const stored = (await store.list(resourceKeyOf(info), scopeOf(info)))!
  t.equal(stored.items[0].body.toString(), `{"kind":"Pod","apiVersion":"v1",${item.slice(1)}`, 'the item, byte for byte, with its kind in front')
  t.ok(stored.complete)
  t.same(
    names((await store.list(resourceKeyOf(info), parseScope({ namespace: '', labelSelector: 'app=a', fieldSelector: '' })))!.items),
    ['p'],
    'labels read from the bytes',
  )

  const event = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","resourceVersion":"10"},"spec":{"activeDeadlineSeconds":${big}}}`
  const watch = classify('GET', '/api/v1/pods?watch=true&resourceVersion=9', kubeletUA)
  await recorder.recordEvent(watch, 'json', Buffer.from(`{"type":"MODIFIED","object":${event}}\n`), scopeOf(watch))
  t.equal((await store.get(resourceKeyOf(info), 'default', 'p'))!.body.toString(), event, "a watch event's object, byte for byte")
})
