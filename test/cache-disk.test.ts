import t from 'tap'
import { spawn } from 'node:child_process'
import { appendFile, mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises'
import { once } from 'node:events'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { DiskCache, ObjectTooLargeError } from '../lib/cache/disk.ts'
import type { CollectionMeta, DiskCacheOptions, DiskEntry } from '../lib/cache/disk.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'

/** Polls until check() is truthy. */
async function eventually(check: () => unknown, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

const log = pino({ level: process.env.OUTPOST_TEST_LOG ?? 'silent' })
const pods: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'pods' }
const nodes: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'nodes' }
const slices: ResourceKey = { component: 'kube-proxy', group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices' }

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-disk-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return path.join(dir, 'cache')
}

function jsonObject(namespace: string, name: string, resourceVersion: string, extra: Partial<CachedObject> = {}): CachedObject {
  return {
    apiVersion: 'v1',
    kind: namespace ? 'Pod' : 'Node',
    namespace,
    name,
    resourceVersion,
    format: 'json',
    body: Buffer.from(JSON.stringify({ kind: namespace ? 'Pod' : 'Node', apiVersion: 'v1', metadata: { name, namespace, resourceVersion } })),
    ...extra,
  }
}

const collectionDir = (dir: string, key: ResourceKey) => path.join(dir, key.component, `${key.resource}.${key.version}.${key.group || 'core'}`)
const journal = (dir: string, key: ResourceKey, gen = 0) => path.join(collectionDir(dir, key), `journal.${gen}`)

/** Opens a DiskCache that the test closes at its end (close is idempotent: a test may close it first). */
async function openDisk(t: { teardown(fn: () => unknown): void }, dir: string, options?: DiskCacheOptions): Promise<DiskCache> {
  const disk = await DiskCache.open(dir, log, options)
  t.teardown(() => disk.close())
  return disk
}

/** What a load gives: the objects by name, the metas by resource, the report. */
async function loadAll(t: { teardown(fn: () => unknown): void }, dir: string, options?: DiskCacheOptions) {
  const disk = await openDisk(t, dir, options)
  const objects = new Map<string, CachedObject>()
  const metas: CollectionMeta[] = []
  const report = await disk.load(
    e => objects.set(e.object.name, e.object),
    (_key, m) => metas.push(m),
  )
  return { disk, objects, metas, report }
}

/** Record boundaries of a journal or snapshot, read from its length prefixes ([u32 length][u32 crc32] then length bytes). */
function recordStarts(bytes: Buffer): number[] {
  const starts: number[] = []
  for (let at = 0; at + 8 <= bytes.length; at += 8 + bytes.readUInt32BE(at)) starts.push(at)
  return starts
}

t.test('round trip: json and protobuf, namespaced and cluster-scoped, fields, scopes and labels kept', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  const protobufBody = Buffer.from([0x0a, 0x05, 0x12, 0x03, 0x61, 0x62, 0x63, 0x00, 0xff, 0x0a, 0x0a])
  const objects: [ResourceKey, CachedObject][] = [
    [pods, jsonObject('default', 'web-1', '10', { fields: { 'spec.nodeName': 'kind-worker2' }, scopes: ['s1', 's2'], labels: { app: 'web' } })],
    [nodes, jsonObject('', 'kind-worker2', '11')],
    [
      slices,
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        namespace: 'kube-system',
        name: 'kube-dns-abcde',
        resourceVersion: '12',
        format: 'protobuf',
        body: protobufBody,
      },
    ],
    [
      { ...nodes, resource: 'clusterroles', group: 'rbac.authorization.k8s.io' },
      { ...jsonObject('', 'system:node-proxier', '13'), apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole' },
    ],
    [
      slices,
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        namespace: 'default',
        name: 'empty',
        resourceVersion: '14',
        format: 'protobuf',
        body: Buffer.alloc(0),
      },
    ],
  ]
  await Promise.all(objects.map(([key, object]) => disk.put(key, object)))
  t.same(disk.stats.writes, objects.length)
  t.ok((await stat(journal(dir, pods))).isFile(), 'layout: component/resource.version.group/journal.<gen>')
  t.ok((await stat(journal(dir, slices))).isFile())
  const meta = {
    listResourceVersion: '20',
    kind: 'PodList',
    apiVersion: 'v1',
    listed: [{ namespace: '', labelSelector: 'a=b', fieldSelector: '', resourceVersion: '20' }],
  }
  await disk.putCollectionMeta(pods, meta)
  t.same(await disk.readBody(pods, 'default', 'web-1'), objects[0][1].body, 'read back from the journal')
  await disk.close()

  const reopened = await openDisk(t, dir)
  const metas: unknown[] = []
  const entries: DiskEntry[] = []
  const report = await reopened.load(
    e => entries.push(e),
    (key, m) => metas.push([key.resource, m]),
  )
  t.same(report, { loaded: objects.length, failed: [] })
  t.same(metas, [['pods', meta]], 'the scope list comes back, with the kind of the list')
  for (const [key, object] of objects) {
    const found = entries.find(e => e.object.name === object.name && e.object.namespace === object.namespace)
    t.ok(found, `${object.namespace}/${object.name} loaded`)
    t.same(found!.key, key, 'key rebuilt from the path (core group as empty string)')
    t.same({ ...found!.object, body: undefined }, { ...object, body: undefined })
    t.ok(found!.object.body.equals(object.body), `${object.name}: body byte for byte`)
  }
  t.same(await reopened.readBody(slices, 'kube-system', 'kube-dns-abcde'), protobufBody, 'bodies read back by offset after a restart')
})

