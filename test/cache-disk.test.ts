import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises'
import { once } from 'node:events'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { DiskCache } from '../lib/cache/disk.ts'
import type { DiskEntry } from '../lib/cache/disk.ts'
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

async function loadAll(disk: DiskCache) {
  const entries: DiskEntry[] = []
  const report = await disk.load(e => entries.push(e))
  const byPath = new Map(entries.map(e => [`${e.key.component}|${e.key.group}|${e.key.resource}|${e.object.namespace}/${e.object.name}`, e]))
  return { report, entries, byPath }
}

t.test('round trip: json and protobuf, namespaced and cluster-scoped, fields kept', async t => {
  const dir = await tempDir(t)
  const disk = await DiskCache.open(dir, log)
  const protobufBody = Buffer.from([0x0a, 0x05, 0x12, 0x03, 0x61, 0x62, 0x63, 0x00, 0xff, 0x0a, 0x0a])
  const objects: [ResourceKey, CachedObject][] = [
    [pods, jsonObject('default', 'web-1', '10', { fields: { 'spec.nodeName': 'kind-worker2' } })],
    [nodes, jsonObject('', 'kind-worker2', '11')],
    [slices, { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', namespace: 'kube-system', name: 'kube-dns-abcde', resourceVersion: '12', format: 'protobuf', body: protobufBody }],
    [{ ...nodes, resource: 'clusterroles', group: 'rbac.authorization.k8s.io' }, { ...jsonObject('', 'system:node-proxier', '13'), apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole' }],
    [slices, { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', namespace: 'default', name: 'empty', resourceVersion: '14', format: 'protobuf', body: Buffer.alloc(0) }],
  ]
  await Promise.all(objects.map(([key, object]) => disk.put(key, object)))
  t.same(disk.stats.writes, objects.length)
  t.ok(disk.stats.bytesWritten > 0)

  t.ok((await stat(path.join(dir, 'kubelet', 'pods.v1.core', 'default', 'web-1'))).isFile(), 'layout: component/resource.version.group/namespace/name')
  t.ok((await stat(path.join(dir, 'kubelet', 'nodes.v1.core', '_cluster', 'kind-worker2'))).isFile(), 'cluster-scoped objects under _cluster')
  t.ok((await stat(path.join(dir, 'kube-proxy', 'endpointslices.v1.discovery.k8s.io', 'kube-system', 'kube-dns-abcde'))).isFile())
  const raw = await readFile(path.join(dir, 'kubelet', 'pods.v1.core', 'default', 'web-1'), 'utf8')
  const [headerLine, ...rest] = raw.split('\n')
  t.match(JSON.parse(headerLine), { v: 1, apiVersion: 'v1', kind: 'Pod', namespace: 'default', name: 'web-1', resourceVersion: '10', format: 'json', fields: { 'spec.nodeName': 'kind-worker2' } })
  t.equal(rest.join('\n'), objects[0][1].body.toString(), 'body follows the header line')

  const reopened = await DiskCache.open(dir, log)
  const { report, entries } = await loadAll(reopened)
  t.same(report, { loaded: objects.length, failed: [] })
  for (const [key, object] of objects) {
    const found = entries.find(e => e.object.name === object.name && e.object.namespace === object.namespace)
    t.ok(found, `${object.namespace}/${object.name} loaded`)
    t.same(found!.key, key, 'key rebuilt from the path (core group as empty string)')
    t.same({ ...found!.object, body: undefined }, { ...object, body: undefined })
    t.ok(found!.object.body.equals(object.body), `${object.name}: body byte for byte`)
  }
})

t.test('modes: directories 0700 (root chmodded at open), files 0600', async t => {
  const dir = await tempDir(t)
  await mkdir(dir, { mode: 0o755 })
  const disk = await DiskCache.open(dir, log)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.put(nodes, jsonObject('', 'n', '1'))
  const mode = async (p: string) => (await stat(p)).mode & 0o777
  t.equal(await mode(dir), 0o700, 'cache root')
  for (const d of ['kubelet', 'kubelet/pods.v1.core', 'kubelet/pods.v1.core/default', 'kubelet/nodes.v1.core/_cluster']) {
    t.equal(await mode(path.join(dir, d)), 0o700, d)
  }
  t.equal(await mode(path.join(dir, 'kubelet/pods.v1.core/default/a')), 0o600, 'namespaced object file')
  t.equal(await mode(path.join(dir, 'kubelet/nodes.v1.core/_cluster/n')), 0o600, 'cluster-scoped object file')
  await disk.put(pods, jsonObject('default', 'a', '2'))
  t.equal(await mode(path.join(dir, 'kubelet/pods.v1.core/default/a')), 0o600, 'rewritten file')
})

t.test('coalescing: 100 puts of one key, the last wins, every promise resolves', async t => {
  const dir = await tempDir(t)
  const disk = await DiskCache.open(dir, log)
  const puts = []
  for (let rv = 1; rv <= 100; rv++) puts.push(disk.put(pods, jsonObject('default', 'hot', String(rv))))
  await Promise.all(puts)
  t.ok(disk.stats.writes < 100, `coalesced into ${disk.stats.writes} write(s)`)
  t.ok(disk.stats.writes >= 1)
  const { report, entries } = await loadAll(disk)
  t.equal(report.loaded, 1)
  t.equal(entries[0].object.resourceVersion, '100', 'newest version on disk')
  const files = await readdir(path.join(dir, 'kubelet/pods.v1.core/default'))
  t.same(files, ['hot'], 'no temp files left')
})

t.test('remove: ordered with puts to the same path; removing a missing object is fine', async t => {
  const dir = await tempDir(t)
  const disk = await DiskCache.open(dir, log)
  await disk.put(pods, jsonObject('default', 'a', '1'))
  await disk.put(pods, jsonObject('default', 'b', '1'))
  await disk.remove(pods, 'default', 'a')
  t.equal(disk.stats.removes, 1)
  await disk.remove(pods, 'default', 'never-existed')
  await disk.remove(nodes, '', 'nothing-here')
  // put, remove, put in one burst: the final put wins; put then remove: gone.
  void disk.put(pods, jsonObject('default', 'c', '1'))
  void disk.remove(pods, 'default', 'c')
  const last = disk.put(pods, jsonObject('default', 'c', '3'))
  void disk.put(pods, jsonObject('default', 'd', '1'))
  const gone = disk.remove(pods, 'default', 'd')
  await Promise.all([last, gone])
  await disk.flush()
  const { report, byPath } = await loadAll(disk)
  t.same(report.failed, [])
  t.same([...byPath.keys()].sort(), ['kubelet||pods|default/b', 'kubelet||pods|default/c'])
  t.equal(byPath.get('kubelet||pods|default/c')!.object.resourceVersion, '3')
})

t.test('path components are validated; nothing escapes the cache directory', async t => {
  const root = await tempDir(t)
  const dir = path.join(root, 'inner')
  const disk = await DiskCache.open(dir, log)
  const bad: [string, () => Promise<void>][] = [
    ['name ..', () => disk.put(pods, jsonObject('default', '..', '1'))],
    ['name .', () => disk.put(pods, jsonObject('default', '.', '1'))],
    ['name a/b', () => disk.put(pods, jsonObject('default', 'a/b', '1'))],
    ['name ../../escape', () => disk.put(pods, jsonObject('default', '../../escape', '1'))],
    ['name with NUL', () => disk.put(pods, jsonObject('default', 'a\0b', '1'))],
    ['name with backslash', () => disk.put(pods, jsonObject('default', 'a\\b', '1'))],
    // '%' is not allowed in Kubernetes names either; a literal %2F is refused, never decoded.
    ['name %2F', () => disk.put(pods, jsonObject('default', '..%2Fescape', '1'))],
    ['name %2F (leading letter)', () => disk.put(pods, jsonObject('default', 'a%2Fb', '1'))],
    ['name starting with a dot (temp file space)', () => disk.put(pods, jsonObject('default', '.a.tmp-123', '1'))],
    ['name in upper case', () => disk.put(pods, jsonObject('default', 'Web', '1'))],
    ['empty name', () => disk.put(pods, jsonObject('default', '', '1'))],
    ['name too long', () => disk.put(pods, jsonObject('default', 'a'.repeat(254), '1'))],
    ['namespace ..', () => disk.put(pods, jsonObject('..', 'a', '1'))],
    ['namespace _cluster', () => disk.put(pods, jsonObject('_cluster', 'a', '1'))],
    ['namespace a/b', () => disk.put(pods, jsonObject('a/b', 'a', '1'))],
    ['component ..', () => disk.put({ ...pods, component: '..' }, jsonObject('default', 'a', '1'))],
    ['component empty', () => disk.put({ ...pods, component: '' }, jsonObject('default', 'a', '1'))],
    ['component with a space', () => disk.put({ ...pods, component: 'mozilla 5.0' }, jsonObject('default', 'a', '1'))],
    ['resource a/b', () => disk.put({ ...pods, resource: 'a/../../b' }, jsonObject('default', 'a', '1'))],
    ['group with slash', () => disk.put({ ...pods, group: 'x/y' }, jsonObject('default', 'a', '1'))],
    ['remove ..', () => disk.remove(pods, 'default', '..')],
    ['remove namespace ../..', () => disk.remove(pods, '../..', 'x')],
  ]
  for (const [what, attempt] of bad) await t.rejects(attempt(), /disk cache: invalid/, what)
  await disk.flush()
  t.same(await readdir(root), ['inner'], 'nothing written next to the cache directory')
  t.same(await readdir(dir), [], 'nothing written inside it either')
  t.equal(disk.stats.writes, 0)

  // Real names that must work: DNS subdomains, event names, RBAC names with ':'
  for (const name of ['kube-proxy-x7k2p.17a2b3c4d5e6f7a8', 'system:node-proxier', 'a', '0', 'a'.repeat(253)]) {
    await disk.put(pods, jsonObject('kube-system', name, '1'))
  }
  const { report } = await loadAll(disk)
  t.same(report, { loaded: 5, failed: [] })
})

t.test('broken files are reported and skipped, never deleted; the rest load', async t => {
  const dir = await tempDir(t)
  const disk = await DiskCache.open(dir, log)
  for (const name of ['good-1', 'good-2', 'truncated', 'garbage', 'wrong-size', 'bad-json-body', 'wrong-name', 'no-newline']) {
    await disk.put(pods, jsonObject('default', name, '7'))
  }
  await disk.put(slices, { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', namespace: 'default', name: 'pb', resourceVersion: '8', format: 'protobuf', body: Buffer.from([1, 2, 3]) })
  const ns = path.join(dir, 'kubelet/pods.v1.core/default')
  const original = await readFile(path.join(ns, 'truncated'))
  await writeFile(path.join(ns, 'truncated'), original.subarray(0, original.length - 5))
  await writeFile(path.join(ns, 'garbage'), 'not a header at all\n{}')
  const header = (n: string, size: number) => JSON.stringify({ v: 1, apiVersion: 'v1', kind: 'Pod', namespace: 'default', name: n, resourceVersion: '7', format: 'json', size })
  await writeFile(path.join(ns, 'wrong-size'), header('wrong-size', 3) + '\n{}')
  await writeFile(path.join(ns, 'bad-json-body'), header('bad-json-body', 5) + '\n{"a":')
  await writeFile(path.join(ns, 'wrong-name'), header('someone-else', 2) + '\n{}')
  await writeFile(path.join(ns, 'no-newline'), '')
  await writeFile(path.join(ns, 'Upper'), header('Upper', 2) + '\n{}')
  await writeFile(path.join(dir, 'kubelet', 'stray-file'), 'x')
  await mkdir(path.join(dir, 'kubelet', 'nodots'))
  // a leftover temp file of an interrupted write is removed
  await writeFile(path.join(ns, '.good-1.tmp-abcdef012345'), 'half a wri')

  const reopened = await DiskCache.open(dir, log)
  const { report, byPath } = await loadAll(reopened)
  t.same([...byPath.keys()].sort(), ['kube-proxy|discovery.k8s.io|endpointslices|default/pb', 'kubelet||pods|default/good-1', 'kubelet||pods|default/good-2'])
  t.equal(report.loaded, 3)
  const reasons = Object.fromEntries(report.failed.map(f => [path.relative(dir, f.path), f.reason]))
  t.match(reasons, {
    'kubelet/pods.v1.core/default/truncated': /size mismatch/,
    'kubelet/pods.v1.core/default/garbage': /header is not JSON/,
    'kubelet/pods.v1.core/default/wrong-size': /size mismatch: header says 3 bytes, body has 2/,
    'kubelet/pods.v1.core/default/bad-json-body': /body is not JSON/,
    'kubelet/pods.v1.core/default/wrong-name': /does not match the file name/,
    'kubelet/pods.v1.core/default/no-newline': /no header line/,
    'kubelet/pods.v1.core/default/Upper': /not a valid object name/,
    'kubelet/stray-file': /unexpected file/,
    'kubelet/nodots': /not a resource directory name/,
  })
  t.equal(report.failed.length, 9)
  const left = (await readdir(ns)).sort()
  t.same(left, ['Upper', 'bad-json-body', 'garbage', 'good-1', 'good-2', 'no-newline', 'truncated', 'wrong-name', 'wrong-size'], 'broken files left in place, temp file removed')

  // a loader that throws on one entry: reported, the others still load
  const names: string[] = []
  const again = await reopened.load(e => {
    if (e.object.name === 'good-2') throw new Error('nope')
    names.push(e.object.name)
  })
  t.equal(again.loaded, 2)
  t.match(again.failed.find(f => f.path.endsWith('good-2')), { reason: /rejected by the loader: nope/ })
})

t.test('an empty or missing cache directory loads nothing', async t => {
  const dir = await tempDir(t)
  const disk = await DiskCache.open(dir, log)
  t.same(await disk.load(() => t.fail('no entries')), { loaded: 0, failed: [] })
})

t.test('throughput: a burst of 2,000 objects, all durable after flush', async t => {
  const dir = await tempDir(t)
  const disk = await DiskCache.open(dir, log)
  const puts = []
  for (let i = 0; i < 2000; i++) puts.push(disk.put(pods, jsonObject(`ns-${i % 10}`, `pod-${i}`, String(i))))
  await disk.flush()
  const results = await Promise.allSettled(puts)
  t.equal(results.filter(r => r.status === 'rejected').length, 0)
  t.equal(disk.stats.writes, 2000)
  t.equal(disk.stats.errors, 0)
  const { report } = await loadAll(disk)
  t.same(report, { loaded: 2000, failed: [] })
})

async function countTmp(dir: string): Promise<number> {
  let count = 0
  for (const resource of ['pods.v1.core', 'nodes.v1.core']) {
    const base = path.join(dir, 'kubelet', resource)
    for (const ns of await readdir(base)) {
      for (const f of await readdir(path.join(base, ns))) if (f.includes('.tmp-')) count++
    }
  }
  return count
}

t.test('crash safety: SIGKILL mid-burst leaves only whole files, every acknowledged version present', async t => {
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

  const tmpBefore = await countTmp(dir)
  t.comment(`${tmpBefore} temp file(s) of interrupted writes on disk after the kill`)
  const disk = await DiskCache.open(dir, log)
  const loaded = new Map<string, number>()
  const report = await disk.load(({ object }) => {
    if (object.format === 'json') JSON.parse(object.body.toString())
    loaded.set(`${object.namespace}/${object.name}`, Number(object.resourceVersion))
  })
  t.same(report.failed, [], 'every file parses')
  let missing = 0
  for (const [id, rv] of acked) {
    const got = loaded.get(id)
    if (got === undefined || got < rv) {
      missing++
      t.fail(`${id}: acknowledged ${rv}, on disk ${got}`)
    }
  }
  t.equal(missing, 0, 'every acknowledged object present with at least its acknowledged version')
  t.equal(await countTmp(dir), 0, 'leftover temp files removed at load')
})
