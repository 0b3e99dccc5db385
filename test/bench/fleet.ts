// The fleet row: many hubs (in this process), each with five node components that list and watch as
// client-go's Reflector does, against one apiserver simulator behind a byte-counting relay; the cloud
// goes away for a while and comes back. Run twice in one go, shared watch caches on and off, and
// compared: upstream watches per node, the lists the apiserver serves after the outage, and the bytes
// it sends. Counts, not timings: they do not depend on how loaded the box is.
import net from 'node:net'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Writable } from 'node:stream'
import { Agent, request } from 'undici'
import { pino } from 'pino'
import { ApiServerSimulator } from '../simulator/index.ts'
import { startHub } from '../../lib/hub.ts'
import type { Hub } from '../../lib/hub.ts'
import { defaults } from '../../lib/config.ts'
import { WatchFrameSplitter } from '../../lib/api/frames.ts'
import { figureRow, ratioRow } from './report.ts'
import type { Row } from './report.ts'

export interface FleetCounts {
  hubs: number
  outageMs: number
  services: number
  /** how often each hub probes the apiserver; and how long to let relists and re-watches finish */
  healthIntervalMs: number
  settleMs: number
}

/** What each node runs, and what it lists and watches (User-Agent, path). */
function components(node: string): [string, string][] {
  return [
    ['kube-proxy/v1.24.0', '/api/v1/services'],
    ['kube-proxy/v1.24.0', '/apis/discovery.k8s.io/v1/endpointslices'],
    ['coredns/v1.8.6', '/api/v1/services'],
    ['coredns/v1.8.6', '/apis/discovery.k8s.io/v1/endpointslices'],
    ['kubelet/v1.24.0', `/api/v1/pods?fieldSelector=spec.nodeName%3D${node}`],
    ['kubelet/v1.24.0', '/api/v1/services'],
    ['kubelet/v1.24.0', '/api/v1/nodes'],
    ['flanneld/v0.19', '/api/v1/nodes'],
    ['nginx-ingress-controller/v1.3', '/apis/discovery.k8s.io/v1/endpointslices'],
  ]
}
/** services, endpointslices, this node's pods, nodes: in JSON; and the hub's own metadata-only watches of Nodes and Services (the topology context) */
const scopesPerNode = 4 + 2

/** client-go's Reflector, reduced: list, then watch from the list's version; re-watch on end; relist on 410. */
class Reflector {
  lists = 0
  private version: string | undefined
  private stopped = false
  private body: { destroy(): void } | undefined

  constructor(
    private readonly base: string,
    private readonly userAgent: string,
    private readonly path: string,
    private readonly dispatcher: Agent,
  ) {}

  synced(): boolean {
    return this.version !== undefined
  }

  async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (this.version === undefined) await this.list()
        await this.watch()
      } catch {
        if (!this.stopped) await new Promise(r => setTimeout(r, 500))
      }
    }
  }

  private async list(): Promise<void> {
    const res = await request(`${this.base}${this.path}`, { headers: { 'user-agent': this.userAgent }, dispatcher: this.dispatcher })
    if (res.statusCode !== 200) {
      await res.body.dump()
      throw new Error(`list ${res.statusCode}`)
    }
    const list = (await res.body.json()) as { metadata: { resourceVersion: string } }
    this.lists++
    this.version = list.metadata.resourceVersion
  }

  private async watch(): Promise<void> {
    const sep = this.path.includes('?') ? '&' : '?'
    const url = `${this.base}${this.path}${sep}watch=true&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion=${this.version}`
    const res = await request(url, { headers: { 'user-agent': this.userAgent }, dispatcher: this.dispatcher })
    if (res.statusCode !== 200) {
      await res.body.dump()
      if (res.statusCode === 410) this.version = undefined
      throw new Error(`watch ${res.statusCode}`)
    }
    this.body = res.body
    await pipeline(
      res.body,
      new WatchFrameSplitter('json'),
      new Writable({
        objectMode: true,
        write: (frame: Buffer, _e, done) => {
          const event = JSON.parse(frame.toString()) as { type: string; object: { code?: number; metadata?: { resourceVersion?: string } } }
          if (event.type === 'ERROR') {
            if (event.object.code === 410) this.version = undefined
          } else if (event.object.metadata?.resourceVersion) this.version = event.object.metadata.resourceVersion
          done()
        },
      }),
    )
  }

  stop(): void {
    this.stopped = true
    this.body?.destroy()
  }
}

