// `npm start` with no apiserver: the hub in front of the apiserver simulator (the "cloud"), and a
// switch that takes the cloud away and brings it back, so a newcomer sees what the hub is for.
// Only a source checkout has the simulator (run with tsx, or from its build); the image's bundle
// exits saying so.
import { existsSync } from 'node:fs'
import { demoTempDir } from './demo-temp.ts'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { HubConfig } from '../lib/config.ts'
import type { Hub } from '../lib/hub.ts'
import type { LogEntry } from './log.ts'

export const demoNode = 'kind-worker2'
/** the demo's control port: `curl -X POST http://127.0.0.1:10270/cloud/off` */
export const defaultControlPort = 10270

/** What the demo needs of test/simulator/server.ts's ApiServerSimulator. */
export interface DemoCloud {
  url: string
  setFault(fault: 'none' | 'refuse'): Promise<void>
  create(obj: unknown): unknown
  close(): Promise<void>
}

export async function startDemoCloud(): Promise<DemoCloud> {
  // Not a literal, and no type import: neither tsc nor esbuild may pull the simulator into dist/.
  const demoModule = '../test/simulator/demo.ts'
  const module = (await importOrUndefined(demoModule)) ?? (await fromBuild())
  if (!module) {
    process.stderr.write(
      'outpost: no apiserver given, and the demo (an apiserver simulator, in TypeScript) needs a source checkout with its dev dependencies: npm ci, then npm start; else give --kubeconfig or --server\n',
    )
    process.exit(2)
  }
  return (module.startDemoCluster as () => Promise<DemoCloud>)()
}

async function importOrUndefined(specifier: string): Promise<Record<string, unknown> | undefined> {
  try {
    return await import(specifier)
  } catch {
    return undefined
  }
}

/**
 * Run from the build in a checkout (node dist/cmd/outpost.js, node dist/outpost.mjs): plain Node
 * cannot load the simulator's TypeScript, so tsx (a dev dependency) loads it, from the checkout's
 * test/ beside dist/. The image has neither.
 */
async function fromBuild(): Promise<Record<string, unknown> | undefined> {
  const tsx = 'tsx/esm/api'
  const api = (await importOrUndefined(tsx)) as { tsImport?: (specifier: string, parent: string) => Promise<Record<string, unknown>> } | undefined
  if (!api?.tsImport) return undefined
  for (const candidate of ['../../test/simulator/demo.ts', '../test/simulator/demo.ts']) {
    const url = new URL(candidate, import.meta.url)
    if (!existsSync(url)) continue
    try {
      return await api.tsImport(url.href, import.meta.url)
    } catch {
      return undefined
    }
  }
  return undefined
}

/** The config the demo runs with: what the user gave, else what suits a newcomer's machine. */
export function demoConfig(config: HubConfig, cloud: DemoCloud, argv: string[], env: Record<string, string | undefined>): HubConfig {
  const given = (flag: string, variable: string) => argv.some(a => a === flag || a.startsWith(`${flag}=`)) || Boolean(env[variable])
  return {
    ...config,
    servers: [new URL(cloud.url)],
    nodeName: given('--node-name', 'OUTPOST_NODE_NAME') ? config.nodeName : demoNode,
    // a newcomer's machine has no /var/lib/outpost; each demo run caches its own fresh cluster in a temp dir
    cacheDir: given('--cache-dir', 'OUTPOST_CACHE_DIR') ? config.cacheDir : demoTempDir('outpost-demo-cache-'),
    certDir: given('--cert-dir', 'OUTPOST_CERT_DIR') ? config.certDir : demoTempDir('outpost-demo-pki-'),
    // a node probes every 5 s and needs 3 failures; a newcomer should not wait 15 s to see the hub notice
    healthIntervalMs: given('--health-interval', 'OUTPOST_HEALTH_INTERVAL') ? config.healthIntervalMs : 1000,
  }
}

/**
 * The demo has no kubelet or kube-proxy: it reads, once, what they read at start, as they do (no
 * Authorization: the node's own clients), and the discovery documents kubectl reads first. The hub
 * keeps all of it, so it can answer them and kubectl once the cloud is away.
 */
