// One limit, on a real disk: an object larger than the disk cache takes is not cached (nor any older
// copy of it), is counted and said once, and the scope it is in is never answered as whole; the
// rest of its list is kept, before and after a restart.
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { DiskCache } from '../lib/cache/disk.ts'
import { CacheStore } from '../lib/cache/store.ts'
import { Recorder } from '../lib/cache/recorder.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { capturingLogger } from './helpers/hub.ts'
import { scopeOf } from '../lib/cache/scope.ts'
import { resourceKeyOf } from '../lib/cache/types.ts'

const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const limit = 64 * 1024

const item = (name: string, rv: number, bytes: number) => ({
  metadata: { name, namespace: 'app', resourceVersion: String(rv) },
  data: { blob: 'x'.repeat(bytes) },
})
const listBody = (rv: number, items: unknown[]) =>
  Buffer.from(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items }))
const objectBody = (name: string, rv: number, bytes: number) => Buffer.from(JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', ...item(name, rv, bytes) }))

async function open(dir: string, logger = pino({ level: 'silent' })) {
  const disk = await DiskCache.open(dir, logger, { maxRecordBytes: limit })
  const store = new CacheStore(disk, logger)
  await store.load()
  return { store, recorder: new Recorder(store, logger) }
}

t.test('an object over the limit is not cached; its list is kept without it and is never answered whole', async t => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-limits-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const { logger, text } = capturingLogger()
  const { store, recorder } = await open(dir, logger)
  const list = classify('GET', '/api/v1/namespaces/app/configmaps', kubelet)
  const key = resourceKeyOf(list)
  // the big one was small once, and that copy was cached
  await recorder.recordObject(classify('GET', '/api/v1/namespaces/app/configmaps/big', kubelet), 'json', objectBody('big', 5, 10))
  t.ok(await store.get(key, 'app', 'big'), 'a small copy, cached')

  await recorder.recordListPage(list, 'json', listBody(20, [item('a', 10, 100), item('big', 11, 2 * limit), item('b', 12, 100)]))
  const selection = (await store.list(key, scopeOf(list)))!
  t.notOk(selection.complete, 'the scope is not whole without it')
  t.match(store.find(key)!.whyIncomplete(scopeOf(list)), /app\/big \(\d+ bytes\) is too large to cache/, 'and says which object and why')
  t.same(
    selection.items.map(o => o.name),
    ['a', 'b'],
    'the rest of the list is kept',
  )
  t.equal(await store.get(key, 'app', 'big'), undefined, 'the older copy is not kept either: it is not what the apiserver says now')
  await recorder.recordObject(classify('GET', '/api/v1/namespaces/app/configmaps/big', kubelet), 'json', objectBody('big', 11, 2 * limit))
  t.equal(await store.get(key, 'app', 'big'), undefined, 'a get of it is not cached')
  t.equal(store.stats.tooLarge, 2, 'counted each time')
  t.equal(
    text()
      .split('\n')
      .filter(line => line.includes('too large to cache; relayed, not kept')).length,
    1,
    'said once',
  )
  await store.close()

  const again = await open(dir)
  t.teardown(() => again.store.close())
  const after = (await again.store.list(key, scopeOf(list)))!
  t.same(
    after.items.map(o => o.name),
    ['a', 'b'],
    'after a restart: the rest',
  )
  t.notOk(after.complete, 'still not whole')
})
