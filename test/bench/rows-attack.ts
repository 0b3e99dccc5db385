// Row 12: local clients that misbehave (issue 31), against the built hub and the bench's simulator
// process, a fresh hub for each measure so that one's leftovers are not the next one's figure:
//   - 50 watches and 50 lists of every slice at resourceVersion=0 that never read their socket:
//     the hub's RSS while they hang on, its open fds once its --stall-timeout has passed, a kubelet
//     GET's p99 and a kube-proxy watch event's delay under them
//   - 20 reading watches of every slice (kubelet; kube-proxy, filtered; kube-proxy with
//     sendInitialEvents): what the hub keeps per watch, and kubelet's GET p99 while they stream
//   - 30 paged lists whose first page is read and never continued: the hub's growth
//   - 1,000 connections each doing one GET, then closed: RSS and fds back to idle
import { Agent, request } from 'undici'
import type { Context } from './context.ts'
import { sleep } from './processes.ts'
import { clientHeaders, median, openWatch, userAgents } from './load.ts'
import type { OpenWatch } from './load.ts'
import { figureRow, guarded, ratioRow, thousands } from './report.ts'
import type { Row } from './report.ts'
import { eventDelays, fdCount, getOnSocket, HeapProbe, kubeProxyEventWatch, kubeProxySelector, loopUntil, nodePath, p99 } from './attack-clients.ts'
import { slices, snapshot, state, unreadRequest, until200, warmNodeGet, watchQuery, withHub } from './attack-clients.ts'
import type { Unread } from './attack-clients.ts'

export interface AttackCounts {
  /** watches that never read, and as many lists */
  unread: number
  /** how long they are left before the hub's RSS is read */
  holdMs: number
  /** when the hub is looked at again, from the attack's start: past its stall timeout */
  afterStallMs: number
  /** hub flags of the unread measure (quick: a short --stall-timeout, so its row has a figure) */
  unreadHubArgs: string[]
  readingWatches: number
  pagedLists: number
  connections: number
  /** slice writes timed through a kube-proxy watch, idle and under attack */
  eventProbes: number
}

const mib = (n: number): string => `${n.toFixed(1)} MiB`
const targets = { unreadRssMiB: 150, perWatchMiB: 1, getRatio: 2, answeredMs: 1_000, backToIdle: 0.1 }
/** a local client no filter or cache of the hub knows: its requests are relayed */
const generic = 'python-requests/2.31.0'
/** a node component whose reads are cached, and no filter applies to */
const flanneld = 'flanneld/v0.26.7 (linux/amd64) kubernetes/$Format'

export async function attackRows(ctx: Context, counts: AttackCounts): Promise<Row[]> {
  const rows: Row[] = []
  await unreadRows(ctx, counts, rows)
  await readingRows(ctx, counts, rows)
  await pagedRows(ctx, counts, rows)
  await connectionRows(ctx, counts, rows)
  return rows
}

// ---- clients that never read ------------------------------------------------------------------------

