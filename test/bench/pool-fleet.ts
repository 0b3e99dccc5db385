// The parts of the leader hubs row (rows-pool.ts): node pools of built hubs, each a process of its
// own (a leader must be SIGKILLable: an in-process hub can only close, and closing hands the Lease
// over, which a dead node never does), against the simulator over TLS with a client certificate per
// node; a tally of what the apiserver serves each pool, taken at the simulator's own HTTP server;
// and the nodes' clients, client-go's Reflector reduced to list, watch, re-watch, relist on error.
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import dc from 'node:diagnostics_channel'
import { once } from 'node:events'
import { appendFileSync, mkdtempSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import path from 'node:path'
import { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { TLSSocket } from 'node:tls'
import { Agent, request } from 'undici'
import { apiserverRequestInfo } from '../../lib/api/requestinfo.ts'
import { WatchFrameSplitter } from '../../lib/api/frames.ts'
import { decodeUnknown, decodeWatchEvent, objectMeta, splitList } from '../../lib/codec/protobuf.ts'
import { ApiServerSimulator } from '../simulator/index.ts'
import { createTestPki, issueClientCertificate, writeKubeconfig } from '../helpers/pki.ts'
import { freePort, hubExtraArgs, root, scratch, sleep } from './processes.ts'
import { productionRuntimeEnv } from './runtime-env.ts'
import { protobufType } from './load.ts'

/** The resources a whole pool reads alike (lib/config.ts poolWideResources: the shared ones but pods). */
const poolWide = new Set(['services', 'endpoints', 'endpointslices', 'nodes'])

export interface PoolNode {
  name: string
  pool: string
  kubeconfig: string
}

/** What the apiserver served one pool's nodes: pool-wide lists and watches, their body bytes, the watches open now. */
export interface PoolTally {
  lists: number
  watches: number
  openWatches: number
  bytes: number
}

/**
 * Counts, per pool and per node, the pool-wide lists and watches the simulator serves and the body
 * bytes it writes for them (compressed or not, as sent), by the client certificate's node. Node's
 * http diagnostics channel sees each request before the simulator's handler does.
 */
export class ApiserverTally {
  readonly pools = new Map<string, PoolTally>()
  readonly nodeBytes = new Map<string, number>()
  private readonly onStart = (message: unknown) => this.started(message as { request: IncomingMessage; response: ServerResponse })

  constructor(
    private readonly port: number,
    private readonly poolOf: (node: string) => string | undefined,
  ) {
    dc.subscribe('http.server.request.start', this.onStart)
  }

  close(): void {
    dc.unsubscribe('http.server.request.start', this.onStart)
  }

  pool(name: string): PoolTally {
    let tally = this.pools.get(name)
    if (!tally) this.pools.set(name, (tally = { lists: 0, watches: 0, openWatches: 0, bytes: 0 }))
    return tally
  }

  /** A copy of the counters, to subtract from a later one. */
  snapshot(): { pools: Map<string, PoolTally>; nodeBytes: Map<string, number> } {
    return { pools: new Map([...this.pools].map(([k, v]) => [k, { ...v }])), nodeBytes: new Map(this.nodeBytes) }
  }

  private started({ request: req, response: res }: { request: IncomingMessage; response: ServerResponse }): void {
    if (req.socket.localPort !== this.port) return
    const info = apiserverRequestInfo(req.method ?? 'GET', req.url ?? '/')
    if (!info.isResourceRequest || info.name !== '' || !poolWide.has(info.resource) || (info.verb !== 'list' && info.verb !== 'watch')) return
    const cn = (req.socket as TLSSocket).getPeerCertificate?.()?.subject?.CN
    const node = typeof cn === 'string' && cn.startsWith('system:node:') ? cn.slice('system:node:'.length) : undefined
    const pool = node === undefined ? undefined : this.poolOf(node)
    if (node === undefined || pool === undefined) return
    const tally = this.pool(pool)
    if (info.verb === 'list') tally.lists++
    else {
      tally.watches++
      tally.openWatches++
      res.once('close', () => tally.openWatches--)
    }
    const count = (chunk: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return
      const n = typeof chunk === 'string' ? Buffer.byteLength(chunk) : (chunk as Uint8Array).byteLength
      tally.bytes += n
      this.nodeBytes.set(node, (this.nodeBytes.get(node) ?? 0) + n)
    }
    const write = res.write
    const end = res.end
    res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
      count(chunk)
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest)
    } as ServerResponse['write']
    res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
      count(chunk)
      return (end as (...a: unknown[]) => ServerResponse).call(this, chunk, ...rest)
    } as ServerResponse['end']
  }
}

