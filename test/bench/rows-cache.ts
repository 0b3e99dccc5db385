// Rows 5-7: the cache. The built hub's memory idle and loaded (and, in rows-list-cap.ts, while it
// relays a list over --max-list-bytes); its cold start offline from a full disk cache, and a SIGKILL
// in the middle of a recorded burst: nothing a client was shown is lost.
// Then the image's build (npm run bundle) against dist/: memory at start and idle, cold start.
import type { Context } from './context.ts'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { request } from 'undici'
import { FloorProcess, HubProcess, procMemory, root, scratch, sleep } from './processes.ts'
import { productionRuntimeEnv } from './runtime-env.ts'
import { clientHeaders, openWatch, timedList, userAgents } from './load.ts'
import type { Listed } from './load.ts'
import { figureRow, ratioRow, thousands } from './report.ts'
import type { Row } from './report.ts'
import { bulkConfigMapsPath, hubNode, nodePodsPath, podsPath, slicesPath } from './objects.ts'

const targets = { idleMiB: 60, loadedMiB: 150, coldStartMs: 1000 }
// what the node's components send: protobuf where the apiserver offers it (JSON from today's simulator)
const kubeProxy = clientHeaders(userAgents.kubeProxy, 'protobuf')
const kubelet = clientHeaders(userAgents.kubelet, 'protobuf')

/** Polls `url` from the moment the hub was spawned until a list answers 200. */
async function firstServedList(hub: HubProcess, url: string, headers: Record<string, string>, timeoutMs = 60_000): Promise<Listed & { sinceSpawn: number }> {
  let last = ''
  while (performance.now() - hub.spawnedAt < timeoutMs) {
    if (hub.child.exitCode !== null) throw new Error(`the hub exited (${hub.child.exitCode}): ${hub.log}`)
    try {
      const listed = await timedList(url, headers)
      return { ...listed, sinceSpawn: performance.now() - hub.spawnedAt }
    } catch (error) {
      last = (error as Error).message.slice(0, 300)
      await sleep(5)
    }
  }
  throw new Error(`no list served within ${timeoutMs} ms: ${last}`)
}