t.test('modes: directories 0700 (root chmodded at open), files 0600', async t => {
  const dir = await tempDir(t)
  await mkdir(dir, { mode: 0o755 })
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  const mode = async (p: string) => (await stat(p)).mode & 0o777
  t.equal(await mode(dir), 0o700, 'cache root')
  for (const d of ['kubelet', 'kubelet/pods.v1.core']) t.equal(await mode(path.join(dir, d)), 0o700, d)
  t.equal(await mode(journal(dir, pods)), 0o600, 'journal')
})

t.test('group commit: a burst of 2,000 objects is a few writes and a few syncs, all durable after flush', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  const puts = []
  for (let i = 0; i < 2000; i++) puts.push(disk.put(pods, jsonObject(`ns-${i % 10}`, `pod-${i}`, String(i))))
  await Promise.all(puts)
  await disk.flush()
  t.equal(disk.stats.writes, 2000)
  t.ok(disk.stats.appends <= 5, `${disk.stats.appends} write(s) to the journal`)
  t.ok(disk.stats.syncs <= 5, `${disk.stats.syncs} fdatasync(s)`)
  t.equal(disk.stats.errors, 0)
  await disk.close()
  t.same((await loadAll(t, dir)).report, { loaded: 2000, failed: [] })
})

t.test('puts and removes apply in order; removing a missing object is fine', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  const all = []
  for (let rv = 1; rv <= 100; rv++) all.push(disk.put(pods, jsonObject('default', 'hot', String(rv))))
  all.push(disk.put(pods, jsonObject('default', 'b', '1')), disk.remove(pods, 'default', 'never-existed'), disk.remove(nodes, '', 'nothing-here'))
  all.push(disk.put(pods, jsonObject('default', 'c', '1')), disk.remove(pods, 'default', 'c'), disk.put(pods, jsonObject('default', 'c', '3')))
  all.push(disk.put(pods, jsonObject('default', 'd', '1')), disk.remove(pods, 'default', 'd'))
  await Promise.all(all)
  t.equal(await disk.readBody(pods, 'default', 'd'), undefined, 'removed')
  t.match((await disk.readBody(pods, 'default', 'hot'))?.toString(), /"resourceVersion":"100"/, 'the last put wins')
  await disk.close()
  const { objects, report } = await loadAll(t, dir)
  t.same(report.failed, [])
  t.same([...objects.values()].map(o => `${o.name}@${o.resourceVersion}`).sort(), ['b@1', 'c@3', 'hot@100'])
})

