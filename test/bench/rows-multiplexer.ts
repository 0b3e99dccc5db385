// Row 10: the multiplexer (issue 26). One shared watch cache per resource and wire format answers
// every narrower selector locally, and gets and lists at resourceVersion=0 from memory:
//   - distinct selectors listed and watched as kube-proxy: upstream watches per resource and format
//     (counted in the apiserver's own request log), the hub's RSS and /metrics series before and after
//   - GET of a Node at resourceVersion=0 as kubelet, 50 keep-alive connections: hub vs direct
//   - LIST of every slice at resourceVersion=0 as an unfiltered node component (flanneld), and as
//     kube-proxy (filtered) beside it: hub vs direct
// The selectors row runs against a simulator in this process (its request log is read directly: the
// row counts requests, it times nothing); the others against the bench's simulator process.
import { gunzipSync } from 'node:zlib'
import { Agent, request } from 'undici'
import type { Context } from './context.ts'
import { HubProcess, sleep, withCpu } from './processes.ts'
import { clientHeaders, closedLoop, loopCpu, loopP99, loopRate, median, openWatch, protobufType, timedList, userAgents } from './load.ts'
import type { Format, Listed, Loop, OpenWatch } from './load.ts'
import { figureRow, guarded, naRow, ratioRow, thousands } from './report.ts'
import type { Row } from './report.ts'
import * as objects from './objects.ts'
import { ApiServerSimulator } from '../simulator/index.ts'
import type { LoggedRequest } from '../simulator/index.ts'
import { decodeUnknown, decodeWatchEvent, splitList } from '../../lib/codec/protobuf.ts'

const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length
const label = (format: Format): string => (format === 'json' ? 'JSON' : 'protobuf')
/** kubelet as it is today (the bench's other rows send v1.24's) */
const kubelet133 = 'kubelet/v1.33.1 (linux/amd64) kubernetes/8adc0f0'
/** a node component no filter of the registry applies to (not among servicetopology's components) */
const flanneld = 'flanneld/v0.26.7 (linux/amd64) kubernetes/$Format'
const targets = { rssGrowthMiB: 10, getRatio: 1.5, listRatio: 0.5 }

export interface MultiplexerCounts {
  /** distinct selectors listed and watched */
  selectors: number
}

export async function multiplexerRows(ctx: Context, counts: MultiplexerCounts): Promise<Row[]> {
  const rows: Row[] = []
  await selectorRows(ctx, counts.selectors, rows)
  const hub = await HubProcess.start(ctx.hubEntry, { server: ctx.sim.url })
  try {
    await nodeGetRows(ctx, hub, rows)
    await sliceListRows(ctx, hub, rows)
  } finally {
    await hub.stop()
  }
  return rows
}

// ---- helpers ------------------------------------------------------------------------------------

/** A response body as sent, gunzipped if it was gzipped. */
async function bodyOf(res: Awaited<ReturnType<typeof request>>): Promise<Buffer> {
  const raw = Buffer.from(await res.body.arrayBuffer())
  return res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw
}

/** The resourceVersion and item count of a list, JSON or protobuf. */
function listOf(body: Buffer, contentType: string): { resourceVersion: string; items: number } {
  if (contentType.startsWith(protobufType)) {
    const parts = splitList(decodeUnknown(body).raw)
    return { resourceVersion: parts.resourceVersion, items: parts.items.length }
  }
  const list = JSON.parse(body.toString()) as { metadata: { resourceVersion: string }; items: unknown[] }
  return { resourceVersion: list.metadata.resourceVersion, items: list.items.length }
}

/**
 * A list, retried while the hub answers 429 (a shared watch cache's first list from the apiserver
 * is not in yet: the apiserver's own answer then, Retry-After 1).
 */