/** A relay in front of the simulator that counts the bytes the apiserver sends. */
async function countingRelay(target: number): Promise<{ url: string; bytes(): number; close(): Promise<void> }> {
  let bytes = 0
  const sockets = new Set<net.Socket>()
  const relay = net.createServer(client => {
    const server = net.connect({ host: '127.0.0.1', port: target })
    sockets.add(client).add(server)
    server.on('data', chunk => (bytes += chunk.length))
    client.pipe(server).pipe(client)
    const close = () => {
      client.destroy()
      server.destroy()
      sockets.delete(client)
      sockets.delete(server)
    }
    for (const s of [client, server]) {
      s.on('error', close)
      s.on('close', close)
    }
  })
  relay.listen(0, '127.0.0.1')
  await once(relay, 'listening')
  return {
    url: `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`,
    bytes: () => bytes,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise(resolve => relay.close(resolve))
    },
  }
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise(r => setTimeout(r, 100))
  }
}

interface OutageCounts {
  /** lists the apiserver served after the outage, per node */
  upstreamLists: number
  /** lists the node's clients made after it, per node */
  clientLists: number
}

interface FleetRun {
  watchesPerNode: number
  /** an outage within the apiserver's event window, and one that outlasts it */
  short: OutageCounts
  long: OutageCounts
  megabytes: number
}