/** Rows 5 and 6: RSS idle, RSS with the slices and pods cached, then a cold start offline from that cache (plus ConfigMaps). */
export async function memoryRows(ctx: Context): Promise<Row[]> {
  const { counts, sim } = ctx
  const [hub, floor] = await Promise.all([HubProcess.start(ctx.hubEntry, { server: sim.url }), FloorProcess.start(sim.url)])
  const cacheDir = hub.cacheDir
  const rows: Row[] = []
  try {
    // the floor proxies one request, so that its undici has parsed a response as the hub's has
    await (await request(floor.url + '/version')).body.dump()
    await sleep(counts.settleMs)
    const started = { hub: hub.memory(), floor: procMemory(floor.pid) }
    await sleep(counts.idleSettledMs - counts.settleMs)
    const idle = hub.memory()
    const floorIdle = procMemory(floor.pid)
    await floor.stop()
    await timedList(hub.url + slicesPath, kubeProxy)
    await timedList(hub.url + podsPath, kubelet)
    await sleep(counts.settleMs)
    const loaded = hub.memory()
    const runtime = Object.entries(productionRuntimeEnv())
      .map(([name, value]) => `${name}=${value}`)
      .join(' ')
    rows.push(
      figureRow(
        {
          id: 'rss.idle',
          name: 'RSS of the built hub, idle (started, nothing cached)',
          unit: 'MiB',
          baselineLabel: 'target',
          note: `VmRSS ${counts.idleSettledMs} ms after start (${started.hub.rss.toFixed(1)} MiB at ${counts.settleMs} ms, before V8 shrinks the idle heap); VmHWM ${idle.hwm.toFixed(1)} MiB; run as the static pod runs it: ${runtime}`,
        },
        targets.idleMiB,
        idle.rss,
        'lower',
        `≤ ${targets.idleMiB} MiB`,
        idle.rss <= targets.idleMiB,
      ),
      ratioRow(
        {
          id: 'rss.idle-floor',
          name: 'RSS idle: the hub vs the floor of its stack (a bare fastify + undici proxy)',
          unit: 'MiB',
          baselineLabel: 'floor',
          note: `test/bench/floor-proxy.mjs, same runtime environment, one request proxied, read at the same moments: ${started.floor.rss.toFixed(1)} MiB at ${counts.settleMs} ms, ${floorIdle.rss.toFixed(1)} at ${counts.idleSettledMs} ms; Node alone is about 40`,
        },
        floorIdle.rss,
        idle.rss,
        'lower',
      ),
      figureRow(
        {
          id: 'rss.loaded',
          name: `RSS, ${thousands(counts.slices)} slices (kube-proxy) + ${thousands(counts.pods)} pods (kubelet) cached`,
          unit: 'MiB',
          baselineLabel: 'target',
          note: `VmRSS ${counts.settleMs} ms after the lists; VmHWM (peak, the lists in flight) ${loaded.hwm.toFixed(1)} MiB`,
        },
        targets.loadedMiB,
        loaded.rss,
        'lower',
        `≤ ${targets.loadedMiB} MiB`,
        loaded.rss <= targets.loadedMiB,
      ),
    )
    await timedList(hub.url + bulkConfigMapsPath, kubelet)
  } finally {
    await Promise.all([hub.stop(), floor.stop()])
  }

  // row 6: the cloud gone, the hub started on that cache; from spawn to kube-proxy's list served whole
  await sim.call('fault', { fault: 'refuse' })
  try {
    const cold = await HubProcess.start(ctx.hubEntry, { server: sim.url, cacheDir, noWait: true })
    try {
      const served = await firstServedList(cold, cold.url + slicesPath, kubeProxy)
      const objects = await cold.metric('outpost_cache_loaded_objects')
      const errors = await cold.metric('outpost_cache_load_errors_total')
      rows.push(
        figureRow(
          {
            id: 'coldstart',
            name: `Cold start offline, ${thousands(objects)} cached objects, to 1st list served`,
            unit: 'ms',
            baselineLabel: 'target',
            note: `spawn of node dist/cmd/outpost.js to the last byte of kube-proxy's ${thousands(counts.slices)}-slice list from the cache (${(served.bytes / 1e6).toFixed(1)} MB of ${served.contentType}, the list itself ${served.ms.toFixed(0)} ms); load errors ${errors}`,
          },
          targets.coldStartMs,
          served.sinceSpawn,
          'lower',
          `≤ ${targets.coldStartMs} ms`,
          served.sinceSpawn <= targets.coldStartMs,
        ),
      )
    } finally {
      await cold.stop()
    }
  } finally {
    await sim.call('fault', { fault: 'none' })
  }
  return rows
}

interface Shown {
  /** `<namespace>/<name>` → the highest resourceVersion a client was shown */
  versions: Map<string, number>
  beforeKill: number
  afterKill: number
}

