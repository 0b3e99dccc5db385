// Rows 1-4: the proxy path. GETs of a small object, lists of the slices, watch streams of slice
// events, and delivery delay to many watchers: each through the built hub against its baseline,
// measured in the same run, interleaved where rounds repeat.
import { Agent } from 'undici'
import type { Context } from './context.ts'
import { FloorProcess, HubProcess, withCpu } from './processes.ts'
import {
  clientHeaders,
  closedLoop,
  loopCpu,
  loopP99,
  loopRate,
  median,
  openWatch,
  passThroughHeaders,
  percentile,
  protobufType,
  sequentialLatencies,
  timedList,
  userAgents,
} from './load.ts'
import type { Format, Listed, Loop } from './load.ts'
import { figureRow, guarded, naRow, ratioRow, thousands } from './report.ts'
import type { Row } from './report.ts'
import { slicesPath, slicesWatchPath, warmUpPath, smallConfigMapPath, watchedConfigMapsWatchPath, writtenAtAnnotation } from './objects.ts'

const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length
const formats: Format[] = ['json', 'protobuf']
const relayed = 'kubectl with a token of its own, which the hub relays: neither cached nor served from its caches (the baseline of the rows above)'
const label = (format: Format): string => (format === 'json' ? 'JSON' : 'protobuf')

// ---- row 1: GET of a small object ---------------------------------------------------------------

export async function getRows(ctx: Context, hub: HubProcess): Promise<Row[]> {
  const floor = await FloorProcess.start(ctx.sim.url)
  try {
    return await getRowsWith(ctx, hub, floor)
  } finally {
    await floor.stop()
  }
}