async function listUntilServed(
  url: string,
  headers: Record<string, string>,
  dispatcher: Agent,
  timeoutMs = 60_000,
): Promise<{ body: Buffer; contentType: string }> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const res = await request(url, { headers, dispatcher })
    const body = await bodyOf(res)
    if (res.statusCode === 200) return { body, contentType: String(res.headers['content-type'] ?? '') }
    if (res.statusCode !== 429 || performance.now() > deadline) throw new Error(`LIST ${url}: ${res.statusCode} ${body.toString().slice(0, 300)}`)
    await sleep(100)
  }
}

/** Lines of /metrics that are series (not HELP/TYPE comments, not blank). */
const seriesOf = (text: string): string[] => text.split('\n').filter(l => l !== '' && !l.startsWith('#'))

/** A series' name and labels, without its value. */
const seriesName = (line: string): string => line.slice(0, line.lastIndexOf(' '))

/** The sum of a metric's series whose labels include every `labels` pair. */
function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  return seriesOf(text)
    .filter(l => (l.startsWith(name + '{') || l.startsWith(name + ' ')) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
}

/** The wire format an upstream request asked for, by its Accept. */
function acceptFormat(r: LoggedRequest): string {
  const accept = String(r.headers.accept ?? '')
  if (accept.includes('as=PartialObjectMetadata')) return 'metadata'
  return accept.startsWith(protobufType) ? 'protobuf' : 'json'
}

// ---- selectors on one upstream watch --------------------------------------------------------------

/** Selector i: a service (i even, `app=svc-i`) or the slices of one (i odd, `kubernetes.io/service-name=svc-i`). */
function selectorPath(i: number): { resource: string; path: string; selector: string } {
  return i % 2 === 0
    ? { resource: 'services', path: '/api/v1/services', selector: `app=${objects.serviceName(i)}` }
    : { resource: 'endpointslices', path: '/apis/discovery.k8s.io/v1/endpointslices', selector: `kubernetes.io/service-name=${objects.serviceName(i)}` }
}

/** kube-proxy's reflector: a list at resourceVersion=0, then a watch from the list's version, kept open. */
async function listThenWatch(
  base: string,
  path: string,
  selector: string,
  headers: Record<string, string>,
  agent: Agent,
  onFrame?: (frame: Buffer) => void,
): Promise<{ watch: OpenWatch; items: number }> {
  const q = `labelSelector=${encodeURIComponent(selector)}`
  const listed = await listUntilServed(`${base}${path}?${q}&limit=500&resourceVersion=0`, headers, agent)
  const { resourceVersion, items } = listOf(listed.body, listed.contentType)
  const watch = await openWatch(
    `${base}${path}?allowWatchBookmarks=true&${q}&resourceVersion=${resourceVersion}&timeoutSeconds=540&watch=true`,
    headers,
    onFrame,
    agent,
  )
  return { watch, items }
}

/** The event type of a watch frame (the frame without its protobuf length prefix, or a JSON line). */
function eventType(frame: Buffer, format: Format): string {
  if (format === 'json') return (JSON.parse(frame.toString()) as { type: string }).type
  const prefixed = Buffer.allocUnsafe(frame.length + 4)
  prefixed.writeUInt32BE(frame.length, 0)
  frame.copy(prefixed, 4)
  return decodeWatchEvent(prefixed).type
}

