// What the cache records stands for what the apiserver said, under the right key, through the real
// hub and simulator: pages of two lists that share a continue token, a read of the past, a history
// that went back; and a cache dir the hub cannot use or that another hub holds.
import t from 'tap'
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { request } from 'undici'
import { startHub } from '../lib/hub.ts'
import type { Hub } from '../lib/hub.ts'
import { startHarness, eventually, goDark, hubConfig, quietLogger } from './helpers/hub.ts'
import { readWatch } from './helpers/watch.ts'

const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await request(url, { headers: { 'user-agent': kubelet, accept: 'application/json' } })
  const text = await res.body.text()
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined }
}

const configMap = (namespace: string, name: string, data: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace },
  data,
})
const names = (list: any) => (list.items as any[]).map(o => `${o.metadata.namespace}/${o.metadata.name}`)

/** Starts another hub on `cacheDir` against the same (dark) simulator: a restart while the cloud is away. */
async function restartOn(url: string, cacheDir: string): Promise<Hub> {
  return startHub(hubConfig([url], { cacheDir }), { logger: quietLogger() })
}

t.test('two namespaces paged at one resourceVersion share a continue token; each is recorded whole, under its own key', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (const ns of ['alpha', 'beta']) for (let i = 0; i < 100; i++) h.simulator.create(configMap(ns, `cm-${String(i).padStart(3, '0')}`, { ns }))
  const first = (ns: string) => getJson(`${h.url}/api/v1/namespaces/${ns}/configmaps?limit=50`)
  const alpha = await first('alpha')
  const beta = await first('beta')
  // the apiserver's token is the resourceVersion and the last key relative to the namespace's prefix
  t.equal(alpha.body.metadata.continue, beta.body.metadata.continue, 'the same token for both namespaces, as kube-apiserver gives')
  const token = encodeURIComponent(alpha.body.metadata.continue)
  const alphaRest = await getJson(`${h.url}/api/v1/namespaces/alpha/configmaps?limit=50&continue=${token}`)
  const betaRest = await getJson(`${h.url}/api/v1/namespaces/beta/configmaps?limit=50&continue=${token}`)
  t.equal(alphaRest.body.items.length + betaRest.body.items.length, 100, 'the second pages, online')

  await goDark(h)
  for (const ns of ['alpha', 'beta']) {
    const offline = await getJson(`${h.url}/api/v1/namespaces/${ns}/configmaps`)
    t.equal(offline.status, 200, `${ns}: answered offline`)
    t.equal(offline.body.items.length, 100, `${ns}: all 100, not half`)
    t.ok(
      names(offline.body).every(n => n.startsWith(`${ns}/`)),
      `${ns}: only its own objects`,
    )
    const one = await getJson(`${h.url}/api/v1/namespaces/${ns}/configmaps/cm-075`)
    t.equal(one.status, 200, `${ns}: an object of the second page is there`)
    t.equal(one.body.data.ns, ns)
  }
})

t.test('a read of the past is relayed, never recorded; offline, Exact is answered only at the version held', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const before = h.simulator.currentResourceVersion()
  for (let i = 0; i < 10; i++) h.simulator.create(configMap('app', `cm-${i}`))
  const now = await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)
  t.equal(now.body.items.length, 10)
  const past = await getJson(`${h.url}/api/v1/namespaces/app/configmaps?resourceVersion=${before}&resourceVersionMatch=Exact`)
  t.equal(past.status, 200)
  t.equal(past.body.items.length, 0, 'the apiserver answers the past: none yet')
  const legacyPast = await getJson(`${h.url}/api/v1/namespaces/app/configmaps?resourceVersion=${before}&limit=5`)
  t.equal(legacyPast.body.items.length, 0, 'a legacy resourceVersion with limit reads the past too')

  await goDark(h)
  const offline = await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)
  t.equal(offline.body.items.length, 10, 'offline: the present, all 10')
  t.equal((await getJson(`${h.url}/api/v1/namespaces/app/configmaps/cm-3`)).status, 200, 'offline: a GET finds it')
  const old = await getJson(`${h.url}/api/v1/namespaces/app/configmaps?resourceVersion=${before}&resourceVersionMatch=Exact`)
  t.equal(old.status, 410, 'offline: Exact at a version the cache does not hold is Expired')
  t.equal(old.body.reason, 'Expired')
  const held = offline.body.metadata.resourceVersion
  const exact = await getJson(`${h.url}/api/v1/namespaces/app/configmaps?resourceVersion=${held}&resourceVersionMatch=Exact`)
  t.equal(exact.status, 200, 'offline: Exact at the version held is answered')
  t.equal(exact.body.items.length, 10)
  const future = await getJson(`${h.url}/api/v1/namespaces/app/configmaps?resourceVersion=${BigInt(held) + 100n}`)
  t.equal(future.status, 504, 'offline: a state newer than the cache holds is the watch cache\'s "Too large resource version"')
})

