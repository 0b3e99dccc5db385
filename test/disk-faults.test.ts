// Disk faults lose nothing: every write the disk cache acknowledged is there after a restart, and
// a collection is at a state it had, whatever the disk did (a short write, ENOSPC, EIO, a failed
// fsync, a read-only root) and wherever a kill -9 came (at each step of an append and of a
// compaction). Through a faulty DiskIO (test/helpers/faulty-io.ts), and on a real small tmpfs
// filled up during a compaction.
import t from 'tap'
import type { Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, rm, statfs, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { CacheDirUnusableError, DiskCache } from '../lib/cache/disk.ts'
import type { DiskCacheOptions, DiskOp } from '../lib/cache/disk.ts'
import { compactionBackoffMs } from '../lib/cache/disk-files.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { FaultyIO } from './helpers/faulty-io.ts'
import type { FaultPlan, WriteFault } from './helpers/faulty-io.ts'
import { eventually } from './helpers/hub.ts'

const quiet = pino({ level: 'silent' })
const pods: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'pods' }
const nodes: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'nodes' }
const everyPod = { namespace: '', labelSelector: '', fieldSelector: '' }

/** A temp dir; `inMemory` puts it on /dev/shm where there is one (hundreds of runs, without the fsyncs' wait). */
async function scratch(t: Test, inMemory = false): Promise<string> {
  const parent = inMemory && existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
  const dir = await mkdtemp(path.join(parent, 'outpost-faults-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** A logger whose lines the test reads. */
function capturedLog(): { log: pino.Logger; lines: { level: number; msg: string; [field: string]: unknown }[] } {
  const lines: { level: number; msg: string }[] = []
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
  return { log, lines }
}
const errors = <Line extends { level: number }>(lines: Line[]) => lines.filter(l => l.level >= 50)
const infos = (lines: { level: number; msg: string }[], about: RegExp) => lines.filter(l => l.level === 30 && about.test(l.msg))

function object(kind: string, namespace: string, name: string, resourceVersion: number, pad: number): CachedObject {
  const body = Buffer.from(
    JSON.stringify({ kind, apiVersion: 'v1', metadata: { name, namespace, resourceVersion: String(resourceVersion) }, pad: 'x'.repeat(pad) }),
  )
  return { apiVersion: 'v1', kind, namespace, name, resourceVersion: String(resourceVersion), format: 'json', body }
}

/**
 * The scenario: round r lists kubelet's pods whole (one batch: the pods of round r, removals of
 * those gone since round r-1, the scope list at version r) and puts one Node by itself; every
 * fourth round also writes a state file. Enough rounds for compactions of both collections.
 */
const rounds = 10
const podsOf = (r: number) =>
  Array.from({ length: 8 }, (_, i) => i)
    .filter(i => (i + r) % 4 !== 0)
    .map(i => object('Pod', 'default', `p-${i}`, 100 * r + i, 250))
function roundBatch(r: number): DiskOp[] {
  const now = new Set(podsOf(r).map(p => p.name))
  const gone = r === 0 ? [] : podsOf(r - 1).filter(p => !now.has(p.name))
  return [
    ...podsOf(r).map(o => ({ t: 'put' as const, object: o })),
    ...gone.map(p => ({ t: 'remove' as const, namespace: p.namespace, name: p.name })),
    { t: 'meta', meta: { listResourceVersion: String(r), kind: 'Pod', apiVersion: 'v1', listed: [{ ...everyPod, resourceVersion: String(r) }] } },
  ]
}
const nodeOf = (r: number) => object('Node', '', `n-${r % 3}`, r, 700)

interface Acknowledged {
  batch: number
  nodes: Map<string, number>
  state: number
}

/** Runs the scenario until its end or until `stopped` (a kill); returns what was acknowledged. */
async function runScenario(disk: DiskCache, stopped: Promise<void>): Promise<Acknowledged> {
  const acked: Acknowledged = { batch: -1, nodes: new Map(), state: -1 }
  const end = stopped.then(() => 'stopped' as const)
  const settle = (p: Promise<unknown>) =>
    Promise.race([
      p.then(
        () => 'ok' as const,
        () => 'failed' as const,
      ),
      end,
    ])
  for (let r = 0; r < rounds; r++) {
    const writes = [settle(disk.write(pods, roundBatch(r))), settle(disk.put(nodes, nodeOf(r)))]
    if (r % 4 === 3) writes.push(settle(disk.writeState('topology', { round: r })))
    const [batch, node, state] = await Promise.all(writes)
    if (batch === 'ok') acked.batch = r
    if (node === 'ok') acked.nodes.set(nodeOf(r).name, r)
    if (state === 'ok') acked.state = r
    if ([batch, node, state].includes('stopped')) return acked
  }
  await settle(disk.flush())
  return acked
}

/**
 * A fresh DiskCache (the real filesystem) on the dir: what it loads must hold every acknowledged
 * write; the pods collection must be exactly the state of the round its scope list says, at least
 * the last acknowledged one (or, with no scope list, empty and none acknowledged). Returns what is wrong.
 */
async function problemsAfterRestart(dir: string, acked: Acknowledged, options?: DiskCacheOptions): Promise<string[]> {
  const problems: string[] = []
  const disk = await DiskCache.open(dir, quiet, options)
  try {
    const loaded = { pods: new Map<string, string>(), nodes: new Map<string, number>() }
    let podMeta: { listResourceVersion: string; listed: unknown[] } | undefined
    const report = await disk.load(
      ({ key, object }) => {
        if (key.resource === 'pods') loaded.pods.set(object.name, object.resourceVersion)
        else loaded.nodes.set(object.name, Number(object.resourceVersion))
        if (!JSON.parse(object.body.toString()).metadata) problems.push(`${object.name}: a body that is not the object`)
      },
      (key, meta) => {
        if (key.resource === 'pods') podMeta = meta
      },
    )
    if (report.failed.length > 0) problems.push(`load failures: ${report.failed.map(f => f.reason).join('; ')}`)
    if (podMeta) {
      const round = Number(podMeta.listResourceVersion)
      const expected = new Map(podsOf(round).map(p => [p.name, p.resourceVersion]))
      if (podMeta.listed.length !== 1) problems.push(`pods: ${podMeta.listed.length} scopes listed`)
      if (round < acked.batch) problems.push(`pods: at round ${round}, but round ${acked.batch} was acknowledged`)
      if (JSON.stringify([...loaded.pods].sort()) !== JSON.stringify([...expected].sort()))
        problems.push(`pods: not the state of round ${round}: ${JSON.stringify([...loaded.pods])}`)
    } else {
      if (acked.batch >= 0) problems.push(`pods: no scope list, but round ${acked.batch} was acknowledged`)
      if (loaded.pods.size > 0) problems.push(`pods: ${loaded.pods.size} objects without the batch that wrote them`)
    }
    for (const [name, rv] of acked.nodes)
      if (!((loaded.nodes.get(name) ?? -1) >= rv)) problems.push(`${name}: acknowledged at ${rv}, loaded at ${loaded.nodes.get(name)}`)
    const state = (await disk.readState('topology')) as { round: number } | undefined
    if (acked.state >= 0 && !(state && state.round >= acked.state)) problems.push(`state: acknowledged round ${acked.state}, read ${JSON.stringify(state)}`)
  } finally {
    await disk.close()
  }
  return problems
}

const small: DiskCacheOptions = { compactAfterBytes: 4096 }

/** One run: the scenario through a faulty io, stopped (abandoned) if it froze, then checked from a restart. */
async function faultyRun(base: string, name: string, plan: FaultPlan): Promise<{ problems: string[]; io: FaultyIO; compactions: number }> {
  const dir = path.join(base, name)
  const io = new FaultyIO({ ...plan, armLater: true })
  const disk = await DiskCache.open(dir, quiet, { ...small, io })
  io.arm()
  const acked = await runScenario(disk, io.frozen)
  // a kill may come while it closes, too
  await Promise.race([disk.close(), io.frozen])
  // read once closed: close waits for a compaction under way (on a slow disk one may outlast the scenario)
  const compactions = disk.stats.compactions
  if (io.isFrozen) {
    await disk.abandon()
    await io.closeAll()
  }
  const problems = (await problemsAfterRestart(dir, acked, small)).map(p => `${name}: ${p}`)
  await rm(dir, { recursive: true, force: true })
  return { problems, io, compactions }
}

t.test('the scenario without faults: compactions happen, and the checks pass (the reference for the runs below)', async t => {
  const base = await scratch(t)
  const { problems, io, compactions } = await faultyRun(base, 'clean', {})
  t.same(problems, [])
  t.ok(compactions >= 2, `${compactions} compactions`)
  t.ok(
    io.trace.some(op => /^writev .*snapshot\.\d+\.tmp$/.test(op)),
    'snapshots written',
  )
})

t.test('kill -9 at each step of appends and compactions: every acknowledged write is there, each collection at a state it had', async t => {
  const base = await scratch(t, true)
  const reference = await faultyRun(base, 'reference', {})
  const steps = reference.io.ops
  t.ok(steps > 50, `${steps} io steps in the scenario`)
  const problems: string[] = []
  let runs = 0
  for (let n = 1; n <= steps + 1; n++) {
    // a kill in a write: none, half or all of it reached the file
    const tears = reference.io.trace[n - 1]?.startsWith('writev') ? [0, 0.5, 1] : [0.5]
    for (const tear of tears) {
      problems.push(...(await faultyRun(base, `kill-${n}-${tear}`, { freezeAt: n, tear })).problems)
      runs++
    }
  }
  t.same(problems, [], `${runs} kills`)
})

const writeFaults: WriteFault[] = ['short', 'short-then-ENOSPC', 'ENOSPC', 'EIO']

t.test('a short write, ENOSPC or EIO at each write (appends, snapshots, state files), with and without a kill right after it', async t => {
  const base = await scratch(t, true)
  const reference = await faultyRun(base, 'reference', {})
  const writes = reference.io.writes
  const problems: string[] = []
  let runs = 0
  for (const fault of writeFaults) {
    for (let nth = 1; nth <= writes; nth++) {
      for (const kill of [false, true]) {
        if (kill && fault === 'short') continue // a short write alone fails nothing to kill after
        problems.push(...(await faultyRun(base, `${fault}-${nth}-${kill}`, { failWrite: { nth, fault }, freezeAfterFailure: kill })).problems)
        runs++
      }
    }
  }
  t.same(problems, [], `${runs} runs over ${writes} writes`)
})

t.test('a short write is completed: nothing fails, nothing is missing', async t => {
  const base = await scratch(t, true)
  const reference = await faultyRun(base, 'reference', {})
  for (let nth = 1; nth <= reference.io.writes; nth++) {
    const dir = path.join(base, `short-${nth}`)
    const io = new FaultyIO({ failWrite: { nth, fault: 'short' }, armLater: true })
    const disk = await DiskCache.open(dir, quiet, { ...small, io })
    io.arm()
    const acked = await runScenario(disk, io.frozen)
    t.same(
      [acked.batch, acked.state, acked.nodes.size],
      [rounds - 1, rounds - 3, 3],
      `write ${nth} (${io.trace.filter(op => op.startsWith('writev'))[nth - 1]}): everything acknowledged`,
    )
    t.same(disk.health(), { durable: true })
    await disk.close()
  }
})

t.test('a failed fsync is reported and retried; what was written stays', async t => {
  const base = await scratch(t)
  for (let nth = 1; nth <= 6; nth++) {
    const { problems } = await faultyRun(base, `sync-${nth}`, { failSync: nth })
    t.same(problems, [], `fdatasync ${nth} fails`)
  }
})

t.test('a compaction that meets a full disk keeps every old file, logs once, waits before trying again, and later removes every older generation', async t => {
  const dir = path.join(await scratch(t), 'cache')
  const { log, lines } = capturedLog()
  // the first write of a snapshot is cut short, and the disk has no room for the rest of any snapshot
  const snapshots = (file: string) => file.endsWith('.tmp')
  const io = new FaultyIO({ writesTo: snapshots, failWrite: { nth: 1, fault: 'short-then-ENOSPC' }, diskFullFor: snapshots })
  const disk = await DiskCache.open(dir, log, { ...small, io })
  t.teardown(() => disk.close())
  // 50 objects a kubelet gets one by one (no scope list): the case that lost objects before
  const configMaps = { ...pods, resource: 'configmaps' }
  const written = new Map<string, string>()
  const put = async (i: number, rv: number) => {
    const o = object('ConfigMap', 'default', `cm-${i}`, rv, 300)
    await disk.put(configMaps, o)
    written.set(o.name, o.resourceVersion)
  }
  for (let rv = 1; rv <= 3; rv++) for (let i = 0; i < 50; i++) await put(i, rv)
  await eventually(() => disk.stats.compactionFailures >= 1, 10_000, 'the compaction to fail')
  const collection = path.join(dir, 'kubelet', 'configmaps.v1.core')
  const files = (await readdir(collection)).sort()
  t.same(
    files.filter(f => f.startsWith('snapshot')),
    [],
    `no snapshot renamed into place, no temp file left (${files.join(', ')})`,
  )
  t.ok(files.includes('journal.0'), 'the old journal is kept')
  t.match(disk.health(), {
    durable: false,
    error: /compaction failed in .*configmaps\.v1\.core: ENOSPC/,
    neededBytes: Number,
    availableBytes: 0,
    since: Number,
  })
  t.ok(disk.health().neededBytes! > 50 * 300, `it says how much the snapshot needed (${disk.health().neededBytes} bytes)`)

  // the disk is still full for snapshots: writes go on in the new journal; the compaction is not retried at each of them
  for (let i = 0; i < 50; i++) await put(i, 4)
  t.ok(disk.stats.compactionFailures < 10, `${disk.stats.compactionFailures} attempts over 50 writes`)
  t.equal(errors(lines).length, 1, 'one error line for the streak')
  t.match(errors(lines)[0], { what: 'compaction', code: 'ENOSPC', msg: /needed \d+ bytes, 0 bytes free/ })

  io.heal()
  // the next attempt comes when the backoff the failures reached runs out (it doubles, up to a
  // minute): on a slow box the 50 writes above span more failures, so more of it
  await eventually(() => disk.stats.compactions >= 1, compactionBackoffMs.most + 10_000, 'a compaction once there is room')
  await eventually(() => disk.health().durable, 10_000, 'health to recover')
  t.equal(infos(lines, /writes work again/).length, 1, 'one line when it is over')
  const after = (await readdir(collection)).sort()
  const snapshot = after.find(f => /^snapshot\.\d+$/.test(f))!
  const gen = Number(snapshot.slice('snapshot.'.length))
  t.same(
    after.filter(f => /^(snapshot|journal)\.\d+$/.test(f) && Number(f.split('.')[1]) < gen),
    [],
    `every older generation is gone, not only the previous one (${after.join(', ')})`,
  )
  await disk.close()
  const reopened = await DiskCache.open(dir, quiet)
  t.teardown(() => reopened.close())
  const loaded = new Map<string, string>()
  t.same((await reopened.load(e => loaded.set(e.object.name, e.object.resourceVersion))).failed, [])
  t.same([...loaded].sort(), [...written].sort(), 'all 50 objects at their last version')
})

t.test('a full disk: one error line for the whole streak, saying what failed and how much space; health says so until writes work again', async t => {
  const dir = path.join(await scratch(t), 'cache')
  const { log, lines } = capturedLog()
  const io = new FaultyIO({ diskFullFrom: 3, armLater: true })
  const disk = await DiskCache.open(dir, log, { io })
  t.teardown(() => disk.close())
  io.arm()
  await disk.put(pods, object('Pod', 'default', 'a', 1, 10))
  await disk.put(nodes, object('Node', '', 'n', 1, 10))
  const failures = []
  for (let i = 0; i < 30; i++)
    failures.push(
      await disk.put(i % 2 ? pods : nodes, object(i % 2 ? 'Pod' : 'Node', i % 2 ? 'default' : '', `x-${i}`, 10 + i, 1000)).then(
        () => 'written',
        (e: Error) => e.message,
      ),
    )
  t.same(
    failures.filter(f => !/^ENOSPC: no space left on device/.test(f)),
    [],
    `every write rejected: ${failures[0]}`,
  )
  await eventually(() => errors(lines).length > 0, 10_000, 'the error line')
  t.equal(errors(lines).length, 1, 'one error line, not one per write')
  t.match(errors(lines)[0], {
    what: 'write',
    code: 'ENOSPC',
    neededBytes: Number,
    availableBytes: 0,
    dir: /kubelet\/(pods|nodes)/,
    msg: /write failed in .*: ENOSPC.*needed \d+ bytes, 0 bytes free/,
  })
  t.match(disk.health(), { durable: false, error: /write failed in .*ENOSPC/, availableBytes: 0, since: Number })

  io.heal()
  await disk.put(pods, object('Pod', 'default', 'b', 50, 10))
  await disk.flush()
  t.match(disk.health(), { durable: false }, 'the other collection has not written since its failure')
  await disk.put(nodes, object('Node', '', 'n', 51, 10))
  await disk.flush()
  t.same(disk.health(), { durable: true }, 'durable once every failing place wrote and synced')
  await eventually(() => infos(lines, /writes work again/).length > 0, 10_000, 'the info line')
  t.equal(infos(lines, /writes work again/).length, 1)
  t.equal(errors(lines).length, 1, 'still one error line')
  await disk.close()
  const reopened = await DiskCache.open(dir, quiet)
  t.teardown(() => reopened.close())
  const names: string[] = []
  t.same((await reopened.load(e => names.push(`${e.object.name}@${e.object.resourceVersion}`))).failed, [], 'the failed appends were cut back')
  t.same(names.sort(), ['a@1', 'b@50', 'n@51'])
})

t.test('a state file that cannot be written leaves the previous one; a short write of it is completed', async t => {
  const dir = path.join(await scratch(t), 'cache')
  const io = new FaultyIO({ armLater: true })
  const disk = await DiskCache.open(dir, quiet, { io })
  t.teardown(() => disk.close())
  await disk.writeState('topology', { version: 1 })
  for (const fault of ['ENOSPC', 'EIO', 'short-then-ENOSPC'] as const) {
    io.replan({ failWrite: { nth: 1, fault } })
    await t.rejects(disk.writeState('topology', { version: 2, pad: 'x'.repeat(10_000) }), new RegExp(fault.replace('short-then-', '')), fault)
    io.heal()
    t.same(await disk.readState('topology'), { version: 1 }, `${fault}: the previous state stays`)
    t.same((await readdir(path.join(dir, '_state'))).sort(), ['topology.json'], 'no temp file left')
  }
  io.replan({ failWrite: { nth: 1, fault: 'short' } })
  await disk.writeState('topology', { version: 3, pad: 'y'.repeat(10_000) })
  t.same(await disk.readState('topology'), { version: 3, pad: 'y'.repeat(10_000) }, 'a short write is completed')
  t.same(disk.health(), { durable: true })
})

t.test('a read-only cache dir is refused with EROFS and why; a chmod refused on a writable dir is only a warning', async t => {
  const base = await scratch(t)
  await mkdir(path.join(base, 'ro'))
  const refused = await DiskCache.open(path.join(base, 'ro'), quiet, { io: new FaultyIO({ readOnly: true }) }).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.ok(refused instanceof CacheDirUnusableError)
  t.match(refused, { code: 'EROFS', path: path.join(base, 'ro'), message: /read-only file system/ })
  const missing = await DiskCache.open(path.join(base, 'missing', 'cache'), quiet, { io: new FaultyIO({ readOnly: true }) }).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.match(missing, { code: 'EROFS', message: /cannot create it/ })

  const { log, lines } = capturedLog()
  const disk = await DiskCache.open(path.join(base, 'not-ours'), log, { io: new FaultyIO({ chmod: 'EPERM' }) })
  t.teardown(() => disk.close())
  t.match(
    lines.filter(l => l.level === 40),
    [{ msg: /cannot make the cache dir 0700/ }],
  )
  await disk.put(pods, object('Pod', 'default', 'a', 1, 10))
  t.same(disk.health(), { durable: true }, 'and the cache works')
})

/** Why this machine cannot mount a tmpfs (not root, no mount in a container), or false when it can. */
function cannotMount(): string | false {
  const probe = mkdtempSync(path.join(os.tmpdir(), 'outpost-mount-'))
  try {
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { encoding: 'utf8' })
    if (mounted.status !== 0) return `cannot mount a tmpfs here: ${(mounted.stderr || mounted.error?.message || `mount exited ${mounted.status}`).trim()}`
    spawnSync('umount', [probe])
    return false
  } finally {
    rmSync(probe, { recursive: true, force: true })
  }
}
const mountSkip = cannotMount()

/** Mounts a tmpfs of `size` at a new dir under `base`, unmounted when the test ends. */
function mountTmpfs(t: Test, base: string, size: string, readOnly = false): string {
  const mountPoint = path.join(base, `mnt-${size}-${Math.random().toString(36).slice(2)}`)
  mkdirSync(mountPoint)
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}${readOnly ? ',ro' : ''}`, 'tmpfs', mountPoint], { encoding: 'utf8' })
  if (mounted.status !== 0) throw new Error(`mount: ${mounted.stderr}`)
  t.teardown(() => {
    spawnSync('umount', ['-l', mountPoint])
  })
  return mountPoint
}

t.test('a real read-only filesystem: open is refused with EROFS', { skip: mountSkip }, async t => {
  const base = await scratch(t)
  const mountPoint = mountTmpfs(t, base, '1m', true)
  const refused = await DiskCache.open(mountPoint, quiet).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.ok(refused instanceof CacheDirUnusableError)
  t.match(refused, { code: 'EROFS', message: /read-only/ })
})

t.test(
  'a real small filesystem filled during a compaction of a few thousand objects: every acknowledged object is there after a restart (killed, or not)',
  { skip: mountSkip },
  async t => {
    const base = await scratch(t)
    const configMaps = { ...pods, resource: 'configmaps' }
    const compaction = { compactAfterBytes: 1024 * 1024 }
    const roundOf = (round: number) => Array.from({ length: 3000 }, (_, i) => object('ConfigMap', 'default', `cm-${i}`, round * 10_000 + i, 900))
    for (const killed of [false, true]) {
      const mountPoint = mountTmpfs(t, base, '16m')
      const dir = path.join(mountPoint, 'cache')
      // killed: the process dies at the first write the disk refuses
      const io = new FaultyIO({ freezeAfterFailure: killed })
      const { log, lines } = capturedLog()
      const disk = await DiskCache.open(dir, log, { ...compaction, io })
      const acked = new Map<string, number>()
      let lastList = -1
      const settle = (p: Promise<unknown>) =>
        Promise.race([
          p.then(
            () => 'ok',
            () => 'failed',
          ),
          io.frozen.then(() => 'stopped'),
        ])
      /** a whole list of 3,000 objects (one batch, with its scope list), then 1,000 of them again as watch events */
      const round = async (r: number) => {
        const objects = roundOf(r)
        const meta = { listResourceVersion: String(r), listed: [{ ...everyPod, resourceVersion: String(r) }] }
        if ((await settle(disk.write(configMaps, [...objects.map(o => ({ t: 'put' as const, object: o })), { t: 'meta', meta }]))) !== 'ok') return
        lastList = r
        for (const o of objects) acked.set(o.name, Number(o.resourceVersion))
        await Promise.all(
          objects.slice(0, 1000).map(async o => {
            const event = { ...o, resourceVersion: String(Number(o.resourceVersion) + 5000) }
            if ((await settle(disk.put(configMaps, event))) === 'ok') acked.set(o.name, Number(event.resourceVersion))
          }),
        )
      }
      await round(1)
      // the next list fits, the snapshot of the compaction it starts does not
      const listBytes = roundOf(2).reduce((sum, o) => sum + o.body.length + 250, 0)
      const free = await statfs(mountPoint).then(s => s.bavail * s.bsize)
      await writeFile(path.join(mountPoint, 'filler'), Buffer.alloc(Math.max(0, free - listBytes - 1_000_000)))
      await round(2)
      await eventually(() => disk.stats.compactionFailures >= 1 || io.isFrozen, 20_000, 'a compaction on the full disk')
      t.ok(lastList === 2, 'the second list was written')
      const how = killed ? 'killed' : 'closed'
      if (killed) {
        await disk.abandon()
        await io.closeAll()
      } else {
        await eventually(() => errors(lines).length > 0, 10_000, 'the error line')
        t.same(
          errors(lines)
            .map(l => l.msg.replace(/ \d+ bytes/g, ' N bytes'))
            .slice(1),
          [],
          `one error line: ${errors(lines)[0].msg}`,
        )
        t.match(disk.health(), { durable: false, error: /ENOSPC/ })
        await disk.close()
      }
      const reopened = await DiskCache.open(dir, quiet, compaction)
      const loaded = new Map<string, number>()
      let meta: { listResourceVersion: string; listed: unknown[] } | undefined
      const report = await reopened.load(
        e => loaded.set(e.object.name, Number(e.object.resourceVersion)),
        (_key, m) => (meta = m),
      )
      t.same(report.failed, [], `${how}: nothing damaged`)
      t.same(
        [...acked].filter(([name, rv]) => !((loaded.get(name) ?? -1) >= rv)),
        [],
        `${how}: all ${acked.size} acknowledged objects at their acknowledged version or newer`,
      )
      t.match(meta, { listResourceVersion: '2', listed: [{ resourceVersion: '2' }] }, `${how}: the last list is listed whole`)
      // room again: the next compaction takes every older generation away
      await rm(path.join(mountPoint, 'filler'))
      await reopened.put(configMaps, object('ConfigMap', 'default', 'after', 1, 10))
      await eventually(() => reopened.stats.compactions >= 1, 20_000, 'a compaction once there is room')
      const files = await readdir(path.join(dir, 'kubelet', 'configmaps.v1.core'))
      const gens = files.filter(f => /^(snapshot|journal)\.\d+$/.test(f)).map(f => Number(f.split('.')[1]))
      const snapshotGen = Number(files.find(f => /^snapshot\.\d+$/.test(f))?.split('.')[1])
      t.ok(
        gens.every(g => g >= snapshotGen),
        `${how}: nothing older than the new snapshot (${files.join(', ')})`,
      )
      await reopened.close()
    }
  },
)