async function getRowsWith(ctx: Context, hub: HubProcess, floor: FloorProcess): Promise<Row[]> {
  const { counts, sim } = ctx
  const conns = 50
  const direct = sim.url + smallConfigMapPath
  const via = hub.url + smallConfigMapPath
  const bare = floor.url + smallConfigMapPath
  const uncached = clientHeaders(userAgents.kubectl, 'json')
  const cached = clientHeaders(userAgents.kubelet, 'json')
  const ms = counts.getSeconds * 1000
  for (const [url, headers] of [
    [direct, uncached],
    [via, uncached],
    [via, cached],
    [bare, uncached],
  ] as const)
    await closedLoop(url, headers, conns, Math.min(ms, 500)) // warm-up
  const runs = { direct: [] as Loop[], hub: [] as Loop[], cached: [] as Loop[], floor: [] as Loop[] }
  // the CPU of the simulator, the proxy in the path (the hub, or the floor proxy) and the load generator
  const loop = async (url: string, headers: Record<string, string>, proxyPid = hub.pid): Promise<Loop> => {
    const { result, cpuMs } = await withCpu([sim.pid, proxyPid, process.pid], () => closedLoop(url, headers, conns, ms))
    return { ...result, cpuMs }
  }
  for (let round = 0; round < counts.getRounds; round++) {
    runs.direct.push(await loop(direct, uncached))
    runs.hub.push(await loop(via, uncached))
    runs.cached.push(await loop(via, cached))
    runs.floor.push(await loop(bare, uncached, floor.pid))
  }
  const rate = loopRate
  const p99At = loopP99
  const cpu = loopCpu
  // added latency: requests one at a time (no queueing), blocks alternating between the two paths
  const blocks = 5
  const one = { direct: [] as number[], hub: [] as number[] }
  for (let b = 0; b < blocks; b++) {
    one.direct.push(...(await sequentialLatencies(direct, uncached, Math.ceil(counts.latencyRequests / blocks))))
    one.hub.push(...(await sequentialLatencies(via, uncached, Math.ceil(counts.latencyRequests / blocks))))
  }
  const p99 = { direct: percentile(one.direct, 99), hub: percentile(one.hub, 99) }
  const added = p99.hub - p99.direct
  return [
    ratioRow(
      {
        id: 'get.throughput',
        name: `GET ConfigMap, ${conns} keep-alive conns: hub vs direct`,
        unit: 'req/s',
        baselineLabel: 'direct',
        note: `median of ${counts.getRounds} x ${counts.getSeconds} s; p99 at this load: direct ${p99At(runs.direct)} ms, hub ${p99At(runs.hub)} ms; CPU µs per request (simulator / hub / load generator): direct ${cpu(runs.direct)}, hub ${cpu(runs.hub)}`,
      },
      rate(runs.direct),
      rate(runs.hub),
      'higher',
      0.8,
    ),
    figureRow(
      {
        id: 'get.added-p99',
        name: 'GET ConfigMap, one at a time: p99 latency, hub vs direct',
        unit: 'ms',
        baselineLabel: 'direct',
        note: `added p99 ${added.toFixed(3)} ms over ${thousands(one.hub.length)} requests each (p50 direct ${percentile(one.direct, 50).toFixed(3)} ms, hub ${percentile(one.hub, 50).toFixed(3)} ms)`,
      },
      p99.direct,
      p99.hub,
      'lower',
      'added ≤ 1 ms',
      added <= 1,
    ),
    ratioRow(
      {
        id: 'get.cached',
        name: `GET ConfigMap, ${conns} conns: cached (kubelet) vs uncached (kubectl)`,
        unit: 'req/s',
        baselineLabel: 'uncached',
        note: `both through the hub (kubelet's answers recorded before they are sent); CPU µs per request (simulator / hub / load generator): uncached ${cpu(runs.hub)}, cached ${cpu(runs.cached)}`,
      },
      rate(runs.hub),
      rate(runs.cached),
      'higher',
      0.9,
    ),
    ratioRow(
      {
        id: 'get.floor',
        name: `GET ConfigMap, ${conns} conns: the floor of the hub's stack (a bare fastify + undici proxy) vs direct`,
        unit: 'req/s',
        baselineLabel: 'direct',
        note: `test/bench/floor-proxy.mjs, interleaved with the rows above: a proxy that only forwards, on the hub's libraries and this box (the hub gets ${(rate(runs.hub) / rate(runs.floor)).toFixed(2)}x the floor); CPU µs per request (simulator / floor proxy / load generator): ${cpu(runs.floor)}`,
      },
      rate(runs.direct),
      rate(runs.floor),
      'higher',
    ),
  ]
}

// ---- row 2: LIST of the slices --------------------------------------------------------------------

const listTargets = { first: 1.2, relist: 1.05 }

function listBases(ctx: Context, format: Format) {
  const what = `LIST ${thousands(ctx.counts.slices)} slices ${label(format)}`
  const protobuf = format === 'protobuf'
  return {
    first: {
      id: `list.${format}.first`,
      name: `${what}: kube-proxy 1st list (cached+filtered) vs kubectl`,
      unit: 'ms',
      baselineLabel: 'pass-through',
      protobuf,
    },
    relist: { id: `list.${format}.relist`, name: `${what}: kube-proxy relist, unchanged, vs kubectl`, unit: 'ms', baselineLabel: 'pass-through', protobuf },
    pass: { id: `list.${format}.pass-through`, name: `${what}: kubectl through the hub vs direct`, unit: 'ms', baselineLabel: 'direct', protobuf },
  }
}

/** One round on a fresh hub (empty cache), so that kube-proxy's first list is really its first. */
interface Round {
  direct: Listed
  pass: number
  first: Listed
  relist: Listed
  passBytes: number
  passEncoding: string
  /** the hub's CPU ms for each list */
  cpu: { pass: number; first: number; relist: number }
}