async function unreadRows(ctx: Context, counts: AttackCounts, rows: Row[]): Promise<void> {
  const what = `${counts.unread} watches + ${counts.unread} lists of ${thousands(ctx.counts.slices)} slices at resourceVersion=0, never read`
  const bases = {
    rss: { id: 'attack.unread.rss', name: `${what}: hub RSS after ${counts.holdMs / 1000} s`, unit: 'MiB', baselineLabel: 'idle' },
    stalled: { id: 'attack.unread.stalled-fds', name: `${what}: hub open fds ${counts.afterStallMs / 1000} s on`, unit: 'fds', baselineLabel: 'idle' },
    get: { id: 'attack.unread.get-p99', name: `${what}: kubelet GET Node p99`, unit: 'ms', baselineLabel: 'idle' },
    event: { id: 'attack.unread.event-delay', name: `${what}: kube-proxy watch event delay, worst`, unit: 'ms', baselineLabel: 'idle' },
  }
  const specs = [
    { base: bases.rss, better: 'lower' as const, target: `≤ ${targets.unreadRssMiB} MiB` },
    { base: bases.stalled, better: 'lower' as const, target: `≤ idle + ${targets.backToIdle * 100} %` },
    { base: bases.get, better: 'lower' as const, target: `≤ ${thousands(targets.answeredMs)} ms` },
    { base: bases.event, better: 'lower' as const, target: `≤ ${thousands(targets.answeredMs)} ms` },
  ]
  await guarded(rows, specs, () =>
    withHub(ctx, { extraArgs: counts.unreadHubArgs }, async hub => {
      const port = Number(new URL(hub.url).port)
      const kubelet = clientHeaders(userAgents.kubelet, ctx.noProtobuf ? 'json' : 'protobuf')
      await warmNodeGet(hub, kubelet)
      await until200(hub, `${slices}?${kubeProxySelector}&resourceVersion=0`, clientHeaders(userAgents.kubeProxy, 'json'))
      const events = await kubeProxyEventWatch(ctx, hub)
      const clients: Unread[] = []
      try {
        await sleep(ctx.counts.settleMs)
        const getMs = ctx.counts.getSeconds * 1000
        const idle = {
          ...state(hub),
          get: await loopUntil(hub.url + nodePath, kubelet, () => true, getMs),
          events: await eventDelays(ctx, events, counts.eventProbes),
        }

        // half as kube-proxy (answered from the shared cache, filtered), half as a client the hub relays
        const started = performance.now()
        for (const path of [`${slices}?${watchQuery}`, `${slices}?resourceVersion=0`])
          for (let i = 0; i < counts.unread; i++)
            clients.push(
              unreadRequest(port, path, i % 2 === 0 ? clientHeaders(userAgents.kubeProxy, 'json') : { 'user-agent': generic, accept: 'application/json' }),
            )
        // the readings are taken on time whatever the hub's own answers do meanwhile
        const reading = (ms: number) =>
          sleep(Math.max(0, started + ms - performance.now())).then(() => {
            try {
              return { ...state(hub), s: (performance.now() - started) / 1000 }
            } catch (error) {
              return error as Error
            }
          })
        const [heldAt, afterAt] = [reading(counts.holdMs), reading(counts.afterStallMs)]
        await sleep(1_000)
        const [get, delays] = await Promise.all([loopUntil(hub.url + nodePath, kubelet, () => true, getMs), eventDelays(ctx, events, counts.eventProbes)])
        const held = await heldAt
        if (held instanceof Error) throw held
        const statuses = await Promise.all(clients.map(c => Promise.race([c.status, sleep(1).then(() => 0)])))
        const after = await afterAt
        if (after instanceof Error) throw after
        const tally = new Map<number, number>()
        for (const s of statuses) tally.set(s, (tally.get(s) ?? 0) + 1)
        const answered = [...tally].map(([s, n]) => `${s === 0 ? 'nothing yet' : s} × ${n}`).join(', ')
        const worst = (d: number[]) => Math.max(...d)
        const stallFlag = counts.unreadHubArgs.join(' ') || '--stall-timeout 60s (default)'
        return [
          figureRow(
            {
              ...bases.rss,
              note: `JSON, half as kube-proxy (its shared cache, filtered), half as ${generic} (relayed to the apiserver); answers: ${answered}; read at ${held.s.toFixed(1)} s; VmHWM ${mib(held.hwm)}; hub fds ${idle.fds} idle, ${held.fds} under attack; the clients' kernel receive buffers (not grown: never read) and the hub's socket send buffers hold some of it outside the hub's RSS`,
            },
            idle.rss,
            held.rss,
            'lower',
            `≤ ${targets.unreadRssMiB} MiB`,
            held.rss <= targets.unreadRssMiB,
          ),
          figureRow(
            {
              ...bases.stalled,
              note: `${stallFlag}; fds ${idle.fds} idle (with one kube-proxy watch open), ${held.fds} at ${held.s.toFixed(1)} s, ${after.fds} at ${after.s.toFixed(1)} s; RSS ${mib(idle.rss)} → ${mib(held.rss)} → ${mib(after.rss)}, VmHWM ${mib(after.hwm)}`,
            },
            idle.fds,
            after.fds,
            'lower',
            `≤ idle + ${targets.backToIdle * 100} %`,
            after.fds <= idle.fds * (1 + targets.backToIdle),
          ),
          figureRow(
            {
              ...bases.get,
              note: `one keep-alive connection, closed loop, ${getMs / 1000} s each (from 1 s into the attack, beside the event probes); ${thousands(idle.get.length)} GETs idle, ${thousands(get.length)} under attack; median ${median(idle.get).toFixed(2)} → ${median(get).toFixed(2)} ms`,
            },
            p99(idle.get),
            p99(get),
            'lower',
            `≤ ${thousands(targets.answeredMs)} ms`,
            p99(get) <= targets.answeredMs,
          ),
          figureRow(
            {
              ...bases.event,
              note: `${counts.eventProbes} writes of one slice in the simulator, each timed to its MODIFIED on a kube-proxy watch (JSON, reading) of the hub: idle ${idle.events.map(d => d.toFixed(0)).join(' ')} ms; under attack ${delays.map(d => d.toFixed(0)).join(' ')} ms`,
            },
            worst(idle.events),
            worst(delays),
            'lower',
            `≤ ${thousands(targets.answeredMs)} ms`,
            worst(delays) <= targets.answeredMs,
          ),
        ]
      } finally {
        for (const c of clients) c.socket.destroy()
        events.watch.close()
      }
    }),
  )
}

