// The leader hubs rows: node pools of built hubs (a process each) against the simulator over TLS,
// each node with kube-proxy (protobuf), coredns and kubelet listing and watching through its hub,
// a steady trickle of EndpointSlice changes; a quiet stretch, then each pool's leader SIGKILLed
// twice, then the cloud refusing connections for a while. Run with --pool-sharing=on, then =off
// with the same nodes killed, and compared: what the apiserver serves each pool for the pool-wide
// resources (bytes, watches; counted at the simulator's own HTTP server), the lists the nodes'
// clients make, how long after a kill every follower reads from a new leader again with every
// change seen. Short lease timings, so the run stays short; the rows say which.
import { Agent } from 'undici'
import { figureRow } from './report.ts'
import type { Row } from './report.ts'
import { sleep } from './processes.ts'
import { ApiserverTally, nodeClients, PoolHubChild, poolSimulator } from './pool-fleet.ts'
import type { PoolClient, PoolHubTimings, PoolNode, PoolTally } from './pool-fleet.ts'

export interface PoolCounts {
  pools: number
  hubsPerPool: number
  services: number
  /** one EndpointSlice changed every this many ms, all along */
  churnIntervalMs: number
  /** the quiet stretch bytes and watches are measured in before any kill */
  steadyMs: number
  outageMs: number
  /** after each disruption, before the next */
  settleMs: number
  timings: PoolHubTimings
  /** how long a pool is given to resync before its time is reported as that long */
  resyncCapMs: number
  /** why the fleet is the size it is, when not the issue's */
  scaleNote?: string
}

interface PoolRun {
  nodesPerPool: number
  /** per pool: the quiet stretch, and the whole measured run (quiet stretch, kills, outage) */
  steady: PoolTally[]
  whole: PoolTally[]
  /** each node's own pool-wide bytes over the same stretches, the nodes that lived through the run */
  nodeSteadyBytes: number[]
  nodeWholeBytes: number[]
  /** open pool-wide watches per pool: after the quiet stretch, and at the end */
  openSteady: number[]
  openEnd: number[]
  clientLists: number
  /** which clients listed again: component and path, how many times */
  relisted: Map<string, number>
  /** per kill, per pool: ms from the kill to resynced (capped) */
  resyncMs: number[][]
  outageRecoveryMs: number
  killed: string[][]
  /** hubs that exited without being killed, and the first error they printed */
  crashed: string[]
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
const mean = (xs: number[]) => sum(xs) / xs.length
const minus = (a: PoolTally | undefined, b: PoolTally | undefined): PoolTally => ({
  lists: (a?.lists ?? 0) - (b?.lists ?? 0),
  watches: (a?.watches ?? 0) - (b?.watches ?? 0),
  openWatches: a?.openWatches ?? 0,
  bytes: (a?.bytes ?? 0) - (b?.bytes ?? 0),
})

/** Polls `check` every 250 ms; the ms it took, or undefined once `capMs` went by. */
async function waitFor(check: () => Promise<boolean> | boolean, capMs: number, from = performance.now()): Promise<number | undefined> {
  for (;;) {
    if (await check()) return performance.now() - from
    if (performance.now() - from > capMs) return undefined
    await sleep(250)
  }
}

/** Runs `work` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++
        out[i] = await work(items[i])
      }
    }),
  )
  return out
}

const slice = (s: number, nodes: string[], seq: number) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: `svc-${s}-x`, namespace: 'pool-bench', labels: { 'kubernetes.io/service-name': `svc-${s}` }, annotations: { seq: String(seq) } },
  addressType: 'IPv4',
  ports: [{ port: 80, protocol: 'TCP' }],
  endpoints: nodes.map((node, i) => ({ addresses: [`10.${s % 250}.${Math.floor(i / 250)}.${i % 250}`], conditions: { ready: true }, nodeName: node })),
})

async function runPools(
  entry: string,
  counts: PoolCounts,
  sharing: boolean,
  killPlan: string[][] | undefined,
  progress: (what: string) => void,
): Promise<PoolRun> {
  const poolNames = Array.from({ length: counts.pools }, (_, p) => `pool-${String.fromCharCode(97 + p)}`)
  const layout = Object.fromEntries(poolNames.map(p => [p, Array.from({ length: counts.hubsPerPool }, (_, i) => `${p}-node-${i}`)]))
  const { sim, nodes } = await poolSimulator(layout)
  const poolOf = new Map(nodes.map(n => [n.name, n.pool]))
  const tally = new ApiserverTally(sim.port, node => poolOf.get(node))
  const agent = new Agent({ connections: 512, keepAliveTimeout: 60_000 })
  const hubs: PoolHubChild[] = []
  const clients = new Map<string, PoolClient[]>()
  let churn: NodeJS.Timeout | undefined
  try {
    sim.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'pool-bench' } })
    const endpointNodes = nodes.slice(0, 10).map(n => n.name)
    for (let s = 0; s < counts.services; s++) {
      sim.create({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: `svc-${s}`, namespace: 'pool-bench' },
        spec: { ports: [{ port: 80, protocol: 'TCP' }], selector: { app: `svc-${s}` } },
      })
      sim.create(slice(s, endpointNodes, 0))
    }
    let seq = 0
    /** one EndpointSlice changed; its resourceVersion */
    const change = (): number => {
      const s = seq % counts.services
      const current = sim.get('discovery.k8s.io/v1', 'EndpointSlice', 'pool-bench', `svc-${s}-x`)
      sim.update({ ...current, metadata: { ...current.metadata, annotations: { seq: String(++seq) } } })
      return Number(sim.currentResourceVersion())
    }