export async function readAsTheNode(proxyUrl: string, nodeName: string): Promise<void> {
  const get = async (path: string, userAgent: string) => {
    const res = await fetch(proxyUrl + path, { headers: { 'user-agent': userAgent, accept: 'application/json' } })
    if (!res.ok) throw new Error(`demo: GET ${path} as ${userAgent}: ${res.status}`)
    return res.json() as Promise<any>
  }
  const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) outpost-demo'
  const kubelet = 'kubelet/v1.24.0 (linux/amd64) outpost-demo'
  const kubectl = 'kubectl/v1.24.0 (linux/amd64) outpost-demo'
  const groups = (await get('/apis', kubectl)).groups as { versions: { groupVersion: string }[] }[]
  const versions = groups.flatMap(g => g.versions.map(v => `/apis/${v.groupVersion}`))
  await Promise.all([
    get('/api/v1/services', kubeProxy),
    get('/apis/discovery.k8s.io/v1/endpointslices', kubeProxy),
    get(`/api/v1/nodes/${nodeName}`, kubelet),
    get(`/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`, kubelet),
    ...['/version', '/api', '/api/v1', ...versions].map(p => get(p, kubectl)),
  ])
}

/** The hub's view of the cloud, within `timeoutMs`: the seconds it took, or undefined when it has not come to it. */
function hubSees(hub: Hub, state: 'online' | 'offline', timeoutMs: number): Promise<number | undefined> {
  const started = Date.now()
  const took = () => Math.round((Date.now() - started) / 100) / 10
  if (hub.health.state === state) return Promise.resolve(took())
  return new Promise(resolve => {
    const timer = setTimeout(() => done(undefined), timeoutMs)
    const onChange = (next: string) => {
      if (next === state) done(took())
    }
    const done = (seconds: number | undefined) => {
      clearTimeout(timer)
      hub.health.off('change', onChange)
      resolve(seconds)
    }
    hub.health.on('change', onChange)
  })
}

/**
 * Takes the cloud away as a WAN drop would look to the hub (every connection refused, open ones
 * and their watches cut) and brings it back. While it is away the cloud changes: a new
 * EndpointSlice of svc-ud1 in this node's pool, which open watches receive once the cloud is back.
 */
export class CloudSwitch {
  private away = false
  private outages = 0
  private queue: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly cloud: DemoCloud,
    private readonly hub: Hub,
    private readonly say: (line: string) => void,
  ) {}

  get isAway(): boolean {
    return this.away
  }

  /** the EndpointSlice the cloud adds during the n-th outage */
  static sliceName(outage: number): string {
    return `svc-ud1-outage-${outage}`
  }

  /** one at a time: a key press and a curl at once must not interleave two switches */
  private serial<T>(step: () => Promise<T>): Promise<T> {
    const next = this.queue.then(step)
    this.queue = next.catch(() => {})
    return next
  }

  /** Resolves once the hub has noticed (or 30 s passed), with what happened, for the curl that asked. */
  off(): Promise<string> {
    return this.serial(async () => {
      if (this.away) return 'the cloud is already away\n'
      await this.cloud.setFault('refuse')
      this.away = true
      const name = CloudSwitch.sliceName(++this.outages)
      this.cloud.create(outageSlice(name, this.outages))
      this.say(`cloud OFF: the simulated apiserver refuses every connection. Meanwhile, in the cloud, EndpointSlice default/${name} appears.`)
      const seconds = await hubSees(this.hub, 'offline', 30_000)
      return seconds === undefined
        ? 'cloud off; the hub has not noticed yet (30 s)\n'
        : `cloud off; the hub noticed in ${seconds} s and answers from its cache: reads, lists and watches go on, writes are refused\n`
    })
  }

  on(): Promise<string> {
    return this.serial(async () => {
      if (!this.away) return 'the cloud is already there\n'
      await this.cloud.setFault('none')
      this.away = false
      this.say('cloud ON: the simulated apiserver answers again.')
      const seconds = await hubSees(this.hub, 'online', 30_000)
      const name = CloudSwitch.sliceName(this.outages)
      return seconds === undefined
        ? 'cloud on; the hub has not noticed yet (30 s)\n'
        : `cloud on; the hub is online again after ${seconds} s and resumes its watches: open watches receive ${name}, added while the cloud was away\n`
    })
  }

  toggle(): Promise<string> {
    return this.away ? this.on() : this.off()
  }
}