// ---- reading watches --------------------------------------------------------------------------------------

interface Reader {
  id: string
  who: string
  headers: Record<string, string>
  query: string
  /** the list that syncs the shared cache this watch is answered from */
  listQuery: string
  /** kubelet's GET p99 timed while the watches stream their initial events */
  timeGets: boolean
}

async function readingRows(ctx: Context, counts: AttackCounts, rows: Row[]): Promise<void> {
  const kubeProxy = clientHeaders(userAgents.kubeProxy, 'json')
  // kubelet's own format: as JSON, 10,000 unfiltered slices are 30 MB of initial events, more than
  // a watcher's budget in the hub before issue 31 (it ended such a watch at once, 0 events sent)
  const kubeletFormat = ctx.noProtobuf ? 'json' : 'protobuf'
  const readers: Reader[] = [
    {
      id: 'attack.watches.kubelet',
      who: `kubelet (no filter), ${kubeletFormat === 'json' ? 'JSON' : 'protobuf'}`,
      headers: clientHeaders(userAgents.kubelet, kubeletFormat),
      query: watchQuery,
      listQuery: 'resourceVersion=0',
      timeGets: true,
    },
    {
      id: 'attack.watches.kube-proxy',
      who: 'kube-proxy (servicetopology), JSON',
      headers: kubeProxy,
      query: `${kubeProxySelector}&${watchQuery}`,
      listQuery: `${kubeProxySelector}&resourceVersion=0`,
      timeGets: false,
    },
    {
      id: 'attack.watches.initial-events',
      who: 'kube-proxy, sendInitialEvents, JSON',
      headers: kubeProxy,
      query: `${kubeProxySelector}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&${watchQuery}`,
      listQuery: `${kubeProxySelector}&resourceVersion=0`,
      timeGets: false,
    },
  ]
  for (const reader of readers) await readingRow(ctx, counts, reader, rows)
}