    hubs.push(...(await inBatches(nodes, 4, node => PoolHubChild.start(entry, node, sharing, counts.timings))))
    progress(`pool: ${hubs.length} hubs up`)
    const hubsOf = (pool: string) => hubs.filter(h => h.node.pool === pool && h.alive)
    const slicesSeen = (node: PoolNode, rv: number) => (clients.get(node.name) ?? []).filter(c => c.path.includes('endpointslices')).every(c => c.seen >= rv)
    const some = (names: string[]) => `${names.slice(0, 3).join(', ')}${names.length > 3 ? ` and ${names.length - 3} more` : ''}`
    /** why a pool is not synced: '' once every client has seen `rv` and (sharing) one leader is followed by every other hub with every pool-wide cache */
    const notSynced = async (pool: string, rv: number, excluded: Set<string>): Promise<string> => {
      const alive = hubsOf(pool)
      const behind = alive.filter(h => !slicesSeen(h.node, rv)).map(h => h.node.name)
      if (behind.length > 0) return `the clients of ${some(behind)} have not seen the change`
      if (!sharing) return ''
      const states = await Promise.all(alive.map(h => h.pool()))
      const leaders = states.filter(s => s?.role === 'leader' && !excluded.has(s.identity))
      if (leaders.length !== 1) return `${leaders.length} leaders`
      const astray = alive.filter(
        (_, i) =>
          states[i] !== leaders[0] &&
          !(
            states[i]?.role === 'follower' &&
            states[i].leader?.identity === leaders[0].identity &&
            states[i].resources.every((r: { from: string }) => r.from === 'leader')
          ),
      )
      return astray.length === 0 ? '' : `${some(astray.map(h => h.node.name))} not following ${leaders[0].identity} with every cache`
    }
    /** the last reason each pool was not synced */
    const why = new Map<string, string>()
    const synced = async (pool: string, rv: number, excluded: Set<string> = new Set()): Promise<boolean> => {
      why.set(pool, await notSynced(pool, rv, excluded))
      return why.get(pool) === ''
    }
    const stillWhy = () =>
      poolNames
        .filter(p => why.get(p))
        .map(p => `${p}: ${why.get(p)}`)
        .join('; ')
    if (sharing) {
      const formed = await waitFor(async () => (await Promise.all(poolNames.map(p => synced(p, -1)))).every(Boolean), 60_000)
      progress(formed === undefined ? `pool: the pools did not form within 60 s (${stillWhy()})` : 'pool: a leader per pool, followed')
    }

