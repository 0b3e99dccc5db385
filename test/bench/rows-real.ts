// Group 15, "real": the built hub against a REAL kube-apiserver v1.24 (Go, reads from its own watch
// cache; test/bench/real-apiserver.ts), side by side in one run, each row alternating direct and hub.
// The apiserver holds 1,000 EndpointSlices in one namespace (10 endpoints each, on 30 nodes), their
// Services with openyurt.io/topologyKeys, and 30 Nodes; the hub's identity is the admin token.
//   - GET one Service: relayed with the client's token; as the node (no token: relayed and recorded)
//   - GET a Node at resourceVersion=0 as kubelet: from the hub's memory
//   - LIST the 1,000 slices at resourceVersion=0: cluster-wide unfiltered JSON; one namespace's as a
//     node component (JSON), as kube-proxy (filtered, JSON) and in protobuf
//   - kube-proxy's first list on a fresh hub (cached and filtered) vs the same list relayed
//   - RSS 20 s after start, idle with the cluster's caches filled
//   - WatchList (sendInitialEvents=true) watches of a 12.5 MB scope the v1.24 apiserver cannot
//     answer as WatchList: the hub's RSS with 20 of them open vs 20 plain watches
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { Agent, request } from 'undici'
import { HubProcess, procMemory, sleep, withCpu } from './processes.ts'
import { productionRuntimeEnv } from './runtime-env.ts'
import { clientHeaders, closedLoop, median, timedList, userAgents } from './load.ts'
import { figureRow, guarded, ratioRow } from './report.ts'
import type { Row } from './report.ts'
import * as objects from './objects.ts'
import { RealApiserver } from './real-apiserver.ts'

export interface RealCounts {
  /** seconds per closed-loop measure, and rounds (direct and hub alternating) */
  seconds: number
  rounds: number
  /** how long the hub is left alone before its idle RSS is read */
  idleMs: number
  /** WatchList watches held open */
  watches: number
}

const namespace = 'bench-real'
const bulkNamespace = 'bench-real-cm'
const slices = 1_000
/** 500 ConfigMaps of 25 KB: the 12.5 MB scope of the WatchList rows */
const bulkObjects = 500
const flanneld = 'flanneld/v0.26.7 (linux/amd64) kubernetes/$Format'
const kubelet = userAgents.kubelet
const connections = 20

const paths = {
  service: '/api/v1/namespaces/default/services/kubernetes',
  node: `/api/v1/nodes/${objects.hubNode}?resourceVersion=0`,
  clusterSlices: '/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0',
  namespaceSlices: `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?resourceVersion=0`,
  kubeProxySlices: `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=${encodeURIComponent(objects.kubeProxySelector)}&resourceVersion=0`,
  bulk: `/api/v1/namespaces/${bulkNamespace}/configmaps`,
}

/** The slices of the bench's cluster, all in one namespace. */
function seedObjects(): { nodes: any[]; services: any[]; slices: any[]; bulk: any[] } {
  const inNamespace = (o: any) => ({ ...o, metadata: { ...o.metadata, namespace, resourceVersion: undefined } })
  const sliceObjects = Array.from({ length: slices }, (_, i) => {
    const slice = inNamespace(objects.endpointSlice(i))
    delete slice.metadata.ownerReferences // the Services' uids are the apiserver's, not the bench's
    for (const e of slice.endpoints) e.targetRef.namespace = namespace
    return slice
  })
  const serviceCount = Math.ceil(slices / objects.slicesPerService)
  const services = Array.from({ length: serviceCount }, (_, s) => {
    const service = inNamespace(objects.service(s))
    service.spec = { ...service.spec, clusterIP: undefined }
    return service
  })
  const bulk = Array.from({ length: bulkObjects }, (_, i) =>
    objects.configMap(`cm-${i}`, bulkNamespace, { 'settings.yaml': `index: ${i}\n${'x'.repeat(25_000)}\n` }),
  )
  return { nodes: Array.from({ length: objects.nodeCount }, (_, i) => objects.node(i)), services, slices: sliceObjects, bulk }
}

async function seed(real: RealApiserver): Promise<void> {
  const seeded = seedObjects()
  for (const ns of [namespace, bulkNamespace]) await real.create(() => '/api/v1/namespaces', [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }])
  await real.create(() => '/api/v1/nodes', seeded.nodes)
  await real.create(() => `/api/v1/namespaces/${namespace}/services`, seeded.services)
  await real.create(() => `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`, seeded.slices)
  await real.create(() => `/api/v1/namespaces/${bulkNamespace}/configmaps`, seeded.bulk)
}