async function readingRow(ctx: Context, counts: AttackCounts, reader: Reader, rows: Row[]): Promise<void> {
  const n = counts.readingWatches
  const what = `${n} reading watches of ${thousands(ctx.counts.slices)} slices as ${reader.who}`
  const perWatch = { id: `${reader.id}.per-watch`, name: `${what}: memory kept per watch`, unit: 'MiB', baselineLabel: 'target' }
  const gets = { id: `${reader.id}.get-p99`, name: `${what}: kubelet GET Node p99 while they stream`, unit: 'ms', baselineLabel: 'idle' }
  const specs = [
    { base: perWatch, better: 'lower' as const, target: `≤ ${targets.perWatchMiB} MiB` },
    ...(reader.timeGets ? [{ base: gets, better: 'lower' as const, target: `≤ ${targets.getRatio}x` }] : []),
  ]
  await guarded(rows, specs, () =>
    withHub(ctx, {}, async hub => {
      const kubelet = clientHeaders(userAgents.kubelet, ctx.noProtobuf ? 'json' : 'protobuf')
      const url = `${hub.url}${slices}?${reader.query}`
      const watches: OpenWatch[] = []
      const agent = new Agent({ connections: n + 2, keepAliveTimeout: 60_000 })
      const probe = await HeapProbe.open(hub)
      try {
        if (reader.timeGets) await warmNodeGet(hub, kubelet)
        // warm-up: the shared cache synced, and one watch through, so what all watches share is in before the count
        await until200(hub, `${slices}?${reader.listQuery}`, reader.headers)
        const warm = await openWatch(url, reader.headers, undefined, agent)
        await warm.waitFor(ctx.counts.slices, 120_000)
        warm.close()
        await sleep(ctx.counts.settleMs)
        const getMs = ctx.counts.getSeconds * 1000
        const idleGets = reader.timeGets ? await loopUntil(hub.url + nodePath, kubelet, () => true, getMs) : []
        const before = await snapshot(hub, probe)

        let streamed = false
        const started = performance.now()
        const loaded = reader.timeGets ? loopUntil(hub.url + nodePath, kubelet, () => streamed, 0) : Promise.resolve([])
        try {
          watches.push(...(await Promise.all(Array.from({ length: n }, () => openWatch(url, reader.headers, undefined, agent)))))
          await Promise.all(watches.map(w => w.waitFor(ctx.counts.slices, 300_000)))
        } finally {
          streamed = true
        }
        const streamMs = performance.now() - started
        const loadedGets = await loaded
        await sleep(ctx.counts.settleMs)
        const after = await snapshot(hub, probe)
        const openGets = reader.timeGets ? await loopUntil(hub.url + nodePath, kubelet, () => true, getMs) : []

        // the figure is RSS after a full GC: what the node pays. Heap + Buffers alone can look flat
        // while the allocator keeps what the watches' initial states once took (before issue 31:
        // heap -0.02 MiB, RSS +30 MiB per watch)
        const figure = (after.rss - before.rss) / n
        const how =
          before.kept && after.kept
            ? `RSS after a full GC (the hub's inspector) ${mib(before.rss)} → ${mib(after.rss)} / ${n} (before the GC ${mib(after.rssBeforeGc)}); heap + Buffers after the GC ${mib(before.kept.total)} → ${mib(after.kept.total)}, ${((after.kept.total - before.kept.total) / n).toFixed(2)} MiB per watch (heap ${mib(before.kept.heap)} → ${mib(after.kept.heap)})`
            : `RSS ${mib(before.rss)} → ${mib(after.rss)} / ${n}, ${ctx.counts.settleMs} ms after the last initial event, no GC forced (the hub's inspector did not start)`
        const result = [
          figureRow(
            {
              ...perWatch,
              note: `${how}; VmHWM ${mib(after.hwm)}; the ${n} watches had their ${thousands(ctx.counts.slices)} initial events each in ${(streamMs / 1000).toFixed(1)} s`,
            },
            targets.perWatchMiB,
            figure,
            'lower',
            `≤ ${targets.perWatchMiB} MiB`,
            figure <= targets.perWatchMiB,
          ),
        ]
        if (reader.timeGets)
          result.push(
            ratioRow(
              {
                ...gets,
                note: `one keep-alive connection, closed loop: idle ${getMs / 1000} s (${thousands(idleGets.length)} GETs), while the ${n} watches got their initial events ${(streamMs / 1000).toFixed(1)} s (${thousands(loadedGets.length)} GETs); p99 with the watches open and quiet ${p99(openGets).toFixed(2)} ms`,
              },
              p99(idleGets),
              p99(loadedGets),
              'lower',
              targets.getRatio,
            ),
          )
        return result
      } finally {
        for (const w of watches) w.close()
        probe?.close()
        await agent.destroy()
      }
    }),
  )
}

// ---- paged lists never continued ---------------------------------------------------------------------