async function listRound(ctx: Context, format: Format): Promise<Round> {
  const hub = await HubProcess.start(ctx.hubEntry, { server: ctx.sim.url })
  const agent = new Agent({ connections: 4, keepAliveTimeout: 60_000 })
  try {
    const kubectl = passThroughHeaders(format)
    const kubeProxy = clientHeaders(userAgents.kubeProxy, format)
    const list = async (headers: Record<string, string>, path = slicesPath) => {
      const { result, cpuMs } = await withCpu([hub.pid], () => timedList(hub.url + path, headers, agent))
      return { ...result, cpu: cpuMs[0] }
    }
    // warm-up: the caching and filtering paths as coredns on one service's slices (another scope:
    // kube-proxy's stays uncached), the pass-through path as kubectl, the simulator's list
    await list(clientHeaders('coredns/v1.8.6', format), warmUpPath)
    await list(kubectl)
    await timedList(ctx.sim.url + slicesPath, kubectl, agent)
    const pass1 = await list(kubectl)
    const first = await list(kubeProxy)
    const relist = await list(kubeProxy)
    const pass2 = await list(kubectl)
    const direct = await timedList(ctx.sim.url + slicesPath, kubectl, agent)
    if (format === 'protobuf' && !first.contentType.startsWith(protobufType)) throw new Error(`kube-proxy's protobuf list was answered in ${first.contentType}`)
    return {
      direct,
      pass: (pass1.ms + pass2.ms) / 2,
      first,
      relist,
      passBytes: pass1.bytes,
      passEncoding: pass1.encoding,
      cpu: { pass: (pass1.cpu + pass2.cpu) / 2, first: first.cpu, relist: relist.cpu },
    }
  } finally {
    await agent.close()
    await hub.stop()
  }
}

export async function listRows(ctx: Context): Promise<Row[]> {
  const rows: Row[] = []
  for (const format of formats) {
    const bases = listBases(ctx, format)
    const specs = [
      { base: bases.first, better: 'lower' as const, target: `≤ ${listTargets.first}x` },
      { base: bases.relist, better: 'lower' as const, target: `≤ ${listTargets.relist}x` },
      { base: bases.pass, better: 'lower' as const, target: '—' },
    ]
    if (format === 'protobuf' && ctx.noProtobuf) {
      for (const s of specs) rows.push(naRow(s.base, s.better, s.target, ctx.noProtobuf))
      continue
    }
    await guarded(rows, specs, async () => {
      const rounds: Round[] = []
      for (let r = 0; r < ctx.counts.listRounds; r++) rounds.push(await listRound(ctx, format))
      const pass = median(rounds.map(r => r.pass))
      const { first, passBytes, passEncoding } = rounds[0]
      const sizes = `kubectl got ${(passBytes / 1e6).toFixed(1)} MB (${passEncoding === 'gzip' ? 'gzip' : 'plain'} ${label(format)}), kube-proxy ${(first.bytes / 1e6).toFixed(1)} MB (${first.encoding === 'gzip' ? 'gzip' : 'plain'}, filtered)`
      const cpu = (k: keyof Round['cpu']) => median(rounds.map(r => r.cpu[k])).toFixed(0)
      return [
        ratioRow(
          {
            ...bases.first,
            note: `median of ${rounds.length} fresh hubs; ${sizes}; hub CPU ms per list: kubectl ${cpu('pass')}, kube-proxy 1st ${cpu('first')}, relist ${cpu('relist')}`,
          },
          pass,
          median(rounds.map(r => r.first.ms)),
          'lower',
          listTargets.first,
        ),
        ratioRow(bases.relist, pass, median(rounds.map(r => r.relist.ms)), 'lower', listTargets.relist),
        ratioRow({ ...bases.pass, note: relayed }, median(rounds.map(r => r.direct.ms)), pass, 'lower'),
      ]
    })
  }
  return rows
}

// ---- row 3: a watch stream of slice events ----------------------------------------------------------

interface Rate {
  rate: number
  cpuMs: number[]
}

