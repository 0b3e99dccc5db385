// The cache index: bodies beyond the memory budget are read back from disk, scopes do not
// overwrite each other, and nothing goes back in time.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { DiskCache } from '../lib/cache/disk.ts'
import { CacheStore } from '../lib/cache/store.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { parseScope } from '../lib/cache/scope.ts'
import { numericVersion } from '../lib/cache/versions.ts'

const log = pino({ level: 'silent' })
const key: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }
const all = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })

function configMap(name: string, rv: number, labels: Record<string, string> = {}): CachedObject {
  const object = {
    kind: 'ConfigMap',
    apiVersion: 'v1',
    metadata: { name, namespace: 'default', resourceVersion: String(rv), labels },
    data: { pad: 'x'.repeat(200) },
  }
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    namespace: 'default',
    name,
    resourceVersion: String(rv),
    format: 'json',
    body: Buffer.from(JSON.stringify(object)),
  }
}

t.test('bodies over the memory budget are evicted and read back from disk', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const disk = await DiskCache.open(dir, log)
  t.teardown(() => disk.close())
  const store = new CacheStore(disk, log, { maxBodyBytes: 2_000 })
  const objects = Array.from({ length: 50 }, (_, i) => configMap(`cm-${String(i).padStart(2, '0')}`, 100 + i))
  await store.replaceScope(key, all, { items: objects, kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '200' })
  t.ok(store.memory.bytes <= 2_000, `memory holds ${store.memory.bytes} bytes of bodies, within the budget`)
  t.ok(store.memory.bodies < 50, 'some bodies were evicted')
  const listed = (await store.list(key, all))!
  t.same(
    listed.items.map(o => o.body.toString()),
    objects.map(o => o.body.toString()),
    'every body comes back, from memory or disk',
  )
  t.equal(listed.resourceVersion, '200', 'the list version is the highest seen')
  t.same((await store.get(key, 'default', 'cm-00'))?.body, objects[0].body)
  // a field the index does not hold is read from the body, as the apiserver compares it: a pod
  // without spec.hostNetwork is hostNetwork=false
  const podsKey: ResourceKey = { ...key, resource: 'pods' }
  const pods = objects.map(o => ({ ...o, kind: 'Pod', body: Buffer.from(o.body.toString().replace('"kind":"ConfigMap"', '"kind":"Pod"')) }))
  await store.replaceScope(podsKey, all, { items: pods, kind: 'Pod', apiVersion: 'v1', resourceVersion: '200' })
  const onField = (await store.list(podsKey, parseScope({ namespace: '', labelSelector: '', fieldSelector: 'spec.hostNetwork=false' })))!
  t.equal(onField.items.length, 50, 'field selectors on JSON paths read evicted bodies too')
  const none = (await store.list(podsKey, parseScope({ namespace: '', labelSelector: '', fieldSelector: 'spec.hostNetwork=true' })))!
  t.equal(none.items.length, 0)
})

t.test('an older version never replaces a newer one; scopes replace only their own objects', async t => {
  const store = new CacheStore(undefined, log)
  await store.put(key, configMap('a', 10, { app: 'a' }))
  await store.put(key, configMap('a', 5, { app: 'a' }))
  t.equal((await store.get(key, 'default', 'a'))?.resourceVersion, '10')
  await store.put(key, configMap('b', 11, { app: 'b' }))
  const onlyA = parseScope({ namespace: 'default', labelSelector: 'app=a', fieldSelector: '' })
  await store.replaceScope(key, onlyA, { items: [], kind: 'ConfigMap', apiVersion: 'v1', resourceVersion: '12' })
  t.equal(await store.get(key, 'default', 'a'), undefined, 'gone from the cloud: gone from its scope')
  t.ok(await store.get(key, 'default', 'b'), 'an object of another scope is untouched')
})

t.test('numericVersion: decimal digits are a version, anything else is 0 (unknown), at any length', async t => {
  const cases: [string, bigint][] = [
    ['', 0n],
    ['0', 0n],
    ['7', 7n],
    ['123456', 123456n],
    ['999999999999999', 999999999999999n],
    ['9999999999999999', 9999999999999999n],
    ['12345678901234567890', 12345678901234567890n],
    ['12a', 0n],
    ['-1', 0n],
    [' 1', 0n],
    ['1.5', 0n],
    ['1e3', 0n],
    ['١٢', 0n],
    ['0x10', 0n],
  ]
  // twice each, and alternating, so that a remembered answer is checked as well as a fresh one
  for (const [rv, want] of [...cases, ...cases]) {
    t.equal(numericVersion(rv), want, JSON.stringify(rv))
    t.equal(numericVersion(rv), want, `${JSON.stringify(rv)} again`)
  }
})