async function runFleet(counts: FleetCounts, shared: boolean): Promise<FleetRun> {
  const sim = await ApiServerSimulator.start({ bookmarkIntervalMs: 60_000 })
  const nodes = Array.from({ length: counts.hubs }, (_, i) => `fleet-${i}`)
  for (const node of nodes) {
    sim.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: node, labels: { 'apps.openyurt.io/nodepool': `pool-${nodes.indexOf(node) % 5}` } } })
    sim.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `agent-${node}`, namespace: 'kube-system' },
      spec: { nodeName: node, containers: [{ name: 'a', image: 'agent:1' }] },
    })
  }
  for (let s = 0; s < counts.services; s++) {
    sim.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: `svc-${s}`, namespace: 'fleet' },
      spec: { ports: [{ port: 80, protocol: 'TCP' }], selector: { app: `svc-${s}` } },
    })
    sim.create({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `svc-${s}-x`, namespace: 'fleet', labels: { 'kubernetes.io/service-name': `svc-${s}` } },
      addressType: 'IPv4',
      ports: [{ port: 80, protocol: 'TCP' }],
      endpoints: nodes.slice(0, 4).map((node, i) => ({ addresses: [`10.${s % 250}.0.${i}`], conditions: { ready: true }, nodeName: node })),
    })
  }
  const relay = await countingRelay(sim.port)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-fleet-'))
  const hubs: Hub[] = []
  const reflectors: Reflector[] = []
  const agent = new Agent({ connections: 64 })
  const upstream = (verb: 'list' | 'watch') => sim.countRequests(r => r.verb === verb && !r.path.startsWith('/api/v1/namespaces/kube-system/leases'))
  try {
    for (const [i, node] of nodes.entries()) {
      hubs.push(
        await startHub(
          {
            ...defaults,
            servers: [new URL(relay.url)],
            nodeName: node,
            port: 0,
            adminPort: 0,
            securePort: null,
            logLevel: 'silent',
            cacheDir: path.join(dir, String(i)),
            healthIntervalMs: counts.healthIntervalMs,
            healthTimeoutMs: 1_000,
            healthFailures: 2,
            healthSuccesses: 1,
            sharedWatches: shared,
          },
          { logger: pino({ level: 'silent' }) },
        ),
      )
    }
    for (const [i, node] of nodes.entries()) {
      for (const [userAgent, p] of components(node)) reflectors.push(new Reflector(hubs[i].proxyUrl, userAgent, p, agent))
    }
    const clientLists = () => reflectors.reduce((n, r) => n + r.lists, 0)
    /** The cloud goes away and comes back; `compact`: its window is gone meanwhile, as after a long outage. */
    const outage = async (compact: boolean): Promise<OutageCounts> => {
      await sim.setFault('refuse')
      await until(() => hubs.every(h => h.health.state === 'offline'), 60_000, 'every hub to go offline')
      if (compact) {
        // changes meanwhile, then the apiserver's window moves past every version a watcher holds
        sim.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'svc-late', namespace: 'fleet' }, spec: { ports: [{ port: 80, protocol: 'TCP' }] } })
        sim.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'fleet-late' } })
        sim.compact()
      }
      await new Promise(r => setTimeout(r, counts.outageMs))
      const upstreamBefore = upstream('list')
      const clientsBefore = clientLists()
      await sim.setFault('none')
      await until(() => hubs.every(h => h.health.state === 'online'), 60_000, 'every hub to come back')
      await until(() => reflectors.every(r => r.synced()), 60_000, 'every client to be synced again')
      await new Promise(r => setTimeout(r, counts.settleMs)) // relists and re-watches done
      return { upstreamLists: (upstream('list') - upstreamBefore) / counts.hubs, clientLists: (clientLists() - clientsBefore) / counts.hubs }
    }
    const running = reflectors.map(r => r.run())
    await until(() => reflectors.every(r => r.synced()), 120_000, 'every client to list')
    await new Promise(r => setTimeout(r, counts.settleMs)) // the hubs' own watches settle
    const watchesPerNode = upstream('watch') / counts.hubs
    const short = await outage(false)
    const long = await outage(true)
    const result = { watchesPerNode, short, long, megabytes: relay.bytes() / 1e6 }
    for (const r of reflectors) r.stop()
    await Promise.allSettled(running)
    return result
  } finally {
    for (const r of reflectors) r.stop()
    await Promise.allSettled(hubs.map(h => h.close()))
    await agent.close()
    await relay.close()
    await sim.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Shared watch caches vs every client's own watch, same fleet, same outage. */
export async function fleetRows(counts: FleetCounts): Promise<Row[]> {
  const own = await runFleet(counts, false)
  const shared = await runFleet(counts, true)
  const clients = components('x').length
  const base = (id: string, name: string, unit: string) => ({
    id: `fleet.${id}`,
    name: `${counts.hubs} hubs × ${clients} list+watches: ${name}`,
    unit,
    baselineLabel: '--shared-watches=false',
  })
  const outage = `${counts.outageMs / 1000} s outage`
  return [
    figureRow(
      base('watches', 'upstream watches per node', 'watches'),
      own.watchesPerNode,
      shared.watchesPerNode,
      'lower',
      `≤ ${scopesPerNode} (scopes × formats)`,
      shared.watchesPerNode <= scopesPerNode,
    ),
    figureRow(
      base('relists', `lists the apiserver serves per node after a ${outage}`, 'lists'),
      own.short.upstreamLists,
      shared.short.upstreamLists,
      'lower',
      '0 (watches resume)',
      shared.short.upstreamLists === 0,
    ),
    figureRow(
      base('relists-410', "the same when the outage outlasts the apiserver's window (410)", 'lists'),
      own.long.upstreamLists,
      shared.long.upstreamLists,
      'lower',
      `≤ ${scopesPerNode} (one per scope)`,
      shared.long.upstreamLists <= scopesPerNode,
    ),
    figureRow(
      base('client-relists', 'lists the clients make per node after both outages', 'lists'),
      own.short.clientLists + own.long.clientLists,
      shared.short.clientLists + shared.long.clientLists,
      'lower',
      '0',
      shared.short.clientLists + shared.long.clientLists === 0,
    ),
    ratioRow(base('bytes', 'bytes from the apiserver, whole run', 'MB'), own.megabytes, shared.megabytes, 'lower'),
  ]
}