/** Row 7: kubelet's pods watched through the hub during a burst; the hub SIGKILLed half-way; restarted offline. */
export async function killRows(ctx: Context): Promise<Row[]> {
  const { counts, sim } = ctx
  const hub = await HubProcess.start(ctx.hubEntry, { server: sim.url })
  const json = clientHeaders(userAgents.kubelet, 'json')
  const shown: Shown = { versions: new Map(), beforeKill: 0, afterKill: 0 }
  let killed = false
  try {
    await timedList(hub.url + nodePodsPath, json) // kubelet lists, then watches from there
    const rv: string = await sim.call('resourceVersion')
    const watch = await openWatch(`${hub.url}${nodePodsPath}&resourceVersion=${rv}&watch=true`, json, frame => {
      const event = JSON.parse(frame.toString())
      const meta = event.object?.metadata
      if (event.type === 'BOOKMARK' || !meta) return
      const key = `${meta.namespace}/${meta.name}`
      shown.versions.set(key, Math.max(shown.versions.get(key) ?? 0, Number(meta.resourceVersion)))
      if (killed) shown.afterKill++
      else if (++shown.beforeKill >= counts.burst / 2) {
        killed = true
        hub.child.kill('SIGKILL') // in the middle of the burst, while frames are being recorded
      }
    })
    const burst = sim.call('podBurst', { count: counts.burst, nodeName: hubNode, offset: 1_000_000 })
    const allShown = watch.waitFor(counts.burst, 60_000).then(
      () => 'the burst ended before the kill',
      (error: Error) => error.message,
    )
    const first = await Promise.race([hub.exited.then(() => 'killed'), allShown])
    // the kill may land after the hub has sent the whole burst (it is in the socket, not yet read)
    if (!killed) throw new Error(first)
    await hub.exited
    await burst
    await sleep(100) // the last frames the dead hub had sent
    watch.close()
  } finally {
    await hub.kill()
  }

  await sim.call('fault', { fault: 'refuse' })
  try {
    const restarted = await HubProcess.start(ctx.hubEntry, { server: sim.url, cacheDir: hub.cacheDir })
    try {
      const listed = await firstServedList(restarted, restarted.url + nodePodsPath, json, 30_000)
      const errors = await restarted.metric('outpost_cache_load_errors_total')
      const res = await fetch(restarted.url + nodePodsPath, { headers: json })
      const cached = new Map<string, number>()
      for (const item of ((await res.json()) as { items: any[] }).items)
        cached.set(`${item.metadata.namespace}/${item.metadata.name}`, Number(item.metadata.resourceVersion))
      const lost = [...shown.versions].filter(([key, version]) => (cached.get(key) ?? -1) < version)
      if (lost.length > 0)
        console.error(
          `bench: lost after SIGKILL: ${lost
            .slice(0, 10)
            .map(([k, v]) => `${k}@${v}`)
            .join(', ')}`,
        )
      const what = `SIGKILL mid-burst of ${thousands(counts.burst)} pods, restart offline`
      return [
        figureRow(
          {
            id: 'kill.lost',
            name: `${what}: objects lost`,
            unit: 'objects',
            baselineLabel: 'target',
            note: `kubelet's pods watched through the hub (JSON); ${thousands(shown.beforeKill)} events shown before the kill, ${shown.afterKill} after it (sent before it); the restarted hub listed ${thousands(cached.size)} pods (${(listed.bytes / 1e6).toFixed(1)} MB)`,
          },
          0,
          lost.length,
          'lower',
          '0',
          lost.length === 0,
        ),
        figureRow(
          {
            id: 'kill.load-errors',
            name: `${what}: cache load errors`,
            unit: 'errors',
            baselineLabel: 'target',
            note: 'outpost_cache_load_errors_total of the restarted hub',
          },
          0,
          errors,
          'lower',
          '0',
          errors === 0,
        ),
      ]
    } finally {
      await restarted.stop()
    }
  } finally {
    await sim.call('fault', { fault: 'none' })
  }
}

/**
 * `npm run bundle` into a directory of its own under the OS temp dir, as the image holds it (/app,
 * nothing beside it): what it needs and did not take in cannot be found. `remove()` when done.
 */