t.test('a list older than what its scope has seen is a new history (etcd restored): it replaces the scope, newer copies included', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (let i = 0; i < 3; i++) h.simulator.create(configMap('app', `kept-${i}`, { v: 'old' }))
  const backup = h.simulator.backup()
  h.simulator.create(configMap('app', 'only-in-lost-history'))
  h.simulator.patch('v1', 'ConfigMap', 'app', 'kept-0', { data: { v: 'newer' } })
  const seen = await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)
  t.same(names(seen.body).sort(), ['app/kept-0', 'app/kept-1', 'app/kept-2', 'app/only-in-lost-history'])

  h.simulator.restore(backup)
  const restored = await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)
  t.ok(BigInt(restored.body.metadata.resourceVersion) < BigInt(seen.body.metadata.resourceVersion), 'the apiserver now answers at an older version')
  await goDark(h)
  const offline = await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)
  t.equal(offline.status, 200)
  t.same(names(offline.body).sort(), ['app/kept-0', 'app/kept-1', 'app/kept-2'], 'what the restored history holds, nothing of the lost one')
  t.equal(offline.body.items.find((o: any) => o.metadata.name === 'kept-0').data.v, 'old', "the restored copy replaced the lost history's newer one")
  t.equal(offline.body.metadata.resourceVersion, restored.body.metadata.resourceVersion, "at the new history's version")
  t.equal((await getJson(`${h.url}/api/v1/namespaces/app/configmaps/only-in-lost-history`)).status, 404, 'gone: the whole list said so')
})

t.test('a cache dir the hub cannot use: it starts, relays online, refuses offline, and says why everywhere', async t => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-unusable-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'not-a-dir')
  await writeFile(file, 'a file where the cache dir would go')
  const h = await startHarness({ config: { cacheDir: path.join(file, 'cache') } })
  t.teardown(() => h.close())
  h.simulator.create(configMap('app', 'cm'))
  t.equal((await getJson(`${h.url}/api/v1/namespaces/app/configmaps/cm`)).status, 200, 'online: relayed')
  const ready = await request(`${h.hub.adminUrl}/v1/readyz`)
  const readyText = await ready.body.text()
  t.equal(ready.statusCode, 503, 'readyz is not ok')
  t.match(readyText, /offline autonomy is off: the cache dir cannot be used/, 'readyz says offline autonomy is off, and why')
  const metrics = await (await request(`${h.hub.adminUrl}/metrics`)).body.text()
  t.match(metrics, /^outpost_cache_enabled 0$/m, 'a metric says the cache is off')

  await goDark(h)
  const offline = await getJson(`${h.url}/api/v1/namespaces/app/configmaps/cm`)
  t.equal(offline.status, 503, 'offline: refused')
  t.match(offline.body.message, /offline autonomy is off/, 'the refusal says the cache is off')
})

t.test('one owner: a second hub on the same cache dir fails at once, naming the first, and changes nothing', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  h.simulator.create(configMap('app', 'cm'))
  t.equal((await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)).status, 200)
  await h.hub.store.flush()
  const sizes = async () => {
    const out: Record<string, number> = {}
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name)
        if (entry.isDirectory()) await walk(full)
        else if (entry.isFile()) out[path.relative(h.cacheDir, full)] = (await stat(full)).size
      }
    }
    await walk(h.cacheDir)
    return out
  }
  const before = await sizes()
  await t.rejects(restartOn(h.simulator.url, h.cacheDir), new RegExp(`in use by process ${process.pid}`), 'the second hub names the holder')
  t.same(await sizes(), before, "the first hub's files are untouched")
  const still = await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)
  t.equal(still.status, 200, 'the first hub still serves')
})

