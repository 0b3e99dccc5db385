// A shared watch cache serves its first list while the list's journal write is still under way
// (the answer is built meanwhile), but sends nothing before the write has landed: what a client
// is shown survives a SIGKILL of the hub.
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { request } from 'undici'
import { DiskCache } from '../lib/cache/disk.ts'
import { CacheStore } from '../lib/cache/store.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { WatchCache } from '../lib/watch/cache.ts'
import { Router } from '../lib/front/router.ts'
import { WatchCacheAnswerer } from '../lib/front/watch-cache-answerer.ts'
import { FilteredWatches } from '../lib/watch/filtered-watches.ts'
import { LiveStreams } from '../lib/watch/streams.ts'
import type { WatchCaches } from '../lib/watch/watch-caches.ts'
import { parseScope } from '../lib/cache/scope.ts'

const log = pino({ level: 'silent' })
const key: ResourceKey = { component: 'shared-json', group: '', version: 'v1', resource: 'configmaps' }

function configMap(name: string, rv: string): CachedObject {
  const body = Buffer.from(
    JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: rv }, data: { a: name } }),
  )
  return { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name, resourceVersion: rv, format: 'json', body, labels: {} }
}

/** A store on a real disk whose writes wait until `release()`. */
async function heldStore(t: Test) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-written-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const disk = await DiskCache.open(dir, log)
  let release!: () => void
  const gate = new Promise<void>(resolve => (release = resolve))
  const write = disk.write.bind(disk)
  let landed = 0
  disk.write = async (k, ops) => {
    await gate
    await write(k, ops)
    landed += ops.filter(op => op.t === 'put').length
  }
  const store = new CacheStore(disk, log)
  t.teardown(() => store.close())
  return { dir, store, release, landed: () => landed }
}

async function serving(t: Test, cache: WatchCache): Promise<string> {
  const caches = { cacheFor: () => cache } as unknown as WatchCaches
  // the watch cache as the hub's router reaches it, for a client acting as the node, online
  const answerer = new WatchCacheAnswerer({ caches, filteredWatches: new FilteredWatches(), streams: new LiveStreams() })
  const router = new Router({
    answerers: { 'watch-cache': answerer },
    sources: { cloud: { isOnline: () => true }, caching: undefined, watchCaches: { serves: () => true }, filters: { forRequest: () => undefined } },
    log,
    body: { maxBytes: 1024, idleMs: 1_000 },
  })
  const handle = router.handlerFor()
  const server = http.createServer((req, res) => {
    req.headers['user-agent'] ??= 'kube-proxy/v1.31.0'
    void handle(req, res)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise(resolve => {
        server.closeAllConnections()
        server.close(resolve)
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const answered = (pending: Promise<unknown>, ms: number) =>
  Promise.race([pending.then(() => true), new Promise(resolve => setTimeout(() => resolve(false), ms))])

t.test('the first list: nothing is sent before its write lands, then everything is', async t => {
  const held = await heldStore(t)
  const cache = new WatchCache({
    store: held.store,
    storeKey: key,
    scope: parseScope({ namespace: '', labelSelector: '', fieldSelector: '' }),
    format: 'json',
    log,
  })
  const base = await serving(t, cache)
  const replaced = cache.replace([configMap('a', '5'), configMap('b', '6'), configMap('c', '7')], '10', 'json')
  // the write is held until release(): being synced now can only come from indexing, before any write
  await cache.synced
  t.equal(held.landed(), 0, 'the cache is synced once the list is indexed, before it is written')

  const list = request(`${base}/api/v1/configmaps?resourceVersion=0`, { headers: { accept: 'application/json' } })
  const watch = request(`${base}/api/v1/configmaps?watch=true`, { headers: { accept: 'application/json' } })
  t.equal(await answered(list, 300), false, 'the list is not answered while the write is held')
  t.equal(await answered(watch, 50), false, 'nor is the watch')
  t.equal(held.landed(), 0)

  held.release()
  await replaced
  t.equal(held.landed(), 3, 'the three objects are on disk')
  const listed = (await (await list).body.json()) as { metadata: { resourceVersion: string }; items: { metadata: { name: string } }[] }
  t.same(
    listed.items.map(i => i.metadata.name),
    ['a', 'b', 'c'],
  )
  t.equal(listed.metadata.resourceVersion, '10')
  const stream = (await watch).body
  let text = ''
  for await (const chunk of stream) {
    text += chunk
    if (text.split('\n').length > 3) break
  }
  stream.destroy()
  t.same(
    text
      .trim()
      .split('\n')
      .slice(0, 3)
      .map(l => [JSON.parse(l).type, JSON.parse(l).object.metadata.name]),
    [
      ['ADDED', 'a'],
      ['ADDED', 'b'],
      ['ADDED', 'c'],
    ],
    'the watch begins with the state once it is written',
  )

  // a restart finds what the clients were shown
  await held.store.close()
  const again = await DiskCache.open(held.dir, log)
  const names: string[] = []
  await again.load(({ object }) => names.push(object.name))
  t.same(names.sort(), ['a', 'b', 'c'])
  await again.close()
})