t.test('component and resource names are validated; nothing escapes the cache directory', async t => {
  const root = await tempDir(t)
  const dir = path.join(root, 'inner')
  const disk = await openDisk(t, dir)
  const bad: [string, () => Promise<void>][] = [
    ['component ..', () => disk.put({ ...pods, component: '..' }, jsonObject('default', 'a', '1'))],
    ['component empty', () => disk.put({ ...pods, component: '' }, jsonObject('default', 'a', '1'))],
    ['component with a space', () => disk.put({ ...pods, component: 'mozilla 5.0' }, jsonObject('default', 'a', '1'))],
    ['component with a slash', () => disk.put({ ...pods, component: 'a/../b' }, jsonObject('default', 'a', '1'))],
    ['resource a/b', () => disk.put({ ...pods, resource: 'a/../../b' }, jsonObject('default', 'a', '1'))],
    ['group with slash', () => disk.put({ ...pods, group: 'x/y' }, jsonObject('default', 'a', '1'))],
    ['remove from component ..', () => disk.remove({ ...pods, component: '..' }, 'default', 'x')],
  ]
  for (const [what, attempt] of bad) await t.rejects(attempt(), /disk cache: invalid/, what)
  await t.rejects(disk.put(pods, jsonObject('default', '', '1')), /needs a name/)
  await disk.flush()
  t.same(await readdir(root), ['inner'], 'nothing written next to the cache directory')
  t.same((await readdir(dir)).sort(), ['.lock', '.lock.sock'], 'nothing written inside it either, but the lock (its socket and the pid)')
  // names are data in the journal, not paths: anything the apiserver allows is kept as it is
  for (const name of ['kube-proxy-x7k2p.17a2b3c4d5e6f7a8', 'system:node-proxier', '../not-a-path', 'a'.repeat(253)]) {
    await disk.put(pods, jsonObject('kube-system', name, '1'))
  }
  await disk.close()
  t.same((await loadAll(t, dir)).report, { loaded: 4, failed: [] })
})

t.test('a torn tail is cut at load: the records before it stand, and writing goes on after them', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.put(pods, jsonObject('default', 'b', '2'))
  await disk.close()
  const whole = (await stat(journal(dir, pods))).size
  // half a record: a length that promises more than there is
  const partial = Buffer.alloc(20)
  partial.writeUInt32BE(500, 0)
  await appendFile(journal(dir, pods), partial)
  const reopened = await openDisk(t, dir)
  const names: string[] = []
  t.same(await reopened.load(e => names.push(e.object.name)), { loaded: 2, failed: [] }, 'not a failure: the last write never finished')
  t.same(names.sort(), ['a', 'b'])
  t.equal((await stat(journal(dir, pods))).size, whole, 'the tail is cut off')
  await reopened.put(pods, jsonObject('default', 'c', '3'))
  await reopened.close()
  const again = await loadAll(t, dir)
  t.same(again.report, { loaded: 3, failed: [] })
  t.same([...again.objects.keys()].sort(), ['a', 'b', 'c'])
})

t.test('damage inside a journal is reported; what came before loads, and the scope list is dropped', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.putCollectionMeta(pods, { listResourceVersion: '1', listed: [{ namespace: '', labelSelector: '', fieldSelector: '', resourceVersion: '1' }] })
  await disk.put(pods, jsonObject('default', 'b', '2'))
  await disk.put(pods, jsonObject('default', 'c', '3'))
  await disk.close()
  const bytes = await readFile(journal(dir, pods))
  const second = bytes.indexOf('"name":"b"')
  bytes[second + 9] ^= 0xff // a flipped byte in b's record
  await writeFile(journal(dir, pods), bytes)
  const { disk: reopened, objects, metas, report } = await loadAll(t, dir)
  t.same([...objects.keys()], ['a'], 'the records before the damage')
  t.match(report.failed, [{ path: journal(dir, pods), reason: /damaged at byte/, key: pods }], 'reported with its collection')
  t.same(metas, [{ listResourceVersion: '1', listed: [] }], 'no scope listed whole: lists answer as never listed rather than short')
  await reopened.put(pods, jsonObject('default', 'd', '4'))
  await reopened.close()
  const after = await loadAll(t, dir)
  t.same([...after.objects.keys()].sort(), ['a', 'd'], 'writing goes on after the damage')
  t.same(after.report.failed, [], 'the damage is not found again')
  t.ok((await readdir(collectionDir(dir, pods))).includes('journal.0.damaged'), 'the damaged journal is kept aside')
})