    for (const hub of hubs) {
      const own = nodeClients(hub.node.name, hub.proxyUrl, agent)
      clients.set(hub.node.name, own)
      for (const c of own) c.start()
    }
    const all = () => [...clients.values()].flat()
    if ((await waitFor(() => all().every(c => c.version !== undefined), 120_000)) === undefined) {
      const missing = [...clients].flatMap(([node, own]) =>
        own.filter(c => c.version === undefined).map(c => `${node} ${c.userAgent.split('/')[0]} ${c.path}: ${c.problem}`),
      )
      const dead = hubs.filter(h => !h.alive)
      throw new Error(
        `${missing.length} clients did not list within 120 s (${missing.slice(0, 2).join('; ')}); ${dead.length} hubs exited${dead[0] ? `: ${dead[0].node.name} ${dead[0].death}` : ''}`,
      )
    }
    // a change of its own: the Leases' renewals move the cluster's resourceVersion past anything a slice watcher sees
    const startRv = change()
    if ((await waitFor(async () => (await Promise.all(poolNames.map(p => synced(p, startRv)))).every(Boolean), 60_000)) === undefined)
      progress(`pool: not synced within 60 s (${stillWhy()})`)
    const listsBefore = new Map(all().map(c => [c, c.lists]))
    progress(`pool: ${all().length} clients synced`)
    churn = setInterval(change, counts.churnIntervalMs)
    await sleep(counts.settleMs)

    const s0 = tally.snapshot()
    await sleep(counts.steadyMs)
    const s1 = tally.snapshot()
    const openSteady = poolNames.map(p => tally.pool(p).openWatches)

    /** ms each pool took to resync after a disruption at `from` (capped), `gone` no longer leading */
    const resync = async (from: number, gone: Set<string>): Promise<number[]> => {
      const rv = change()
      return Promise.all(poolNames.map(async p => (await waitFor(() => synced(p, rv, gone), counts.resyncCapMs, from)) ?? counts.resyncCapMs))
    }
    const killed: string[][] = []
    const resyncMs: number[][] = []
    for (let k = 0; k < 2; k++) {
      let victims: string[]
      if (killPlan) victims = killPlan[k]
      else {
        const states = await Promise.all(hubs.filter(h => h.alive).map(h => h.pool()))
        victims = states.filter(s => s?.role === 'leader').map(s => s.identity as string)
      }
      const dying = hubs.filter(h => victims.includes(h.node.name))
      // the node's own clients go with it; they are no one's followers
      await Promise.all(dying.flatMap(h => clients.get(h.node.name)!.map(c => c.stop())))
      for (const h of dying) clients.delete(h.node.name)
      const from = performance.now()
      await Promise.all(dying.map(h => h.kill()))
      killed.push(victims)
      resyncMs.push(await resync(from, new Set(victims)))
      progress(`pool: killed ${victims.join(', ')}; resynced in ${resyncMs[k].map(ms => (ms / 1000).toFixed(1)).join(' / ')} s ${stillWhy()}`)
      await sleep(counts.settleMs)
    }

    await sim.setFault('refuse')
    await sleep(counts.outageMs)
    await sim.setFault('none')
    const back = performance.now()
    const outageRecoveryMs = Math.max(...(await resync(back, new Set())))
    progress(`pool: the cloud back ${counts.outageMs / 1000} s later; resynced in ${(outageRecoveryMs / 1000).toFixed(1)} s ${stillWhy()}`)
    await sleep(counts.settleMs)
    const s2 = tally.snapshot()
    const openEnd = poolNames.map(p => tally.pool(p).openWatches)