async function selectorRows(ctx: Context, count: number, rows: Row[]): Promise<void> {
  const what = `${count} distinct selectors listed and watched (kube-proxy, services and slices)`
  const bases = {
    watches: {
      id: 'multiplexer.selectors.upstream-watches',
      name: `${what}: upstream watches per resource and format`,
      unit: 'watches',
      baselineLabel: 'target',
    },
    rss: { id: 'multiplexer.selectors.rss', name: `${what}: hub RSS`, unit: 'MiB', baselineLabel: 'before' },
    series: { id: 'multiplexer.selectors.series', name: `${what}: /metrics series`, unit: 'series', baselineLabel: 'before' },
  }
  const specs = [
    { base: bases.watches, better: 'lower' as const, target: '≤ 1' },
    { base: bases.rss, better: 'lower' as const, target: `+ ≤ ${targets.rssGrowthMiB} MiB` },
    { base: bases.series, better: 'lower' as const, target: 'unchanged' },
  ]
  await guarded(rows, specs, async () => {
    const services = Math.ceil(ctx.counts.slices / objects.slicesPerService)
    if (count >= services - 1) throw new Error(`${count} selectors need more than ${services} services`)
    // a simulator of its own, whose request log this process reads: the same cluster as the bench's
    const sim = await ApiServerSimulator.start({ bookmarkIntervalMs: 5_000 })
    const yieldToIo = (): Promise<void> => new Promise(resolve => setImmediate(resolve))
    try {
      for (const ns of objects.appNamespaces) sim.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })
      for (let i = 0; i < objects.nodeCount; i++) sim.create(objects.node(i))
      for (let s = 0; s < services; s++) {
        sim.create(objects.service(s))
        if (s % 200 === 199) await yieldToIo()
      }
      for (let i = 0; i < ctx.counts.slices; i++) {
        sim.create(objects.endpointSlice(i))
        if (i % 200 === 199) await yieldToIo()
      }
      const hub = await HubProcess.start(ctx.hubEntry, { server: sim.url })
      const agent = new Agent({ connections: count + 8, keepAliveTimeout: 60_000 })
      const watches: OpenWatch[] = []
      try {
        return await measureSelectors(ctx, sim, hub, agent, watches, count, services, bases)
      } finally {
        for (const w of watches) w.close()
        await agent.destroy()
        await hub.stop()
      }
    } finally {
      await sim.close()
    }
  })
}