/** wrk (Debian's package), when on PATH: a C load generator, as the issue measured; else the bench's own closed loop in Node */
const hasWrk = spawnSync('wrk', ['--version']).error === undefined
const loadGenerator = hasWrk ? 'wrk -t2 -c20' : "the bench's closed loop (node, 20 connections)"

/** Requests per second from `connections` keep-alive connections for `seconds`; throws on any answer but 200. */
async function loadLoop(url: string, headers: Record<string, string>, seconds: number): Promise<number> {
  if (!hasWrk) return (await closedLoop(url, headers, connections, seconds * 1000, true)).perSecond
  const args = ['-t2', `-c${connections}`, `-d${seconds}s`, ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]), url]
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const [code] = await once(child, 'exit')
  const rate = /Requests\/sec:\s+([\d.]+)/.exec(out)
  if (code !== 0 || !rate) throw new Error(`wrk ${url}: ${out.trim().split('\n').slice(-3).join(' ')}`)
  const failed = /Non-2xx or 3xx responses: (\d+)/.exec(out)
  if (failed) throw new Error(`wrk ${url}: ${failed[1]} answers were not 200`)
  return Number(rate[1])
}

/** `rounds` closed loops against each of two targets, alternating which goes first; the hub's CPU per request. */
async function sideBySide(
  counts: RealCounts,
  hub: HubProcess,
  direct: { url: string; headers: Record<string, string> },
  viaHub: { url: string; headers: Record<string, string> },
): Promise<{ direct: number; hub: number; hubCpuUs: number }> {
  const directRates: number[] = []
  const hubRates: number[] = []
  const cpu: number[] = []
  for (let round = 0; round < counts.rounds; round++) {
    const runDirect = async () => directRates.push(await loadLoop(direct.url, direct.headers, counts.seconds))
    const runHub = async () => {
      const { result, cpuMs } = await withCpu([hub.pid], () => loadLoop(viaHub.url, viaHub.headers, counts.seconds))
      hubRates.push(result)
      cpu.push((cpuMs[0] * 1000) / (result * counts.seconds))
    }
    if (round % 2 === 0) await runDirect().then(runHub)
    else await runHub().then(runDirect)
  }
  return { direct: median(directRates), hub: median(hubRates), hubCpuUs: median(cpu) }
}

type Sided = Awaited<ReturnType<typeof sideBySide>>
const perSecond = (n: number): string => `${n.toFixed(0)}/s`
const note = (s: Sided): string => `${perSecond(s.hub)} vs ${perSecond(s.direct)} direct (${loadGenerator}); hub CPU ${s.hubCpuUs.toFixed(0)} µs a request`
const getBase = (id: string, name: string) => ({ id: `real.${id}`, name, unit: 'req/s', baselineLabel: 'direct' })

