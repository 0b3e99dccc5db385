// Row 9: the disk cache under faults. A kill -9 during a compaction of many objects on a disk that
// fills up mid-compaction, then a restart: no acknowledged object lost, the scope whole or refused.
// A cold start of the built hub with a damaged snapshot: how long until it serves, the damaged
// scope reported and refused, the rest served.
import { fork } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { request } from 'undici'
import type { Context } from './context.ts'
import { HubProcess, scratch, sleep } from './processes.ts'
import { figureRow, thousands } from './report.ts'
import type { Row } from './report.ts'
import { DiskCache } from '../../lib/cache/disk.ts'
import { CacheStore } from '../../lib/cache/store.ts'
import { Recorder } from '../../lib/cache/recorder.ts'
import { classify } from '../../lib/api/requestinfo.ts'
import type { ChildMessage } from './compaction-kill-child.ts'
import { scopeOf } from '../../lib/cache/scope.ts'
import { resourceKeyOf } from '../../lib/cache/types.ts'

const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const log = pino({ level: 'silent' })

interface Write {
  name: string
  rv: number
  deleted?: boolean
}

/** Which state of the write history the recovered objects are, if any, from the last acknowledged write on. */
function matchHistory(writes: Write[], acked: number, recovered: Map<string, number>): { at: number | undefined; lost: number } {
  const model = new Map<string, number>()
  for (const w of writes.slice(0, acked)) w.deleted ? model.delete(w.name) : model.set(w.name, w.rv)
  // acknowledged and missing, or there at an older version than acknowledged
  let lost = 0
  for (const [name, rv] of model) if ((recovered.get(name) ?? -1) < rv) lost++
  const differs = (name: string) => (model.get(name) ?? -1) !== (recovered.get(name) ?? -1)
  let mismatches = 0
  for (const name of new Set([...model.keys(), ...recovered.keys()])) if (differs(name)) mismatches++
  for (let j = acked; ; j++) {
    if (mismatches === 0 && j >= acked) return { at: j, lost }
    if (j >= writes.length) return { at: undefined, lost }
    const w = writes[j]
    const before = differs(w.name)
    if (w.deleted) model.delete(w.name)
    else model.set(w.name, w.rv)
    mismatches += (differs(w.name) ? 1 : 0) - (before ? 1 : 0)
  }
}