async function measureSelectors(
  ctx: Context,
  sim: ApiServerSimulator,
  hub: HubProcess,
  agent: Agent,
  watches: OpenWatch[],
  count: number,
  services: number,
  bases: Record<'watches' | 'rss' | 'series', { id: string; name: string; unit: string; baselineLabel: string }>,
): Promise<Row[]> {
  const format: Format = ctx.noProtobuf ? 'json' : 'protobuf'
  const headers = clientHeaders(userAgents.kubeProxy, format)
  // warm-up: one selector of each resource (the last service, not among the measured ones) opens the
  // shared caches and every series kube-proxy's lists, watches and filters make
  const warm = objects.serviceName(services - 1)
  for (const [path, selector] of [
    ['/api/v1/services', `app=${warm}`],
    ['/apis/discovery.k8s.io/v1/endpointslices', `kubernetes.io/service-name=${warm}`],
  ])
    watches.push((await listThenWatch(hub.url, path, selector, headers, agent)).watch)
  await sleep(ctx.counts.settleMs)
  const beforeSeries = seriesOf(await hub.metrics()).map(seriesName)
  const before = { rss: hub.memory().rss, series: beforeSeries.length }

  // the selectors, 10 at a time; the first service and the first slices' watches see their objects change
  const changed = new Map<number, number>()
  const onFrameOf = (i: number) =>
    i < 2
      ? (frame: Buffer) => {
          if (eventType(frame, format) === 'MODIFIED') changed.set(i, (changed.get(i) ?? 0) + 1)
        }
      : undefined
  const opened = new Array<OpenWatch>(count)
  let matched = 0
  let next = 0
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      for (let i = next++; i < count; i = next++) {
        const { path, selector } = selectorPath(i)
        const { watch, items } = await listThenWatch(hub.url, path, selector, headers, agent, onFrameOf(i))
        opened[i] = watch
        watches.push(watch)
        matched += items
      }
    }),
  )
  await sleep(ctx.counts.settleMs)
  const after = { rss: hub.memory().rss, metrics: await hub.metrics() }
  const afterSeries = seriesOf(after.metrics).length

  // the watches are alive: a write to svc-0 and to one of svc-1's slices reaches selectors 0 and 1
  const svc = sim.get('v1', 'Service', objects.serviceNamespace(0), objects.serviceName(0))
  sim.update({ ...svc, metadata: { ...svc.metadata, annotations: { ...svc.metadata.annotations, 'bench.outpost.io/touched': '1' } } })
  const slice = sim.get('discovery.k8s.io/v1', 'EndpointSlice', objects.serviceNamespace(1), objects.sliceName(objects.slicesPerService))
  sim.update({ ...slice, metadata: { ...slice.metadata, annotations: { ...slice.metadata.annotations, 'bench.outpost.io/touched': '1' } } })
  const deadline = performance.now() + 10_000
  while ((changed.size < 2 || ![...changed.values()].every(n => n > 0)) && performance.now() < deadline) await sleep(20)
  if (changed.size < 2) throw new Error(`the selectors' watches did not see their objects change (${changed.size} of 2 did)`)

  // upstream watches, from the apiserver's request log: the hub's own (User-Agent outpost/…), per path and format
  const upstream = sim.requests.filter(r => String(r.headers['user-agent'] ?? '').startsWith('outpost/'))
  const perScope = new Map<string, number>()
  for (const r of upstream.filter(r => r.watch)) {
    const key = `${r.path.split('/').pop()} ${acceptFormat(r)}`
    perScope.set(key, (perScope.get(key) ?? 0) + 1)
  }
  const most = Math.max(0, ...perScope.values())
  const upstreamLists = upstream.filter(r => r.verb === 'list').length
  const relayed = sim.requests.filter(r => String(r.headers['user-agent'] ?? '').startsWith('kube-proxy/')).length
  const gauge = metricSum(after.metrics, 'outpost_upstream_watches')
  const known = new Set(beforeSeries)
  const added = seriesOf(after.metrics)
    .map(seriesName)
    .filter(name => !known.has(name))
  const growth = after.rss - before.rss
  const scopes = [...perScope]
    .sort()
    .map(([k, n]) => `${k} ${n}`)
    .join(', ')
  return [
    figureRow(
      {
        ...bases.watches,
        note: `${label(format)}; the simulator's log of the hub's watches (User-Agent outpost/…), by resource and format: ${scopes}; the hub's outpost_upstream_watches ${gauge}; its upstream lists ${upstreamLists}; kube-proxy requests relayed to the apiserver ${relayed}; the ${count} selectors matched ${thousands(matched)} objects`,
      },
      1,
      most,
      'lower',
      '≤ 1 per resource and format',
      most <= 1,
    ),
    figureRow(
      {
        ...bases.rss,
        note: `VmRSS ${ctx.counts.settleMs} ms after the warm-up (both shared caches synced: ${thousands(services)} services, ${thousands(ctx.counts.slices)} slices) and ${ctx.counts.settleMs} ms after the ${count} lists and watches: ${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MiB; VmHWM ${hub.memory().hwm.toFixed(1)} MiB`,
      },
      before.rss,
      after.rss,
      'lower',
      `+ ≤ ${targets.rssGrowthMiB} MiB`,
      growth <= targets.rssGrowthMiB,
    ),
    figureRow(
      {
        ...bases.series,
        note: `non-comment lines of the hub's /metrics, after the warm-up and with the ${count} watches open${added.length > 0 ? `; new: ${added.slice(0, 5).join(' ')}${added.length > 5 ? ` and ${added.length - 5} more` : ''}` : ''}`,
      },
      before.series,
      afterSeries,
      'lower',
      'unchanged',
      afterSeries === before.series,
    ),
  ]
}

// ---- GET of a Node at resourceVersion=0 ---------------------------------------------------------------