t.test('an empty or missing cache directory loads nothing', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  t.same(await disk.load(() => t.fail('no entries')), { loaded: 0, failed: [] })
})

t.test('compaction: a journal grown past its live data becomes a snapshot; nothing is lost, old files go', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  const pad = 'x'.repeat(20_000)
  // 400 versions of 20 objects: 8 MB of journal, 400 KB live
  for (let round = 0; round < 20; round++) {
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        disk.put(pods, jsonObject('default', `p-${i}`, String(round * 100 + i), { body: Buffer.from(JSON.stringify({ round, i, pad })) })),
      ),
    )
  }
  await eventually(() => disk.stats.compactions >= 1, 10_000, 'a compaction')
  await disk.put(pods, jsonObject('default', 'after', '9999'))
  await disk.flush()
  const files = await readdir(path.dirname(journal(dir, pods)))
  t.ok(
    files.some(f => /^snapshot\.\d+$/.test(f)),
    `a snapshot (${files.join(', ')})`,
  )
  t.notOk(files.includes('journal.0'), 'the first journal is gone')
  t.same(JSON.parse((await disk.readBody(pods, 'default', 'p-3'))!.toString()).round, 19, 'bodies read from the snapshot')
  await disk.close()
  const { objects: loaded, report } = await loadAll(t, dir)
  t.same(report.failed, [])
  t.equal(loaded.size, 21)
  t.equal(JSON.parse(loaded.get('p-7')!.body.toString()).round, 19, 'the newest version of each')
  t.ok(loaded.has('after'), 'and what was written after the compaction')
})

t.test('compaction copies live records scattered over a snapshot and a journal, in runs, each one whole', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  const count = 300
  // every 7th object is 100 KB (a dead one is a gap too wide to read over), the rest 20 KB; runs
  // of live records longer than a read's 4 MiB are cut
  const bodyOf = (i: number, round: number) => Buffer.from(JSON.stringify({ i, round, pad: String(i % 10).repeat(i % 7 === 0 ? 100_000 : 20_000) }))
  const last = new Map<number, number>()
  const write = async (indexes: number[], round: number) => {
    await Promise.all(indexes.map(i => disk.put(pods, jsonObject('default', `o-${i}`, String(round * 1000 + i), { body: bodyOf(i, round) }))))
    for (const i of indexes) last.set(i, round)
  }
  const all = Array.from({ length: count }, (_, i) => i)
  await write(all, 0)
  // rewrite some (every 3rd, then every 5th) until a first compaction, then others until a second
  for (let round = 1; disk.stats.compactions < 1 && round < 40; round++) {
    await write(
      all.filter(i => i % 3 === 0),
      round,
    )
    await disk.flush()
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  await eventually(() => disk.stats.compactions >= 1, 10_000, 'a first compaction')
  for (let round = 100; disk.stats.compactions < 2 && round < 140; round++) {
    await write(
      all.filter(i => i % 5 === 0),
      round,
    )
    await disk.flush()
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  await eventually(() => disk.stats.compactions >= 2, 10_000, 'a second compaction')
  await disk.flush()
  for (const i of [0, 1, 3, 5, 7, 14, 15, 299]) t.same(await disk.readBody(pods, 'default', `o-${i}`), bodyOf(i, last.get(i)!), `o-${i} read back`)
  await disk.close()
  const { objects: loaded, report } = await loadAll(t, dir)
  t.same(report.failed, [])
  t.equal(loaded.size, count)
  const wrong = all.filter(i => !loaded.get(`o-${i}`)?.body.equals(bodyOf(i, last.get(i)!)))
  t.same(wrong, [], 'every object reloads at its last version')
})

t.test('crash safety: SIGKILL mid-burst leaves only whole records, every acknowledged version present', async t => {
  const dir = await tempDir(t)
  const script = fileURLToPath(new URL('./helpers/disk-burst.ts', import.meta.url))
  const child = spawn(process.execPath, ['--import', 'tsx', script, dir], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const acked = new Map<string, number>()
  let acks = 0
  let buffered = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk
    const lines = buffered.split('\n')
    buffered = lines.pop()!
    for (const line of lines) {
      const m = /^ack (\S*\/\S+) (\d+)$/.exec(line)
      if (!m) continue
      acks++
      acked.set(m[1], Math.max(acked.get(m[1]) ?? 0, Number(m[2])))
    }
  })
  const exited = once(child, 'exit')
  await eventually(() => acks >= 1500 || child.exitCode !== null, 15_000, '1500 acknowledged puts')
  t.equal(child.exitCode, null, 'the writer was still running')
  child.kill('SIGKILL')
  const [, signal] = await exited
  t.equal(signal, 'SIGKILL')
  // Lines the child wrote before it died are all in the pipe; 'exit' may come before the last 'data'.
  if (!child.stdout.readableEnded) await once(child.stdout, 'end')
  t.ok(acks >= 1500, `${acks} acknowledged puts, ${acked.size} distinct objects`)

  const disk = await openDisk(t, dir)
  const loaded = new Map<string, number>()
  const report = await disk.load(({ object }) => {
    if (object.format === 'json') JSON.parse(object.body.toString())
    loaded.set(`${object.namespace}/${object.name}`, Number(object.resourceVersion))
  })
  t.same(report.failed, [], 'every record parses (a torn tail would be cut, not reported)')
  let missing = 0
  for (const [id, rv] of acked) {
    const got = loaded.get(id)
    if (got === undefined || got < rv) {
      missing++
      t.fail(`${id}: acknowledged ${rv}, on disk ${got}`)
    }
  }
  t.equal(missing, 0, 'every acknowledged object present with at least its acknowledged version')
  t.ok(disk.stats.writes === 0, 'loading wrote nothing')
})