export async function realRows(hubEntry: string, bundleEntry: string | undefined, counts: RealCounts, progress: (what: string) => void): Promise<Row[]> {
  progress('real: starting etcd and kube-apiserver')
  const real = await RealApiserver.start()
  const rows: Row[] = []
  try {
    progress(`real: ${slices} EndpointSlices, ${bulkObjects} ConfigMaps of 25 KB`)
    await seed(real)
    const direct = (pathname: string, userAgent: string, format: 'json' | 'protobuf' = 'json') => ({
      url: `${real.url}${pathname}`,
      headers: { ...clientHeaders(userAgent, format), ...real.headers },
    })
    const hub = await HubProcess.start(hubEntry, { server: real.url, kubeconfig: real.kubeconfig })
    try {
      const viaHub = (pathname: string, userAgent: string, format: 'json' | 'protobuf' = 'json', token = false) => ({
        url: `${hub.url}${pathname}`,
        headers: { ...clientHeaders(userAgent, format), ...(token ? real.headers : {}) },
      })
      // every cache the rows read is filled before anything is timed
      for (const p of [paths.node, paths.clusterSlices, paths.namespaceSlices, paths.kubeProxySlices])
        await timedList(viaHub(p, p === paths.kubeProxySlices ? userAgents.kubeProxy : kubelet).url, viaHub(p, kubelet).headers)
      await sleep(1_000)
      const measured: [string, string, number | undefined, () => Promise<Sided>][] = [
        [
          'get.relayed-token',
          'GET one Service, relayed with the client token',
          undefined,
          () => sideBySide(counts, hub, direct(paths.service, userAgents.kubectl), viaHub(paths.service, userAgents.kubectl, 'json', true)),
        ],
        [
          'get.node',
          'GET one Service as the node (no token: relayed and recorded)',
          0.6,
          () => sideBySide(counts, hub, direct(paths.service, kubelet), viaHub(paths.service, kubelet)),
        ],
        [
          'get.node-rv0',
          'GET Node resourceVersion=0 as kubelet, from memory',
          1.5,
          () => sideBySide(counts, hub, direct(paths.node, kubelet), viaHub(paths.node, kubelet)),
        ],
        [
          'list.cluster.json',
          `LIST ${slices} slices rv=0, cluster-wide, unfiltered JSON`,
          2,
          () => sideBySide(counts, hub, direct(paths.clusterSlices, flanneld), viaHub(paths.clusterSlices, flanneld)),
        ],
        [
          'list.namespace.json',
          `LIST one namespace's ${slices} slices rv=0 as a node component, JSON`,
          2,
          () => sideBySide(counts, hub, direct(paths.namespaceSlices, kubelet), viaHub(paths.namespaceSlices, kubelet)),
        ],
        [
          'list.namespace.kube-proxy',
          `LIST one namespace's ${slices} slices rv=0 as kube-proxy (filtered), JSON`,
          2,
          () => sideBySide(counts, hub, direct(paths.kubeProxySlices, userAgents.kubeProxy), viaHub(paths.kubeProxySlices, userAgents.kubeProxy)),
        ],
        [
          'list.namespace.protobuf',
          `LIST one namespace's ${slices} slices rv=0 as a node component, protobuf`,
          2,
          () => sideBySide(counts, hub, direct(paths.namespaceSlices, kubelet, 'protobuf'), viaHub(paths.namespaceSlices, kubelet, 'protobuf')),
        ],
      ]
      for (const [id, name, target, measure] of measured) {
        const base = getBase(id, name)
        progress(`real: ${name}`)
        await guarded(rows, [{ base, better: 'higher', target: target ? `≥ ${target}x` : '—' }], async () => {
          const sided = await measure()
          return [{ ...ratioRow(base, sided.direct, sided.hub, 'higher', target), note: note(sided) }]
        })
      }
    } finally {
      await hub.stop()
    }
    progress('real: kube-proxy’s first list on a fresh hub')
    await guarded(rows, [{ base: firstListBase, better: 'lower', target: '≤ 1.2x' }], () => firstListRows(hubEntry, real, counts))
    progress('real: idle RSS')
    await guarded(rows, [{ base: idleBase, better: 'lower', target: '≤ 60 MiB' }], () => idleRows(hubEntry, bundleEntry, real, counts))
    progress(`real: ${counts.watches} WatchList watches of a 12.5 MB scope`)
    await guarded(rows, [{ base: watchListBase, better: 'lower', target: '≤ 1 MiB a watch' }], () => watchListRows(hubEntry, real, counts))
  } finally {
    await real.stop()
  }
  return rows
}

const firstListBase = {
  id: 'real.list.first-kube-proxy',
  name: `kube-proxy's first list of ${slices} slices on a fresh hub (cached and filtered) vs the same list relayed`,
  unit: 'ms',
  baselineLabel: 'relayed',
}

/** A fresh hub per round: kube-proxy's first list from it, and the same list with a token (relayed) from another fresh one. */
async function firstListRows(hubEntry: string, real: RealApiserver, counts: RealCounts): Promise<Row[]> {
  const cached: number[] = []
  const relayed: number[] = []
  for (let round = 0; round < Math.max(3, counts.rounds); round++) {
    for (const token of round % 2 === 0 ? [false, true] : [true, false]) {
      const hub = await HubProcess.start(hubEntry, { server: real.url, kubeconfig: real.kubeconfig })
      try {
        await sleep(500)
        const headers = { ...clientHeaders(userAgents.kubeProxy, 'json'), ...(token ? real.headers : {}) }
        const listed = await timedList(`${hub.url}${paths.kubeProxySlices}`, headers)
        ;(token ? relayed : cached).push(listed.ms)
      } finally {
        await hub.stop()
      }
    }
  }
  const [hub, baseline] = [median(cached), median(relayed)]
  return [
    {
      ...ratioRow(firstListBase, baseline, hub, 'lower', 1.2),
      note: `${hub.toFixed(0)} ms vs ${baseline.toFixed(0)} ms relayed (medians of ${cached.length})`,
    },
  ]
}