async function nodeGetRows(ctx: Context, hub: HubProcess, rows: Row[]): Promise<void> {
  const conns = 50
  const format: Format = ctx.noProtobuf ? 'json' : 'protobuf'
  const base = {
    id: 'multiplexer.get.node',
    name: `GET Node resourceVersion=0 (kubelet, ${label(format)}), ${conns} keep-alive conns: hub vs direct`,
    unit: 'req/s',
    baselineLabel: 'direct',
  }
  await guarded(rows, [{ base, better: 'higher', target: `≥ ${targets.getRatio}x` }], async () => {
    const path = `/api/v1/nodes/${objects.hubNode}?resourceVersion=0`
    const headers = clientHeaders(kubelet133, format)
    const direct = ctx.sim.url + path
    const via = hub.url + path
    // the hub's nodes cache opens on the first get (which the apiserver answers until it is synced)
    const deadline = performance.now() + 30_000
    for (;;) {
      await closedLoop(via, headers, 1, 50)
      const fromCache = metricSum(await hub.metrics(), 'outpost_served_from_cache_total', { component: 'kubelet', verb: 'get' })
      if (fromCache > 0) break
      if (performance.now() > deadline) throw new Error("the hub never answered kubelet's GET of a Node from its cache")
      await sleep(100)
    }
    const check = await request(via, { headers })
    await check.body.dump()
    const contentType = String(check.headers['content-type'] ?? '')
    if (format === 'protobuf' && !contentType.startsWith(protobufType)) throw new Error(`the hub answered the protobuf GET in ${contentType}`)
    const ms = ctx.counts.getSeconds * 1000
    await closedLoop(direct, headers, conns, Math.min(ms, 500)) // warm-up
    await closedLoop(via, headers, conns, Math.min(ms, 500))
    const loop = async (url: string): Promise<Loop> => {
      const { result, cpuMs } = await withCpu([ctx.sim.pid, hub.pid, process.pid], () => closedLoop(url, headers, conns, ms))
      return { ...result, cpuMs }
    }
    const runs = { direct: [] as Loop[], hub: [] as Loop[] }
    const metricsBefore = await hub.metrics()
    for (let round = 0; round < ctx.counts.getRounds; round++) {
      runs.direct.push(await loop(direct))
      runs.hub.push(await loop(via))
    }
    const metricsAfter = await hub.metrics()
    const kubeletGets = (text: string, labels: Record<string, string> = {}) =>
      metricSum(text, 'outpost_requests_total', { component: 'kubelet', verb: 'get', ...labels })
    const sent = kubeletGets(metricsAfter) - kubeletGets(metricsBefore)
    const cached = kubeletGets(metricsAfter, { source: 'cache' }) - kubeletGets(metricsBefore, { source: 'cache' })
    const rate = loopRate
    const p99 = loopP99
    const cpu = loopCpu
    return [
      ratioRow(
        {
          ...base,
          note: `median of ${ctx.counts.getRounds} x ${ctx.counts.getSeconds} s; ${thousands(cached)} of the hub's ${thousands(sent)} answers from its nodes cache; p99 direct ${p99(runs.direct)} ms, hub ${p99(runs.hub)} ms; CPU µs per request (simulator / hub / load generator): direct ${cpu(runs.direct)}, hub ${cpu(runs.hub)}`,
        },
        rate(runs.direct),
        rate(runs.hub),
        'higher',
        targets.getRatio,
      ),
    ]
  })
}

// ---- LIST of every slice at resourceVersion=0 ---------------------------------------------------------

interface Timed extends Listed {
  /** CPU ms of the simulator and the hub during the list */
  cpu: number[]
}

/** How the hub's consistent reads went so far (outpost_consistent_reads_total), for a row's note. */
async function consistentOutcomes(hub: HubProcess): Promise<string> {
  const text = await (await request(`${hub.adminUrl}/metrics`)).body.text()
  const count = (outcome: string) =>
    text
      .split('\n')
      .filter(line => line.startsWith('outpost_consistent_reads_total{') && line.includes(`outcome="${outcome}"`))
      .reduce((n, line) => n + Number(line.split(' ').pop()), 0)
  return `the hub's consistent reads: ${count('cache')} from memory after the proof, ${count('relayed')} relayed (the simulator takes no other writes meanwhile: a real cluster's Lease writes make most of them relayed)`
}