t.test("a shared watch cache whose apiserver's history went back (etcd restored) lists the present, and its watchers are told 410 and list again", async t => {
  // BOOKMARKs every 100 ms: a watch silent for a second is one the apiserver will not feed
  const h = await startHarness({ simulator: { bookmarkIntervalMs: 100 }, config: { watchSilenceTimeoutMs: 1_000 } })
  t.teardown(() => h.close())
  const service = (name: string) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'app' }, spec: { ports: [{ port: 80 }] } })
  const kubeProxy = { 'user-agent': 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc', accept: 'application/json' }
  const list = async () => JSON.parse(await (await request(`${h.url}/api/v1/namespaces/app/services`, { headers: kubeProxy })).body.text())
  for (const name of ['a', 'b']) h.simulator.create(service(name))
  const backup = h.simulator.backup()
  h.simulator.create(service('lost'))
  const before = await list()
  t.same(names(before).sort(), ['app/a', 'app/b', 'app/lost'])
  const watch = await request(`${h.url}/api/v1/namespaces/app/services?watch=true&resourceVersion=${before.metadata.resourceVersion}`, { headers: kubeProxy })
  const events = readWatch(watch.body)

  h.simulator.restore(backup)
  const ended = await events.ended
  t.notOk(ended.error, 'the watch ended cleanly')
  const last = events.events[events.events.length - 1]
  t.same([last?.type, last?.object?.code, last?.object?.reason], ['ERROR', 410, 'Expired'], 'with 410 Expired: the client lists again')
  const after = await eventually(
    async () => {
      const listed = await list()
      return BigInt(listed.metadata.resourceVersion) < BigInt(before.metadata.resourceVersion) ? listed : undefined
    },
    20_000,
    "the hub's list to be at the restored history's version",
  )
  t.same(names(after).sort(), ['app/a', 'app/b'], "the restored history's Services, nothing of the lost one")
  h.simulator.create(service('c'))
  await eventually(async () => names(await list()).includes('app/c'), 10_000, "the new history's events to reach the cache")
})

t.test('writes the disk refuses: served from memory, readyz and a metric say the cache is not durable, and it heals once the disk takes them', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  h.simulator.create(configMap('app', 'cm'))
  // a file where the collection's directory must go: every write of it fails, as on a broken disk
  await mkdir(path.join(h.cacheDir, 'kubelet'), { recursive: true })
  const blocker = path.join(h.cacheDir, 'kubelet', 'configmaps.v1.core')
  await writeFile(blocker, 'in the way')
  t.equal((await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)).status, 200, 'online: answered')
  const readyz = async () => {
    const res = await request(`${h.hub.adminUrl}/v1/readyz`)
    return { status: res.statusCode, text: await res.body.text() }
  }
  const durableMetric = async () => /^outpost_cache_durable (\d)$/m.exec(await (await request(`${h.hub.adminUrl}/metrics`)).body.text())?.[1]
  // the free room is read (statfs) after the failure is known: until then readyz says "unknown free"
  await eventually(async () => /cache not durable.*\d+ free/.test((await readyz()).text), 10_000, 'readyz to say the cache is not durable, with the room free')
  const notDurable = await readyz()
  t.equal(notDurable.status, 503, 'readyz is not ok')
  t.match(notDurable.text, /cache not durable .*configmaps\.v1\.core.*needed \d+ bytes, \d+ free/, 'readyz says what is not on disk, and the room it needed')
  t.equal(await durableMetric(), '0', 'outpost_cache_durable 0')
  await rm(blocker)
  await eventually(async () => !/cache not durable/.test((await readyz()).text), 20_000, 'the retry to land and readyz to stop saying so')
  t.equal(await durableMetric(), '1', 'outpost_cache_durable 1')
  await goDark(h)
  t.equal((await getJson(`${h.url}/api/v1/namespaces/app/configmaps`)).body.items.length, 1, 'offline: the list, whole')
})