/** The simulator over TLS (client certificates verified: CN the user), and per node a Node labelled with its pool and a kubeconfig of its own. */
export async function poolSimulator(pools: Record<string, string[]>): Promise<{ sim: ApiServerSimulator; nodes: PoolNode[] }> {
  const pki = await createTestPki()
  const sim = await ApiServerSimulator.start({
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    bookmarkIntervalMs: 60_000,
    eventWindow: 10_000,
  })
  const dir = mkdtempSync(path.join(scratch(), 'pool-'))
  const nodes: PoolNode[] = []
  for (const [pool, names] of Object.entries(pools)) {
    for (const name of names) {
      sim.create({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, labels: { 'apps.openyurt.io/nodepool': pool, 'kubernetes.io/hostname': name } },
        status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] },
      })
      sim.create({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `agent-${name}`, namespace: 'kube-system' },
        spec: { nodeName: name, containers: [{ name: 'a', image: 'agent:1' }] },
      })
      const { cert, key } = await issueClientCertificate(pki.ca, `system:node:${name}`, ['system:nodes'])
      const kubeconfig = await writeKubeconfig(path.join(dir, name), { server: sim.url, ca: pki.ca.cert, cert, key, inline: true })
      nodes.push({ name, pool, kubeconfig })
    }
  }
  return { sim, nodes }
}

export interface PoolHubTimings {
  leaseDurationMs: number
  renewDeadlineMs: number
  retryPeriodMs: number
  healthIntervalMs: number
}

const runtimeEnv = productionRuntimeEnv()
const children = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})

/** A built hub (node <build>/cmd/outpost.js) of one node, in the static pod's runtime environment. */
export class PoolHubChild {
  private output = ''
  private readonly exited: Promise<unknown>

  private constructor(
    readonly node: PoolNode,
    private readonly child: ChildProcess,
    readonly proxyUrl: string,
    readonly adminUrl: string,
  ) {
    // BENCH_HUB_LOGS=dir: each hub's whole output in dir/<node>.log, for a run that went wrong
    const logs = process.env.BENCH_HUB_LOGS
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-4_000)
      if (logs) appendFileSync(path.join(logs, `${node.name}.log`), chunk)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    this.exited = once(child, 'exit')
    children.add(child)
    void this.exited.then(() => children.delete(child))
  }

  static async start(entry: string, node: PoolNode, sharing: boolean, t: PoolHubTimings): Promise<PoolHubChild> {
    // a free port found is not a port held: another process on the box may take it first
    for (let attempt = 1; ; attempt++) {
      try {
        return await PoolHubChild.startOnce(entry, node, sharing, t)
      } catch (error) {
        if (attempt === 3 || !(error as Error).message.includes('EADDRINUSE')) throw error
      }
    }
  }

  private static async startOnce(entry: string, node: PoolNode, sharing: boolean, t: PoolHubTimings): Promise<PoolHubChild> {
    const [port, adminPort] = [await freePort(), await freePort()]
    const ms = (n: number) => `${n}ms`
    const args = [
      entry,
      ...['--kubeconfig', node.kubeconfig, '--node-name', node.name, '--cache-dir', mkdtempSync(path.join(scratch(), 'pool-cache-'))],
      ...['--port', String(port), '--admin-port', String(adminPort), '--secure-port', '0', '--log-level', 'warn'],
      ...['--health-interval', ms(t.healthIntervalMs), '--health-timeout', '2s', '--health-failures', '2', '--health-successes', '1'],
      `--pool-sharing=${sharing ? 'on' : 'off'}`,
      ...['--pool-port', '0', '--pool-bind-address', '127.0.0.1'],
      ...['--pool-lease-duration', ms(t.leaseDurationMs), '--pool-renew-deadline', ms(t.renewDeadlineMs), '--pool-retry-period', ms(t.retryPeriodMs)],
      ...hubExtraArgs,
    ]
    const child = spawn(process.execPath, args, {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...runtimeEnv, NODE_OPTIONS: runtimeEnv.NODE_OPTIONS ?? '' },
    })
    const hub = new PoolHubChild(node, child, `http://127.0.0.1:${port}`, `http://127.0.0.1:${adminPort}`)
    const deadline = performance.now() + 60_000
    for (;;) {
      if (child.exitCode !== null) throw new Error(`hub ${node.name} exited (${child.exitCode}):\n${hub.output}`)
      if (performance.now() > deadline) throw new Error(`hub ${node.name} did not listen within 60 s:\n${hub.output}`)
      // this hub's admin port, not another's: two hubs started at once can be given the same free
      // port, and the one that lost it exits while the winner answers its health check
      const ok = await request(`${hub.adminUrl}/debug/topology`).then(
        async res => {
          if (res.statusCode !== 200) return (await res.body.dump(), false)
          return ((await res.body.json().catch(() => ({}))) as { node?: string }).node === node.name
        },
        () => false,
      )
      if (ok) return hub
      await sleep(100)
    }
  }

  /** what the hub printed last (its warnings) */
  get log(): string {
    return this.output
  }

  /** how it ended, and the error it printed (else its last lines) */
  get death(): string {
    const how = this.child.signalCode ? `killed by ${this.child.signalCode}` : `exit code ${this.child.exitCode}`
    const lines = this.output.split('\n').filter(line => line.trim())
    const error = lines.find(line => /^\w*Error\b|Error \[|^outpost: |FATAL|"level":(50|60)/.test(line))
    return `(${how}): ${(error ?? lines.slice(-3).join(' | ')).slice(0, 600) || 'it printed nothing'}`
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** What /debug/pool says, or undefined when it does not answer. */
  async pool(): Promise<any> {
    try {
      const res = await request(`${this.adminUrl}/debug/pool`, { headersTimeout: 5_000, bodyTimeout: 5_000 })
      if (res.statusCode !== 200) return void (await res.body.dump())
      return await res.body.json()
    } catch {
      return undefined
    }
  }

  /** SIGKILL: the Lease is neither renewed nor released, every connection drops. */
  async kill(): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGKILL')
    await this.exited
  }

  async stop(): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGTERM')
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000)
    await this.exited
    clearTimeout(timer)
  }
}