function outageSlice(name: string, outage: number): unknown {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': 'svc-ud1', 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
    },
    addressType: 'IPv4',
    ports: [{ name: '', port: 9376, protocol: 'TCP' }],
    // on kind-worker3, in this node's pool (shanghai): kube-proxy through the hub sees it too
    endpoints: [{ addresses: [`10.244.3.${100 + outage}`], conditions: { ready: true }, nodeName: 'kind-worker3', zone: 'shanghai-b' }],
  }
}

/**
 * The demo's own control port, apart from the hub's (whose admin port is production code):
 * POST /cloud/off, POST /cloud/on, GET /cloud. Loopback only. The port is OUTPOST_DEMO_PORT, else
 * 10270, else any free one when that is taken.
 */
export async function startControl(cloud: CloudSwitch, env: Record<string, string | undefined>): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const answer = (code: number, text: string) => res.writeHead(code, { 'content-type': 'text/plain' }).end(text)
    const route = `${req.method} ${req.url}`
    if (route === 'POST /cloud/off')
      cloud.off().then(
        text => answer(200, text),
        error => answer(500, `${error}\n`),
      )
    else if (route === 'POST /cloud/on')
      cloud.on().then(
        text => answer(200, text),
        error => answer(500, `${error}\n`),
      )
    else if (route === 'GET /cloud') answer(200, cloud.isAway ? 'off\n' : 'on\n')
    else answer(404, 'POST /cloud/off, POST /cloud/on, GET /cloud\n')
  })
  const wanted = env.OUTPOST_DEMO_PORT ? Number(env.OUTPOST_DEMO_PORT) : defaultControlPort
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject)
        resolve()
      })
    })
  try {
    await listen(wanted)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || env.OUTPOST_DEMO_PORT) throw error
    await listen(0)
  }
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise(resolve => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** In a terminal: `c` switches the cloud, `q` (or Ctrl-C, which raw mode delivers as a key) stops. */
export function listenToKeys(cloud: CloudSwitch, stop: () => void): void {
  const stdin = process.stdin
  if (!stdin.isTTY) return
  stdin.setRawMode(true)
  process.on('exit', () => stdin.setRawMode(false))
  stdin.on('data', (key: Buffer) => {
    const k = key.toString()
    if (k === 'c' || k === 'C') void cloud.toggle()
    else if (k === 'q' || k === 'Q' || k === '\u0003' || k === '\u0004') stop()
  })
}

/** Resolves once nothing was logged for `quietMs` (at most `maxMs`), so the banner comes after the start's logs. */
export async function logsQuiet(lastLine: () => number, quietMs: number, maxMs: number): Promise<void> {
  const deadline = Date.now() + maxMs
  while (Date.now() < deadline && Date.now() - lastLine() < quietMs) await new Promise(r => setTimeout(r, 50))
}

/**
 * The start's lines, held while the demo starts (at a terminal), to follow its banner: its info
 * lines are what the banner says (ports, node, certificate); warnings and errors stay, but those of
 * filters that are off make one info line, since the demo has no pods to reach the hub and its
 * HTTPS port a CA of its own: expected here, not a problem to chase. `verbose` (debug, trace) keeps all.
 */
export function afterBanner(held: LogEntry[], verbose: boolean): LogEntry[] {
  if (verbose) return held
  const filtersOff = held.filter(e => e.level === 40 && Array.isArray(e.filters))
  const kept = held.filter(e => e.level >= 40 && !filtersOff.includes(e))
  if (filtersOff.length === 0) return kept
  const names = filtersOff.flatMap(e => e.filters as string[])
  const msg = `filters ${names.join(', ')} are off in the demo: no pods here reach the hub (why each is off: /debug/filters)`
  return [{ level: 30, time: filtersOff[0].time, msg }, ...kept]
}