/** Events per second one watch delivers while the simulator modifies `count` slices as fast as it can; CPU ms of the simulator and the hub meanwhile. */
/** the kube-proxy watch row's hub: room for a whole burst the load generator reads behind */
const watchRowBacklogBytes = 256 * 2 ** 20

async function watchRate(
  ctx: Context,
  hub: HubProcess,
  base: string,
  headers: Record<string, string>,
  count: number,
): Promise<{ rate: number; cpuMs: number[] }> {
  const format: Format = headers.accept.startsWith(protobufType) ? 'protobuf' : 'json'
  const rv: string = await ctx.sim.call('resourceVersion')
  const watch = await openWatch(base + slicesWatchPath(rv), headers)
  try {
    if (format === 'protobuf' && !watch.contentType.startsWith(protobufType)) throw new Error(`the protobuf watch was answered in ${watch.contentType}`)
    const { result: rate, cpuMs } = await withCpu([ctx.sim.pid, hub.pid], async () => {
      const start = performance.now()
      const writes = ctx.sim.call('modifySlices', { count })
      const end = await watch.waitFor(count, 15_000 + count * 5).catch((error: Error) => {
        throw new Error(`${headers['user-agent']}'s ${format} watch through ${base === ctx.sim.url ? 'nothing (direct)' : 'the hub'}: ${error.message}`)
      })
      await writes
      return count / ((end - start) / 1000)
    })
    return { rate, cpuMs }
  } finally {
    watch.close()
  }
}

export async function watchRows(ctx: Context, hub: HubProcess): Promise<Row[]> {
  const rows: Row[] = []
  const n = ctx.counts.watchEvents
  for (const format of formats) {
    const what = `WATCH ${thousands(n)} slice events ${label(format)}`
    const protobuf = format === 'protobuf'
    const recorded = {
      id: `watch.${format}.recorded`,
      name: `${what}: kube-proxy (cached+filtered) vs kubectl`,
      unit: 'events/s',
      baselineLabel: 'pass-through',
      protobuf,
    }
    const pass = { id: `watch.${format}.pass-through`, name: `${what}: kubectl through the hub vs direct`, unit: 'events/s', baselineLabel: 'direct', protobuf }
    const specs = [
      { base: recorded, better: 'higher' as const, target: '≥ 0.8x' },
      { base: pass, better: 'higher' as const, target: '—' },
    ]
    if (protobuf && ctx.noProtobuf) {
      for (const s of specs) rows.push(naRow(s.base, s.better, s.target, ctx.noProtobuf))
      continue
    }
    await guarded(rows, specs, async () => {
      const runs = { direct: [] as Rate[], pass: [] as Rate[], recorded: [] as Rate[] }
      let stalled: string | undefined // kube-proxy's measure failed: its row says why, the baseline's stands
      for (let r = 0; r < ctx.counts.watchRounds; r++) {
        runs.direct.push(await watchRate(ctx, hub, ctx.sim.url, passThroughHeaders(format), n))
        runs.pass.push(await watchRate(ctx, hub, hub.url, passThroughHeaders(format), n))
        if (stalled) continue
        // kube-proxy on a hub of its own, started for this measure: the cache its list opens (a
        // shared watch) follows every slice write, and must not be busy with the baselines' bursts
        // a burst of slice writes outruns this load generator's reader (kube-proxy's Go decoder reads
        // faster): past the default --max-watch-backlog (4 MiB) the hub would end the watch as
        // kube-apiserver ends a slow watcher. This row measures throughput; the attack group measures the bound.
        const own = await HubProcess.start(ctx.hubEntry, { server: ctx.sim.url, extraArgs: ['--max-watch-backlog', String(watchRowBacklogBytes)] })
        try {
          const kubeProxy = clientHeaders(userAgents.kubeProxy, format)
          await timedList(own.url + slicesPath, kubeProxy) // kube-proxy lists, then watches from there
          runs.recorded.push(await watchRate(ctx, own, own.url, kubeProxy, n))
        } catch (error) {
          stalled = `failed: ${(error as Error).message.split('\n')[0]}`
          console.error(`bench: ${recorded.id}: ${(error as Error).stack}\nthe hub's last lines:\n${own.log.split('\n').slice(-8).join('\n')}`)
        } finally {
          await own.stop()
        }
      }
      const rate = (r: Rate[]) => mean(r.map(x => x.rate))
      /** CPU µs per event, simulator / hub */
      const cpu = (r: Rate[]) => [0, 1].map(i => ((mean(r.map(x => x.cpuMs[i])) * 1000) / n).toFixed(0)).join(' / ')
      const note = `mean of ${ctx.counts.watchRounds}, first write to last event; kube-proxy on a fresh hub after its list, --max-watch-backlog ${watchRowBacklogBytes / 2 ** 20} MiB (the burst outruns this reader); CPU µs per event (simulator / hub): direct ${cpu(runs.direct)}, kubectl ${cpu(runs.pass)}, kube-proxy ${cpu(runs.recorded)}`
      return [
        stalled ? naRow(recorded, 'higher', '≥ 0.8x', stalled) : ratioRow({ ...recorded, note }, rate(runs.pass), rate(runs.recorded), 'higher', 0.8),
        ratioRow({ ...pass, note: relayed }, rate(runs.direct), rate(runs.pass), 'higher'),
      ]
    })
  }
  return rows
}