    const living = nodes.filter(n => !killed.flat().includes(n.name)).map(n => n.name)
    const crashed = hubs
      .filter(h => !h.alive && living.includes(h.node.name))
      .map(h => `${h.node.name} (${h.log.split('\n').find(line => /^\w*Error\b|Error \[/.test(line)) ?? 'no error printed'})`)
    const nodeBytes = (a: Map<string, number>, b: Map<string, number>) => living.map(n => (a.get(n) ?? 0) - (b.get(n) ?? 0))
    return {
      nodesPerPool: counts.hubsPerPool,
      steady: poolNames.map(p => minus(s1.pools.get(p), s0.pools.get(p))),
      whole: poolNames.map(p => minus(s2.pools.get(p), s0.pools.get(p))),
      nodeSteadyBytes: nodeBytes(s1.nodeBytes, s0.nodeBytes),
      nodeWholeBytes: nodeBytes(s2.nodeBytes, s0.nodeBytes),
      openSteady,
      openEnd,
      clientLists: sum(all().map(c => c.lists - (listsBefore.get(c) ?? 0))),
      relisted: all().reduce((m, c) => {
        const n = c.lists - (listsBefore.get(c) ?? 0)
        const key = `${c.userAgent.split('/')[0]} ${c.path.split('?')[0]}`
        return n > 0 ? m.set(key, (m.get(key) ?? 0) + n) : m
      }, new Map<string, number>()),
      resyncMs,
      outageRecoveryMs,
      killed,
      crashed,
    }
  } finally {
    clearInterval(churn)
    await Promise.all([...clients.values()].flat().map(c => c.stop()))
    await Promise.allSettled(hubs.map(h => h.stop()))
    tally.close()
    await agent.close()
    await sim.close()
  }
}