async function sliceListRows(ctx: Context, hub: HubProcess, rows: Row[]): Promise<void> {
  const what = `LIST ${thousands(ctx.counts.slices)} slices resourceVersion=0`
  const unfilteredPath = '/apis/discovery.k8s.io/v1/endpointslices?limit=500&resourceVersion=0'
  const variants = [
    { id: 'multiplexer.list.unfiltered.json', who: 'flanneld (unfiltered)', userAgent: flanneld, format: 'json' as Format, path: unfilteredPath, target: true },
    {
      id: 'multiplexer.list.unfiltered.protobuf',
      who: 'flanneld (unfiltered)',
      userAgent: flanneld,
      format: 'protobuf' as Format,
      path: unfilteredPath,
      target: true,
    },
    {
      id: 'multiplexer.list.kube-proxy.protobuf',
      who: 'kube-proxy (filtered)',
      userAgent: userAgents.kubeProxy,
      format: 'protobuf' as Format,
      path: objects.slicesPath,
      target: false,
    },
    {
      id: 'multiplexer.list.consistent.json',
      who: "a consistent read (no resourceVersion, pages of 500: kubectl, client-go's pager), proven fresh by a limit=1 probe or relayed",
      userAgent: flanneld,
      format: 'json' as Format,
      path: '/apis/discovery.k8s.io/v1/endpointslices?limit=500',
      target: false,
      consistent: true,
    },
  ]
  for (const v of variants) {
    const protobuf = v.format === 'protobuf'
    const listed = 'consistent' in v ? `LIST ${thousands(ctx.counts.slices)} slices, no resourceVersion,` : what
    const base = { id: v.id, name: `${listed} ${label(v.format)}: ${v.who}, hub vs direct`, unit: 'ms', baselineLabel: 'direct', protobuf }
    const target = v.target ? `≤ ${targets.listRatio}x` : '—'
    if (protobuf && ctx.noProtobuf) {
      rows.push(naRow(base, 'lower', target, ctx.noProtobuf))
      continue
    }
    await guarded(rows, [{ base, better: 'lower', target }], async () => {
      const headers = clientHeaders(v.userAgent, v.format)
      const agent = new Agent({ connections: 2, keepAliveTimeout: 60_000 })
      try {
        const timed = async (url: string): Promise<Timed> => {
          const { result, cpuMs } = await withCpu([ctx.sim.pid, hub.pid], () => timedList(url, headers, agent))
          return { ...result, cpu: cpuMs }
        }
        // warm-up: the hub's shared cache of this format synced, both paths once
        await listUntilServed(hub.url + v.path, headers, agent)
        await timed(ctx.sim.url + v.path)
        const first = await timed(hub.url + v.path)
        if (protobuf && !first.contentType.startsWith(protobufType)) throw new Error(`the hub answered the protobuf list in ${first.contentType}`)
        const runs = { direct: [] as Timed[], hub: [] as Timed[] }
        for (let r = 0; r < ctx.counts.listRounds; r++) {
          runs.direct.push(await timed(ctx.sim.url + v.path))
          runs.hub.push(await timed(hub.url + v.path))
        }
        const ms = (r: Timed[]) => median(r.map(x => x.ms))
        const cpu = (r: Timed[]) => [0, 1].map(i => mean(r.map(x => x.cpu[i])).toFixed(0)).join(' / ')
        const size = (l: Listed) => `${(l.bytes / 1e6).toFixed(1)} MB ${l.encoding === 'gzip' ? 'gzip' : 'plain'}`
        const proofs = 'consistent' in v ? `; ${await consistentOutcomes(hub)}` : ''
        return [
          ratioRow(
            {
              ...base,
              note: `median of ${ctx.counts.listRounds}, interleaved, request to last byte; direct ${size(runs.direct[0])}, hub ${size(runs.hub[0])}${v.target || 'consistent' in v ? '' : ' (filtered for this node)'}${runs.direct[0].encoding === 'gzip' && runs.hub[0].encoding !== 'gzip' ? " (direct's time includes the simulator's gzip, zlib's default level 6; kube-apiserver gzips at level 1)" : ''}; CPU ms per list (simulator / hub): direct ${cpu(runs.direct)}, hub ${cpu(runs.hub)}${proofs}`,
            },
            ms(runs.direct),
            ms(runs.hub),
            'lower',
            v.target ? targets.listRatio : undefined,
          ),
        ]
      } finally {
        await agent.close()
      }
    })
  }
}