/** One list+watch of a node component through its hub: counts its lists, keeps the last resourceVersion seen. */
export class PoolClient {
  lists = 0
  version: string | undefined
  /** why the last list or watch failed */
  problem = 'none'
  private stopped = false
  /** a stop ends a request on its way too (a hub that does not answer must not hold the bench up) */
  private readonly abort = new AbortController()
  private running: Promise<void> | undefined

  constructor(
    private readonly base: string,
    readonly userAgent: string,
    readonly path: string,
    private readonly format: 'json' | 'protobuf',
    private readonly dispatcher: Agent,
  ) {}

  /** the last version seen, as a number (the simulator's are integers) */
  get seen(): number {
    return this.version === undefined ? -1 : Number(this.version)
  }

  start(): void {
    this.running = this.run()
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (this.version === undefined) await this.list()
        await this.watch()
      } catch (error) {
        this.problem = (error as Error).message
        if (!this.stopped) await sleep(500)
      }
    }
  }

  private headers(): Record<string, string> {
    return { 'user-agent': this.userAgent, accept: this.format === 'json' ? 'application/json' : `${protobufType}, application/json` }
  }

  private async list(): Promise<void> {
    const res = await request(`${this.base}${this.path}`, { headers: this.headers(), dispatcher: this.dispatcher, signal: this.abort.signal })
    if (res.statusCode !== 200) {
      await res.body.dump()
      throw new Error(`list ${res.statusCode}`)
    }
    const body = Buffer.from(await res.body.arrayBuffer())
    this.lists++
    this.version = this.format === 'json' ? JSON.parse(body.toString()).metadata.resourceVersion : splitList(decodeUnknown(body).raw).resourceVersion
  }

  private async watch(): Promise<void> {
    const sep = this.path.includes('?') ? '&' : '?'
    const url = `${this.base}${this.path}${sep}watch=true&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion=${this.version}`
    const res = await request(url, { headers: this.headers(), dispatcher: this.dispatcher, signal: this.abort.signal })
    if (res.statusCode !== 200) {
      await res.body.dump()
      if (res.statusCode === 410) this.version = undefined
      throw new Error(`watch ${res.statusCode}`)
    }
    await pipeline(
      res.body,
      new WatchFrameSplitter(this.format),
      new Writable({
        objectMode: true,
        write: (frame: Buffer, _e, done) => {
          try {
            this.event(frame)
            done()
          } catch (error) {
            done(error as Error)
          }
        },
      }),
    )
  }

  private event(frame: Buffer): void {
    if (this.format === 'json') {
      const event = JSON.parse(frame.toString()) as { type: string; object: { metadata?: { resourceVersion?: string } } }
      // client-go relists on an ERROR event (410 Expired above all)
      if (event.type === 'ERROR') this.version = undefined
      else if (event.object.metadata?.resourceVersion) this.version = event.object.metadata.resourceVersion
      return
    }
    const event = decodeWatchEvent(frame)
    if (event.type === 'ERROR') this.version = undefined
    else {
      const rv = objectMeta(decodeUnknown(event.object).raw).resourceVersion
      if (rv) this.version = rv
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.abort.abort()
    await this.running
  }
}

/** What each node runs: kube-proxy (protobuf), coredns (JSON), kubelet (JSON; its own pods too). */
export function nodeClients(node: string, hubUrl: string, dispatcher: Agent): PoolClient[] {
  const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'
  const coredns = 'coredns/v1.8.6'
  const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
  const specs: [string, string, 'json' | 'protobuf'][] = [
    [kubeProxy, '/api/v1/services', 'protobuf'],
    [kubeProxy, '/apis/discovery.k8s.io/v1/endpointslices', 'protobuf'],
    [coredns, '/api/v1/services', 'json'],
    [coredns, '/apis/discovery.k8s.io/v1/endpointslices', 'json'],
    [kubelet, '/api/v1/services', 'json'],
    [kubelet, '/api/v1/nodes', 'json'],
    [kubelet, `/api/v1/pods?fieldSelector=spec.nodeName%3D${node}`, 'json'],
  ]
  return specs.map(([ua, p, format]) => new PoolClient(hubUrl, ua, p, format, dispatcher))
}