// ---- row 4: delivery delay to many watchers --------------------------------------------------------

/** Delays (ms) from each stamped write in the simulator to its arrival at each of `watchers` watchers. */
async function deliveryDelays(ctx: Context, base: string): Promise<number[]> {
  const { watchers, stampedWrites, stampIntervalMs } = ctx.counts
  const rv: string = await ctx.sim.call('resourceVersion')
  const agent = new Agent({ connections: watchers + 1, keepAliveTimeout: 60_000 })
  const delays: number[] = []
  const onFrame = (frame: Buffer, arrivedAt: number) => {
    const event = JSON.parse(frame.toString())
    const stamp = Number(event.object?.metadata?.annotations?.[writtenAtAnnotation])
    if (event.type === 'MODIFIED' && Number.isFinite(stamp)) delays.push(arrivedAt - stamp)
  }
  const headers = clientHeaders(userAgents.kubelet, 'json')
  const watches = await Promise.all(Array.from({ length: watchers }, () => openWatch(base + watchedConfigMapsWatchPath(rv), headers, onFrame, agent)))
  try {
    await ctx.sim.call('stampedWrites', { count: stampedWrites, intervalMs: stampIntervalMs })
    await Promise.all(watches.map(w => w.waitFor(stampedWrites, 30_000)))
    return delays
  } finally {
    for (const w of watches) w.close()
    await agent.destroy()
  }
}

export async function deliveryRows(ctx: Context, hub: HubProcess): Promise<Row[]> {
  const { watchers, stampedWrites, stampIntervalMs } = ctx.counts
  const direct = await deliveryDelays(ctx, ctx.sim.url)
  const via = await deliveryDelays(ctx, hub.url)
  const p99 = { direct: percentile(direct, 99), hub: percentile(via, 99) }
  return [
    figureRow(
      {
        id: 'watchers.p99',
        name: `${watchers} watchers of one ConfigMap list (kubelet): p99 delivery delay`,
        unit: 'ms',
        baselineLabel: 'direct',
        note: `${stampedWrites} writes ${stampIntervalMs} ms apart, ${thousands(via.length)} deliveries; p50 direct ${percentile(direct, 50).toFixed(2)} ms, hub ${percentile(via, 50).toFixed(2)} ms; max hub ${Math.max(...via).toFixed(1)} ms`,
      },
      p99.direct,
      p99.hub,
      'lower',
      '≤ 50 ms',
      p99.hub <= 50,
    ),
  ]
}