/** kill -9 mid-compaction on a full disk; restart. */
export async function compactionKillRows(objects: number): Promise<Row[]> {
  const dir = mkdtempSync(path.join(scratch(), 'compaction-kill-'))
  const script = fileURLToPath(new URL('./compaction-kill-child.ts', import.meta.url))
  const child = fork(script, [dir, String(objects)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const writes: Write[] = []
  let acked = 0
  let compacting = false
  let killedAfter = 0
  child.on('message', (m: ChildMessage) => {
    if ('wrote' in m) writes.push(m.wrote)
    else if ('acked' in m) acked = m.acked
    else if ('compacting' in m && !compacting) {
      compacting = true
      // let the full disk fail the snapshot and a few hundred appends, then kill
      setTimeout(() => {
        killedAfter = writes.length
        child.kill('SIGKILL')
      }, 300)
    }
  })
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null]
  if (signal !== 'SIGKILL') throw new Error(`the child ended (${code}) before a compaction started: ${writes.length} writes`)

  const disk = await DiskCache.open(dir, log)
  const store = new CacheStore(disk, log)
  const report = await store.load()
  const list = classify('GET', '/api/v1/namespaces/bench/configmaps', kubelet)
  const selection = await store.list(resourceKeyOf(list), scopeOf(list))
  await store.close()
  const recovered = new Map((selection?.items ?? []).map(o => [o.name, Number(o.resourceVersion)]))
  const { at, lost } = matchHistory(writes, acked, recovered)
  const whole = selection?.complete === true && (selection.lost.length ?? 0) === 0
  const scopeOk = whole ? at !== undefined : true
  const what = `kill -9 during a compaction of ${thousands(objects)} objects on a disk that fills up, then restart`
  return [
    figureRow(
      {
        id: 'disk.compaction-kill.lost',
        name: `${what}: acknowledged objects lost`,
        unit: 'objects',
        baselineLabel: 'target',
        note: `${thousands(acked)} writes acknowledged (the kernel had them) of ${thousands(killedAfter)} made before the kill; the disk filled when the compaction opened its snapshot; load problems ${report?.failed.length ?? 0}`,
      },
      0,
      lost,
      'lower',
      '0',
      lost === 0,
    ),
    figureRow(
      {
        id: 'disk.compaction-kill.scope',
        name: `${what}: the scope's offline answer (1 = whole and a state it had, or refused)`,
        unit: '',
        baselineLabel: 'target',
        note: whole
          ? at !== undefined
            ? `whole: the state after write ${thousands(at)} (${thousands(at - acked)} past the last acknowledged)`
            : 'whole, but no state the history had'
          : 'refused (503): not known whole',
      },
      1,
      scopeOk ? 1 : 0,
      'higher',
      '1',
      scopeOk,
    ),
  ]
}

/**
 * A cache of `objects` ConfigMaps compacted into a snapshot (and a few hundred Secrets beside it),
 * written through the store as the hub writes it; then a byte in the middle of that snapshot flipped.
 */
export async function damagedCache(objects: number, damage = true): Promise<string> {
  const dir = mkdtempSync(path.join(scratch(), 'damaged-'))
  const disk = await DiskCache.open(dir, log, { compactAfterBytes: 1024 * 1024 })
  const store = new CacheStore(disk, log)
  const recorder = new Recorder(store, log)
  const pad = 'x'.repeat(300)
  const listOf = (kind: string, count: number, rv: number, prefix: string) =>
    Buffer.from(
      JSON.stringify({
        kind: `${kind}List`,
        apiVersion: 'v1',
        metadata: { resourceVersion: String(rv) },
        items: Array.from({ length: count }, (_, i) => ({
          metadata: { name: `${prefix}-${i}`, namespace: 'bench', resourceVersion: String(rv - count + i) },
          data: { pad },
        })),
      }),
    )
  await recorder.recordListPage(classify('GET', '/api/v1/namespaces/bench/configmaps', kubelet), 'json', listOf('ConfigMap', objects, 100_000, 'cm'))
  // the same objects twice more, newer: the journal passes twice its live data and is compacted into a snapshot
  for (const rv of [200_000, 300_000])
    await recorder.recordListPage(classify('GET', '/api/v1/namespaces/bench/configmaps', kubelet), 'json', listOf('ConfigMap', objects, rv, 'cm'))
  await recorder.recordListPage(classify('GET', '/api/v1/namespaces/bench/secrets', kubelet), 'json', listOf('Secret', 500, 400_000, 'secret'))
  const collection = path.join(dir, 'kubelet', 'configmaps.v1.core')
  let snapshot: string | undefined
  for (let i = 0; i < 200 && !snapshot; i++) {
    snapshot = readdirSync(collection).find(f => /^snapshot\.\d+$/.test(f))
    if (!snapshot) await sleep(50)
  }
  await store.close()
  if (!snapshot) throw new Error('no snapshot was written')
  const file = path.join(collection, snapshot)
  if (!damage) return dir
  const bytes = readFileSync(file)
  bytes[bytes.length >> 1] ^= 0x5a
  writeFileSync(file, bytes)
  return dir
}

/** Cold start of the built hub, the cloud away, on a cache with a damaged snapshot. */
export async function damagedColdStartRows(ctx: Context, objects: number): Promise<Row[]> {
  const cacheDir = await damagedCache(objects)
  await ctx.sim.call('fault', { fault: 'refuse' })
  try {
    const hub = await HubProcess.start(ctx.hubEntry, { server: ctx.sim.url, cacheDir, noWait: true })
    try {
      const headers = { 'user-agent': kubelet, accept: 'application/json' }
      let served = 0
      for (;;) {
        if (hub.child.exitCode !== null) throw new Error(`the hub exited: ${hub.log}`)
        const res = await request(`${hub.url}/api/v1/namespaces/bench/secrets`, { headers }).catch(() => undefined)
        if (res?.statusCode === 200) {
          await res.body.dump()
          served = performance.now() - hub.spawnedAt
          break
        }
        await res?.body.dump()
        if (performance.now() - hub.spawnedAt > 30_000) throw new Error('no list served within 30 s')
        await sleep(5)
      }
      const damaged = await request(`${hub.url}/api/v1/namespaces/bench/configmaps`, { headers })
      const refusal = (await damaged.body.json()) as { message?: string }
      const debug = (await (await request(`${hub.adminUrl}/debug/cache`)).body.json()) as {
        collections: { component: string; resource: string; incomplete: { why: string }[] }[]
      }
      const reported = debug.collections.find(c => c.component === 'kubelet' && c.resource === 'configmaps.v1.core')?.incomplete.length ?? 0
      const errors = await hub.metric('outpost_cache_load_errors_total')
      const refused = damaged.statusCode === 503 && /damaged/.test(refusal.message ?? '')
      const met = served <= 1_000 && refused && reported > 0 && errors > 0
      return [
        figureRow(
          {
            id: 'disk.damaged-coldstart',
            name: `Cold start offline with a damaged snapshot of ${thousands(objects)} objects, to the other scope served`,
            unit: 'ms',
            baselineLabel: 'target',
            note: `spawn of the built hub to kubelet's Secrets list from the cache; the damaged ConfigMaps list ${damaged.statusCode}${refused ? ' (refused, saying the file was damaged)' : ''}; /debug/cache reports it incomplete: ${reported > 0}; load errors ${errors}`,
          },
          1_000,
          served,
          'lower',
          '≤ 1,000 ms, the damaged scope reported',
          met,
        ),
      ]
    } finally {
      await hub.stop()
    }
  } finally {
    await ctx.sim.call('fault', { fault: 'none' })
  }
}