async function pagedRows(ctx: Context, counts: AttackCounts, rows: Row[]): Promise<void> {
  const base = {
    id: 'attack.paged.rss',
    name: `${counts.pagedLists} paged lists of ${thousands(ctx.counts.configMaps)} ConfigMaps (limit=500, relayed and recorded) never continued: hub RSS`,
    unit: 'MiB',
    baselineLabel: 'before',
  }
  await guarded(rows, [{ base, better: 'lower', target: '—' }], () =>
    withHub(ctx, {}, async hub => {
      // ConfigMaps have no shared watch cache: a node component's list of them is relayed, and its
      // pages are held until the last one comes, to be recorded whole (flanneld: no filter on them)
      const headers = clientHeaders(flanneld, 'json')
      const path = '/api/v1/configmaps?limit=500'
      const probe = await HeapProbe.open(hub)
      try {
        await sleep(ctx.counts.settleMs)
        const before = await snapshot(hub, probe)
        let bytes = 0
        for (let i = 0; i < counts.pagedLists; i++) {
          await ctx.sim.call('modifySlices', { count: 1 }) // a new resourceVersion: each list's continue token its own
          const res = await request(hub.url + path, { headers })
          const body = Buffer.from(await res.body.arrayBuffer())
          if (res.statusCode !== 200) throw new Error(`LIST ${path}: ${res.statusCode} ${body.toString().slice(0, 300)}`)
          if (!(JSON.parse(body.toString()) as { metadata: { continue?: string } }).metadata.continue) throw new Error('the first page has no continue token')
          bytes += body.length
        }
        await sleep(ctx.counts.settleMs)
        const after = await snapshot(hub, probe)
        const kept =
          before.kept && after.kept
            ? ` (after a full GC; ${mib(after.rssBeforeGc)} before it); heap + Buffers after the GC ${mib(before.kept.total)} → ${mib(after.kept.total)}`
            : ''
        return [
          ratioRow(
            {
              ...base,
              note: `first pages read whole, ${(bytes / 1e6).toFixed(1)} MB in all; RSS ${ctx.counts.settleMs} ms after: ${after.rss >= before.rss ? '+' : ''}${mib(after.rss - before.rss)}${kept}; VmHWM ${mib(after.hwm)}`,
            },
            before.rss,
            after.rss,
            'lower',
          ),
        ]
      } finally {
        probe?.close()
      }
    }),
  )
}

// ---- connections opened and closed ------------------------------------------------------------------

async function connectionRows(ctx: Context, counts: AttackCounts, rows: Row[]): Promise<void> {
  const what = `${thousands(counts.connections)} connections, one kubelet GET each, all open at once, then closed`
  const target = `idle ± ${targets.backToIdle * 100} %`
  const bases = {
    rss: { id: 'attack.connections.rss', name: `${what}: hub RSS after`, unit: 'MiB', baselineLabel: 'idle' },
    fds: { id: 'attack.connections.fds', name: `${what}: hub open fds after`, unit: 'fds', baselineLabel: 'idle' },
  }
  const within = (idle: number, after: number) => Math.abs(after / idle - 1) <= targets.backToIdle
  await guarded(
    rows,
    [
      { base: bases.rss, better: 'lower', target },
      { base: bases.fds, better: 'lower', target },
    ],
    () =>
      withHub(ctx, {}, async hub => {
        const port = Number(new URL(hub.url).port)
        const headers = clientHeaders(userAgents.kubelet, 'json')
        const sockets: { destroy(): void }[] = []
        try {
          await warmNodeGet(hub, headers)
          await sleep(ctx.counts.settleMs)
          const idle = state(hub)
          const statuses: number[] = []
          // 100 at a time: the listen backlog is not what is measured
          for (let i = 0; i < counts.connections; i += 100) {
            const batch = await Promise.all(Array.from({ length: Math.min(100, counts.connections - i) }, () => getOnSocket(port, nodePath, headers)))
            for (const b of batch) (sockets.push(b.socket), statuses.push(b.status))
          }
          const peak = state(hub)
          for (const s of sockets.splice(0)) s.destroy()
          const deadline = performance.now() + 15_000
          while (fdCount(hub.pid) > idle.fds * (1 + targets.backToIdle) && performance.now() < deadline) await sleep(100)
          await sleep(ctx.counts.settleMs)
          const after = state(hub)
          const ok = statuses.filter(s => s === 200).length
          const note = `${ok} of ${statuses.length} answered 200; with all open: RSS ${mib(peak.rss)}, ${peak.fds} fds; ${ctx.counts.settleMs} ms after closing: RSS ${mib(idle.rss)} → ${mib(after.rss)}, fds ${idle.fds} → ${after.fds}; VmHWM ${mib(after.hwm)}`
          return [
            figureRow({ ...bases.rss, note }, idle.rss, after.rss, 'lower', target, within(idle.rss, after.rss)),
            figureRow({ ...bases.fds, note }, idle.fds, after.fds, 'lower', target, within(idle.fds, after.fds)),
          ]
        } finally {
          for (const s of sockets) s.destroy()
        }
      }),
  )
}