t.test('a journal closed while it had unsynced writes (a failed write, a compaction switch) does not hold flush() or spin', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  // the state a write failure or a compaction's switch leaves: written, not synced, journal closed
  const files = (disk as any).collections.get('kubelet/pods.v1.core')
  await files.journal.close()
  files.journal = undefined
  files.dirty = true
  // a flush that hung would end the test at tap's timeout
  await disk.flush()
  t.pass('flushed')
  const cpu = process.cpuUsage()
  await new Promise(resolve => setTimeout(resolve, 300))
  const used = process.cpuUsage(cpu)
  t.ok(used.user + used.system < 200_000, `idle afterwards (${Math.round((used.user + used.system) / 1000)} ms of CPU in 300 ms)`)
})

const everyPod = { namespace: '', labelSelector: '', fieldSelector: '', resourceVersion: '300' }

t.test('a batch stands or falls whole: one torn at the tail is cut, none of its records applied', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'before', '1'))
  const beforeBatch = (await stat(journal(dir, pods))).size
  await disk.write(pods, [
    ...['a', 'b', 'c', 'd'].map(name => ({ t: 'put' as const, object: jsonObject('default', name, '2') })),
    { t: 'remove', namespace: 'default', name: 'before' },
    { t: 'meta', meta: { listResourceVersion: '2', listed: [{ ...everyPod, resourceVersion: '2' }] } },
  ])
  await disk.close()
  // a kill in the middle of the batch's write: its first records whole, the rest never written
  const bytes = await readFile(journal(dir, pods))
  const starts = recordStarts(bytes).filter(at => at >= beforeBatch)
  t.ok(starts.length >= 6, `the batch is ${starts.length} records`)
  await writeFile(journal(dir, pods), bytes.subarray(0, starts[4]))
  const { disk: reopened, objects, metas, report } = await loadAll(t, dir)
  t.same(report.failed, [], 'a torn tail, not damage')
  t.same([...objects.keys()], ['before'], 'nothing of the batch: not its puts, not its remove')
  t.same(metas, [], 'nor its scope list')
  t.equal((await stat(journal(dir, pods))).size, beforeBatch, 'cut back to before the batch')
  await reopened.putAll(pods, [jsonObject('default', 'e', '3'), jsonObject('default', 'f', '3')])
  await reopened.close()
  t.same([...(await loadAll(t, dir)).objects.keys()].sort(), ['before', 'e', 'f'], 'writing goes on after the cut')
})