const idleBase = {
  id: 'real.rss.idle',
  name: "RSS 20 s after start, idle, caches of the rows above filled: the image's bundle vs dist/",
  unit: 'MiB',
  baselineLabel: 'dist/',
}

/** RSS of a started hub 20 s after three lists (a Node, the Service slices, kube-proxy's), idle. */
async function idleRss(entry: string, real: RealApiserver, counts: RealCounts): Promise<number> {
  const hub = await HubProcess.start(entry, { server: real.url, kubeconfig: real.kubeconfig })
  try {
    for (const [p, ua] of [
      [paths.node, kubelet],
      [paths.namespaceSlices, kubelet],
      [paths.kubeProxySlices, userAgents.kubeProxy],
    ])
      await timedList(`${hub.url}${p}`, clientHeaders(ua, 'json'))
    await sleep(counts.idleMs)
    const samples: number[] = []
    for (let i = 0; i < 5; i++, await sleep(200)) samples.push(hub.memory().rss)
    return Math.max(...samples)
  } finally {
    await hub.stop()
  }
}

/** The RSS of node itself, doing nothing, in the same runtime environment: the floor of any hub. */
async function bareNodeRss(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore', env: { ...process.env, ...productionRuntimeEnv() } })
  try {
    await sleep(2_000)
    return procMemory(child.pid!).rss
  } finally {
    child.kill('SIGKILL')
  }
}

async function idleRows(hubEntry: string, bundleEntry: string | undefined, real: RealApiserver, counts: RealCounts): Promise<Row[]> {
  const dist = await idleRss(hubEntry, real, counts)
  const bundle = bundleEntry ? await idleRss(bundleEntry, real, counts) : undefined
  const floor = await bareNodeRss()
  const hub = bundle ?? dist
  const note = `${bundle === undefined ? 'no bundle built (BENCH_ONLY without bundle): dist/ only; ' : ''}node itself, idle: ${floor.toFixed(1)} MiB`
  return [{ ...figureRow(idleBase, dist, hub, 'lower', '≤ 60 MiB', hub <= 60), note }]
}

const watchListBase = {
  id: 'real.watchlist.rss-per-watch',
  name: 'relayed sendInitialEvents=true watches of a 12.5 MB scope against v1.24 (no WatchList there: the state and no end): hub RSS a watch',
  unit: 'MiB',
  baselineLabel: 'plain watch',
}

/** The hub's RSS growth per watch: `counts.watches` plain watches, then as many WatchList ones, on a fresh hub each. */
async function watchListRows(hubEntry: string, real: RealApiserver, counts: RealCounts): Promise<Row[]> {
  const perWatch = async (query: string): Promise<number> => {
    const hub = await HubProcess.start(hubEntry, { server: real.url, kubeconfig: real.kubeconfig })
    const agent = new Agent({ connections: counts.watches + 1 })
    try {
      await sleep(1_000)
      const before = hub.memory().rss
      const watches = await Promise.all(
        Array.from({ length: counts.watches }, async () => {
          const res = await request(`${hub.url}${paths.bulk}?watch=true&allowWatchBookmarks=true&${query}`, {
            headers: clientHeaders(kubelet, 'json'),
            dispatcher: agent,
          })
          let bytes = 0
          res.body.on('data', (chunk: Buffer) => (bytes += chunk.length))
          return { res, bytes: () => bytes }
        }),
      )
      // every watch has had the scope's state (12.5 MB) or the hub has stopped sending it
      const deadline = performance.now() + 60_000
      while (performance.now() < deadline && watches.some(w => w.bytes() < 12_000_000)) await sleep(200)
      await sleep(2_000)
      const rss = hub.memory().rss
      for (const w of watches) w.res.body.destroy()
      return (rss - before) / counts.watches
    } finally {
      await agent.close().catch(() => {})
      await hub.stop()
    }
  }
  const plain = await perWatch('')
  // client-go's own WatchList adds resourceVersionMatch=NotOlderThan, which v1.24 answers 422 (and client-go lists instead)
  const watchList = await perWatch('sendInitialEvents=true')
  return [figureRow(watchListBase, plain, watchList, 'lower', '≤ 1 MiB a watch', watchList - plain <= 1)]
}