export function buildBundle(): { entry: string; remove(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-bundle-'))
  const entry = path.join(dir, 'outpost.mjs')
  const built = spawnSync('npm', ['run', 'bundle', '--', '--outfile', entry], { cwd: root, encoding: 'utf8', timeout: 300_000 })
  if (built.status !== 0) {
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`npm run bundle failed:\n${built.stdout}\n${built.stderr}`)
  }
  return { entry, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * The image's hub (the bundle, `node outpost.mjs`) side by side with dist/ (`node dist/cmd/outpost.js`
 * over node_modules), each in the static pod's runtime environment: RSS idle and its peak while
 * starting, then the cold start offline from one full cache (a copy of it per start).
 */
export async function bundleRows(ctx: Context): Promise<Row[]> {
  const { counts, sim } = ctx
  if (!ctx.bundleEntry) throw new Error('no bundle built')
  const entries = { dist: ctx.hubEntry, bundle: ctx.bundleEntry }
  const memory = { dist: [] as { rss: number; hwm: number }[], bundle: [] as { rss: number; hwm: number }[] }
  for (let round = 0; round < counts.bundleRounds; round++) {
    // one after the other, so neither starts while the other does; both read idleSettledMs after their own spawn
    const order = round % 2 === 0 ? (['dist', 'bundle'] as const) : (['bundle', 'dist'] as const)
    const hubs = new Map<'dist' | 'bundle', HubProcess>()
    try {
      for (const variant of order) hubs.set(variant, await HubProcess.start(entries[variant], { server: sim.url }))
      for (const variant of order) {
        const hub = hubs.get(variant)!
        await sleep(Math.max(0, counts.idleSettledMs - (performance.now() - hub.spawnedAt)))
        memory[variant].push(hub.memory())
      }
    } finally {
      await Promise.all([...hubs.values()].map(hub => hub.stop()))
    }
  }

  // a cache of what the memory rows cache: kube-proxy's slices, kubelet's pods and ConfigMaps
  const filled = await HubProcess.start(ctx.hubEntry, { server: sim.url })
  try {
    await timedList(filled.url + slicesPath, kubeProxy)
    await timedList(filled.url + podsPath, kubelet)
    await timedList(filled.url + bulkConfigMapsPath, kubelet)
  } finally {
    await filled.stop()
  }
  const cold = { dist: [] as number[], bundle: [] as number[] }
  const coldPeak = { dist: [] as number[], bundle: [] as number[] }
  let objects = 0
  await sim.call('fault', { fault: 'refuse' })
  try {
    for (let round = 0; round < counts.bundleRounds; round++) {
      for (const variant of round % 2 === 0 ? (['dist', 'bundle'] as const) : (['bundle', 'dist'] as const)) {
        const cacheDir = mkdtempSync(path.join(scratch(), 'cold-'))
        cpSync(filled.cacheDir, cacheDir, { recursive: true })
        const hub = await HubProcess.start(entries[variant], { server: sim.url, cacheDir, noWait: true })
        try {
          cold[variant].push((await firstServedList(hub, hub.url + slicesPath, kubeProxy)).sinceSpawn)
          coldPeak[variant].push(hub.memory().hwm)
          objects = await hub.metric('outpost_cache_loaded_objects')
        } finally {
          await hub.stop()
          rmSync(cacheDir, { recursive: true, force: true })
        }
      }
    }
  } finally {
    await sim.call('fault', { fault: 'none' })
  }

  const rss = (variant: 'dist' | 'bundle') => median(memory[variant].map(m => m.rss))
  const hwm = (variant: 'dist' | 'bundle') => median(memory[variant].map(m => m.hwm))
  const each = (values: number[]) => values.map(v => v.toFixed(1)).join(', ')
  const rounds = `median of ${counts.bundleRounds}`
  return [
    ratioRow(
      {
        id: 'bundle.rss.idle',
        name: 'RSS idle: the image’s bundle vs dist/',
        unit: 'MiB',
        baselineLabel: 'dist/',
        note: `VmRSS ${counts.idleSettledMs} ms after spawn, ${rounds} (bundle ${each(memory.bundle.map(m => m.rss))}; dist/ ${each(memory.dist.map(m => m.rss))}); node ${process.version} here, the image's is 22`,
      },
      rss('dist'),
      rss('bundle'),
      'lower',
      1,
    ),
    ratioRow(
      {
        id: 'bundle.rss.start-peak',
        name: 'Peak RSS while starting: the bundle vs dist/',
        unit: 'MiB',
        baselineLabel: 'dist/',
        note: `VmHWM at the same moment, ${rounds} (bundle ${each(memory.bundle.map(m => m.hwm))}; dist/ ${each(memory.dist.map(m => m.hwm))})`,
      },
      hwm('dist'),
      hwm('bundle'),
      'lower',
      1,
    ),
    ratioRow(
      {
        id: 'bundle.coldstart',
        name: `Cold start offline, ${thousands(objects)} cached objects, to 1st list served: the bundle vs dist/`,
        unit: 'ms',
        baselineLabel: 'dist/',
        note: `spawn to the last byte of kube-proxy's ${thousands(counts.slices)}-slice list, each start from its own copy of one cache, ${rounds} (bundle ${each(cold.bundle)}; dist/ ${each(cold.dist)}); VmHWM then: bundle ${each(coldPeak.bundle)}, dist/ ${each(coldPeak.dist)} MiB`,
      },
      median(cold.dist),
      median(cold.bundle),
      'lower',
      1,
    ),
  ]
}