t.test('a batch damaged inside (not torn): its whole records before the damage load, the rest is lost and reported, no scope is listed', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'before', '1'))
  await disk.putCollectionMeta(pods, { listResourceVersion: '1', listed: [{ ...everyPod, resourceVersion: '1' }] })
  await disk.putAll(
    pods,
    ['a', 'b', 'c'].map(name => jsonObject('default', name, '2')),
  )
  await disk.put(pods, jsonObject('default', 'after', '3'))
  await disk.close()
  const bytes = await readFile(journal(dir, pods))
  bytes[bytes.indexOf('"name":"c"') + 8] ^= 0xff
  await writeFile(journal(dir, pods), bytes)
  const { objects, metas, report } = await loadAll(t, dir)
  t.same([...objects.keys()], ['before', 'a', 'b'], 'each whole record is an object the apiserver sent')
  t.match(report.failed, [{ reason: /damaged at byte/, key: pods }], 'c and what follows are lost: reported')
  t.same(metas, [{ listResourceVersion: '1', listed: [] }], 'no scope is believed whole')
})

t.test('a damaged snapshot is not believed: no scope listed, though a later journal says so; a scope listed after the load is believed', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir, { compactAfterBytes: 1 })
  const names = Array.from({ length: 100 }, (_, i) => `p-${String(i).padStart(3, '0')}`)
  await disk.putAll(
    pods,
    names.map(name => jsonObject('default', name, '1')),
  )
  await disk.putAll(
    pods,
    names.map(name => jsonObject('default', name, '2')),
  )
  await eventually(() => disk.stats.compactions >= 1, 10_000, 'a compaction into a snapshot')
  const listed = { listResourceVersion: '300', kind: 'Pod', apiVersion: 'v1', listed: [everyPod] }
  await disk.putCollectionMeta(pods, listed)
  await disk.close()
  const files = await readdir(collectionDir(dir, pods))
  const snapshot = files.find(f => /^snapshot\.\d+$/.test(f))!
  t.ok(snapshot, `a snapshot (${files.join(', ')})`)
  const snapshotPath = path.join(collectionDir(dir, pods), snapshot)
  const bytes = await readFile(snapshotPath)
  bytes[bytes.indexOf('"name":"p-050"') + 9] ^= 0xff // mid-file: p-050's header
  await writeFile(snapshotPath, bytes)

  const first = await loadAll(t, dir)
  t.same([...first.objects.keys()], names.slice(0, 50), 'the objects before the damage')
  t.match(first.report.failed, [{ path: snapshotPath, reason: /damaged at byte/, key: pods }], 'reported with its collection')
  t.same(first.metas, [{ ...listed, listed: [] }], "the journal's scope list is not believed; the kind is kept")
  await first.disk.close()
  const after = await readdir(collectionDir(dir, pods))
  t.ok(after.includes(`${snapshot}.damaged`), `the damaged snapshot is kept aside (${after.join(', ')})`)
  t.notOk(after.includes(snapshot), 'and no longer read')

  const second = await loadAll(t, dir)
  t.same(second.report.failed, [], 'the good records were rewritten: no damage left to find')
  t.same([...second.objects.keys()].sort(), names.slice(0, 50))
  t.same(second.metas, [{ ...listed, listed: [] }], 'still nothing listed whole')
  await second.disk.putCollectionMeta(pods, listed)
  await second.disk.close()
  t.same((await loadAll(t, dir)).metas, [listed], 'a scope listed after the damage was dealt with is believed')
})

t.test('a length field damaged mid-journal is damage, not a torn tail to cut silently', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.putCollectionMeta(pods, { listResourceVersion: '1', listed: [{ ...everyPod, resourceVersion: '1' }] })
  await disk.put(pods, jsonObject('default', 'b', '2'))
  await disk.put(pods, jsonObject('default', 'c', '3'))
  await disk.close()
  const bytes = await readFile(journal(dir, pods))
  const b = recordStarts(bytes)[2]
  bytes[b + 2] ^= 0x01 // b's length now reaches past the end of the file
  await writeFile(journal(dir, pods), bytes)
  const { objects, metas, report } = await loadAll(t, dir)
  t.same([...objects.keys()], ['a'])
  t.match(report.failed, [{ reason: /damaged at byte/, key: pods }], 'c was lost: that is reported')
  t.same(metas, [{ listResourceVersion: '1', listed: [] }], 'and no scope is listed whole')
})