/** --pool-sharing=on against =off, same fleet, same kills, same outage. */
export async function poolRows(entry: string, counts: PoolCounts, progress: (what: string) => void = () => {}): Promise<Row[]> {
  progress(`pool: ${counts.pools} × ${counts.hubsPerPool} hubs, --pool-sharing=on`)
  const on = await runPools(entry, counts, true, undefined, progress)
  progress(`pool: the same with --pool-sharing=off (killing ${on.killed.flat().join(', ')})`)
  const off = await runPools(entry, counts, false, on.killed, progress)
  const kb = (n: number) => n / 1024
  const t = counts.timings
  const leaseS = t.leaseDurationMs / 1000
  const timings = `lease ${leaseS} s, renew deadline ${t.renewDeadlineMs / 1000} s, retry ${t.retryPeriodMs / 1000} s (the default 15/10/2 s scaled down to keep the run short)`
  const fleet = `${counts.pools} pools × ${counts.hubsPerPool} hubs`
  const story = `two leader kills per pool and a ${counts.outageMs / 1000} s cloud outage`
  const base = (id: string, name: string, unit: string) => ({ id: `pool.${id}`, name: `${fleet}: ${name}`, unit, baselineLabel: '--pool-sharing=off' })
  const perPool = (xs: number[], f: (x: number) => string) => xs.map(f).join(' / ')
  const oneNodeSteady = median(off.nodeSteadyBytes)
  const oneNodeWhole = median(off.nodeWholeBytes)
  const onSteady = mean(on.steady.map(p => p.bytes))
  const onWhole = mean(on.whole.map(p => p.bytes))
  const expectedWatches = median(off.openSteady) / counts.hubsPerPool
  const onWatches = Math.max(...on.openSteady, ...on.openEnd)
  const resync = on.resyncMs.flat()
  const cap = counts.resyncCapMs
  const capped = resync.filter(ms => ms >= cap).length
  const changesPerS = 1000 / counts.churnIntervalMs
  const crashed = [...on.crashed, ...off.crashed].length > 0 ? `; HUBS EXITED on their own: ${[...on.crashed, ...off.crashed].join(', ')}` : ''
  const relists = (run: PoolRun) => [...run.relisted].map(([client, n]) => `${client} ×${n}`).join(', ') || 'none'
  return [
    figureRow(
      {
        ...base('bytes-steady', `pool-wide bytes from the apiserver per pool, ${counts.steadyMs / 1000} s with no kill`, 'KB'),
        note: `per pool ${perPool(
          on.steady.map(p => p.bytes),
          b => kb(b).toFixed(1),
        )} KB; one node's (median, sharing off) ${kb(oneNodeSteady).toFixed(1)} KB; ${changesPerS} EndpointSlice changes/s; response bodies for services, endpoints, endpointslices, nodes lists and watches of the pool's nodes, counted at the simulator${counts.scaleNote ? `; ${counts.scaleNote}` : ''}`,
      },
      kb(mean(off.steady.map(p => p.bytes))),
      kb(onSteady),
      'lower',
      `≤ 1.2x one node's (${kb(oneNodeSteady).toFixed(1)} KB)`,
      onSteady <= 1.2 * oneNodeSteady,
    ),
    figureRow(
      {
        ...base('bytes', `the same through ${story}`, 'KB'),
        note: `per pool ${perPool(
          on.whole.map(p => p.bytes),
          b => kb(b).toFixed(1),
        )} KB, one node's ${kb(oneNodeWhole).toFixed(1)} KB; after each kill every follower reads from the cloud until a new leader (about a lease), so each kill costs about followers × lease × changes; a bench compressing 2 kills and an outage into ${((counts.steadyMs + 2 * (leaseS * 1000 + counts.settleMs) + counts.outageMs) / 1000).toFixed(0)} s shows that cost far above a day's share; ${timings}`,
      },
      kb(mean(off.whole.map(p => p.bytes))),
      kb(onWhole),
      'lower',
      `≤ 1.2x one node's (${kb(oneNodeWhole).toFixed(1)} KB)`,
      onWhole <= 1.2 * oneNodeWhole,
    ),
    figureRow(
      {
        ...base('watches', 'pool-wide watches open at the apiserver per pool', 'watches'),
        note: `after the quiet stretch ${perPool(on.openSteady, String)}, at the end ${perPool(on.openEnd, String)}; watches opened per pool through the run ${perPool(
          on.whole.map(p => p.watches),
          String,
        )} (sharing off: ${perPool(
          off.whole.map(p => p.watches),
          String,
        )}); pool-wide lists served per pool ${perPool(
          on.whole.map(p => p.lists),
          String,
        )} (off: ${perPool(
          off.whole.map(p => p.lists),
          String,
        )})`,
      },
      Math.max(...off.openSteady, ...off.openEnd),
      onWatches,
      'lower',
      `≤ ${expectedWatches} (one node's resources × formats × 1 leader)`,
      onWatches <= expectedWatches,
    ),
    figureRow(
      {
        ...base('client-lists', `lists by the nodes' clients after their first, through ${story}`, 'lists'),
        ...(on.clientLists + off.clientLists > 0 ? { note: `sharing on: ${relists(on)}; off: ${relists(off)}` } : {}),
      },
      off.clientLists,
      on.clientLists,
      'lower',
      '0',
      on.clientLists === 0,
    ),
    figureRow(
      {
        ...base('resync', 'time from a leader kill to every follower reading from the new leader with every change seen', 's'),
        note: `per kill, per pool: ${on.resyncMs.map(k => k.map(ms => (ms / 1000).toFixed(1)).join(' / ')).join('; ')} s${capped > 0 ? ` (${capped} not resynced within ${cap / 1000} s: given as ${cap / 1000} s)` : ''}; after the outage ${(on.outageRecoveryMs / 1000).toFixed(1)} s; sharing off: the clients of the other nodes see the change in ${(Math.max(...off.resyncMs.flat()) / 1000).toFixed(1)} s; ${timings}${crashed}`,
      },
      Math.max(...off.resyncMs.flat()) / 1000,
      Math.max(...resync) / 1000,
      'lower',
      `≤ ${leaseS + 2} s (lease + 2 s)`,
      Math.max(...resync) <= t.leaseDurationMs + 2_000,
    ),
  ]
}