t.test('a tail of zeros (a power cut after the file grew) is a torn tail, not damage', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.putCollectionMeta(pods, { listResourceVersion: '1', listed: [{ ...everyPod, resourceVersion: '1' }] })
  await disk.close()
  const whole = (await stat(journal(dir, pods))).size
  await appendFile(journal(dir, pods), Buffer.alloc(4096))
  const { objects, metas, report } = await loadAll(t, dir)
  t.same(report.failed, [])
  t.same([...objects.keys()], ['a'])
  t.equal(metas[0]?.listed.length, 1, 'the scope stays listed')
  t.equal((await stat(journal(dir, pods))).size, whole, 'the zeros are cut')
})

t.test('one limit: an object over it is refused whole, nothing of its batch written; what follows loads', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  const huge = jsonObject('default', 'huge', '1', { body: Buffer.alloc(65 * 1024 * 1024, 0x61) })
  t.notOk(disk.fits(huge), 'fits() says so before a write')
  const refused = await disk.put(pods, huge).then(
    () => undefined,
    (error: unknown) => error,
  )
  t.ok(refused instanceof ObjectTooLargeError, 'put rejects with ObjectTooLargeError')
  t.match(refused, { namespace: 'default', objectName: 'huge', limit: 64 * 1024 * 1024 })
  t.ok((refused as ObjectTooLargeError).bytes > 65 * 1024 * 1024)
  const batch = await disk.putAll(pods, [jsonObject('default', 'with-huge', '2'), huge]).then(
    () => undefined,
    (error: unknown) => error,
  )
  t.ok(batch instanceof ObjectTooLargeError, 'so does a batch with it')
  const nearly = jsonObject('default', 'nearly', '3', { body: Buffer.alloc(64 * 1024 * 1024 - 4096, 0x62) })
  t.ok(disk.fits(nearly), 'an object just under the limit fits')
  await disk.put(pods, nearly)
  for (let i = 0; i < 5; i++) await disk.put(pods, jsonObject('default', `after-${i}`, String(10 + i)))
  await disk.close()
  const { objects, report } = await loadAll(t, dir)
  t.same(report.failed, [], 'what was written loads')
  t.same(
    [...objects.keys()].sort(),
    ['after-0', 'after-1', 'after-2', 'after-3', 'after-4', 'nearly'],
    'the objects after the refused one, and none of its batch',
  )
  t.ok(objects.get('nearly')!.body.equals(nearly.body), 'the one just under the limit, byte for byte')
})

t.test('one limit: around it, whatever the writer takes the loader loads, and the writer refuses the rest', async t => {
  const dir = await tempDir(t)
  const limit = 2_000
  const disk = await openDisk(t, dir, { maxRecordBytes: limit })
  const written: string[] = []
  const refused: string[] = []
  for (let size = limit - 400; size <= limit + 10; size += 3) {
    const object = jsonObject('default', `s-${size}`, String(size), { body: Buffer.alloc(size, 0x63) })
    const fits = disk.fits(object)
    const result = await disk.put(pods, object).then(
      () => 'written',
      (error: unknown) => (error instanceof ObjectTooLargeError ? 'refused' : String(error)),
    )
    t.equal(result, fits ? 'written' : 'refused', `${size} bytes: fits() and the write agree`)
    ;(result === 'written' ? written : refused).push(object.name)
  }
  t.ok(written.length > 0 && refused.length > 0, `${written.length} written, ${refused.length} refused`)
  await disk.close()
  const { objects, report } = await loadAll(t, dir, { maxRecordBytes: limit })
  t.same(report.failed, [])
  t.same([...objects.keys()].sort(), written.sort(), 'every record written is loaded')
})

t.test('close: a write after it rejects and opens no journal; the dir can be opened again', async t => {
  const dir = await tempDir(t)
  const disk = await openDisk(t, dir)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.close()
  await t.rejects(disk.put(nodes, jsonObject('', 'n', '2')), /disk cache closed/)
  await t.rejects(disk.put(pods, jsonObject('default', 'b', '2')), /disk cache closed/)
  await t.rejects(disk.writeState('topology', {}), /disk cache closed/)
  t.same(await readdir(path.join(dir, 'kubelet')), ['pods.v1.core'], 'no journal of a new collection')
  await disk.close()
  t.same([...(await loadAll(t, dir)).objects.keys()], ['a'], 'reopened: the lock was released')
})
