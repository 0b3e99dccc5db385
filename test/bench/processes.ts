// The two processes the bench drives from its own (the load generator): the apiserver simulator
// (test/bench/simulator-process.ts, commands over IPC) and the BUILT hub (node <build>/cmd/outpost.js).
import { fork, spawn, spawnSync } from 'node:child_process'
import type { ChildProcess, StdioOptions } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { hubNode } from './objects.ts'
import { productionRuntimeEnv } from './runtime-env.ts'

export const root = fileURLToPath(new URL('../..', import.meta.url))
const debug = Boolean(process.env.BENCH_DEBUG)
/** node options for the hub's process, for experiments: BENCH_HUB_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" */
const hubNodeArgs = (process.env.BENCH_HUB_NODE_ARGS ?? '').split(' ').filter(a => a !== '')
/** extra hub flags for every hub the bench starts: BENCH_HUB_ARGS="--shared-watches=false" */
export const hubExtraArgs = (process.env.BENCH_HUB_ARGS ?? '').split(' ').filter(a => a !== '')

/** the static pod's NODE_OPTIONS and malloc settings, for every hub the bench starts */
const runtimeEnv = productionRuntimeEnv()

/** `npm run build` (into `outDir`, default dist/): the hub the bench runs is the production build. */
export function buildHub(outDir = path.join(root, 'dist')): string {
  const args = ['run', 'build', ...(path.resolve(outDir) === path.join(root, 'dist') ? [] : ['--', '--outDir', outDir])]
  const built = spawnSync('npm', args, { cwd: root, encoding: 'utf8', timeout: 300_000 })
  if (built.status !== 0) throw new Error(`npm run build failed:\n${built.stdout}\n${built.stderr}`)
  return path.join(outDir, 'cmd', 'outpost.js')
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

/** every hub and floor proxy this process started and has not seen exit: killed if the bench itself exits first */
const liveChildren = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of liveChildren) child.kill('SIGKILL')
})

/** `node <args>` in the static pod's runtime environment (NODE_OPTIONS, malloc), killed if the bench exits first. */
function spawnAsStaticPod(args: string[], stdio: StdioOptions): ChildProcess {
  const child = spawn(process.execPath, args, { cwd: root, stdio, env: { ...process.env, ...runtimeEnv, NODE_OPTIONS: runtimeEnv.NODE_OPTIONS ?? '' } })
  liveChildren.add(child)
  child.on('exit', () => liveChildren.delete(child))
  return child
}

let scratchDir: string | undefined
/** one temporary directory per bench run for the hubs' caches; cleanupScratch() removes it */
export function scratch(): string {
  scratchDir ??= mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-'))
  return scratchDir
}

export function cleanupScratch(): void {
  if (scratchDir) rmSync(scratchDir, { recursive: true, force: true })
  scratchDir = undefined
}

export const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

export class SimProcess {
  private nextId = 1
  private readonly pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>()

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.on('message', (m: { id?: number; result?: unknown; error?: string }) => {
      const waiter = m.id === undefined ? undefined : this.pending.get(m.id)
      if (!waiter) return
      this.pending.delete(m.id!)
      if (m.error !== undefined) waiter.reject(new Error(`simulator: ${m.error}`))
      else waiter.resolve(m.result)
    })
    child.on('exit', code => {
      for (const w of this.pending.values()) w.reject(new Error(`simulator process exited (${code})`))
      this.pending.clear()
    })
  }

  static async start(): Promise<SimProcess> {
    const script = fileURLToPath(new URL('./simulator-process.ts', import.meta.url))
    const child = fork(script, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', debug ? 'inherit' : 'ignore', 'inherit', 'ipc'] })
    const [message] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => [{}])])) as [{ ready?: string }]
    if (!message.ready) throw new Error('the simulator process did not start')
    return new SimProcess(child, message.ready)
  }

  get pid(): number {
    return this.child.pid!
  }

  call<T = any>(cmd: string, args: object = {}): Promise<T> {
    const id = this.nextId++
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.child.send({ id, cmd, args })
    })
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return
    const exited = once(this.child, 'exit')
    await this.call('close').catch(() => {})
    await exited
  }
}

/** /proc/<pid>/status fields, in MiB */
export function procMemory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 }
}

const ticksPerSecond = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100

/** CPU time (user + system, ms) a process has used so far: /proc/<pid>/stat */
export function procCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // fields from the 3rd (state) on
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond // utime, stime: the 14th and 15th
}

/** Runs `measure` and says how much CPU (ms) each of `pids` used meanwhile (this process: its own pid). */
export async function withCpu<T>(pids: number[], measure: () => Promise<T>): Promise<{ result: T; cpuMs: number[] }> {
  const before = pids.map(procCpuMs)
  const result = await measure()
  return { result, cpuMs: pids.map((pid, i) => procCpuMs(pid) - before[i]) }
}

/**
 * test/bench/floor-proxy.mjs: a bare fastify + undici pass-through proxy, the floor of the hub's
 * stack (idle RSS, GET throughput), run with the static pod's runtime environment as the hub is.
 */
export class FloorProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(upstream: string): Promise<FloorProcess> {
    const port = await freePort()
    const script = fileURLToPath(new URL('./floor-proxy.mjs', import.meta.url))
    const child = spawnAsStaticPod([script, upstream, String(port)], ['ignore', 'pipe', 'inherit'])
    const [line] = (await Promise.race([once(child.stdout!, 'data'), once(child, 'exit').then(() => [Buffer.from('exited')])])) as [Buffer]
    if (!line.toString().startsWith('listening')) throw new Error(`the floor proxy did not start: ${line.toString()}`)
    return new FloorProcess(child, `http://127.0.0.1:${port}`)
  }

  get pid(): number {
    return this.child.pid!
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = once(this.child, 'exit')
    this.child.kill('SIGKILL')
    await exited
  }
}

export interface HubOptions {
  server: string
  /** the hub's credentials and server from a kubeconfig (a real apiserver's), in place of --server */
  kubeconfig?: string
  cacheDir?: string
  /** don't wait for the admin port: the caller times the start itself */
  noWait?: boolean
  extraArgs?: string[]
}

export class HubProcess {
  private output = ''
  readonly exited: Promise<number | null>

  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    readonly adminUrl: string,
    readonly cacheDir: string,
    /** performance.now() at spawn */
    readonly spawnedAt: number,
  ) {
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-8_000)
      if (debug) process.stderr.write(chunk)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    this.exited = once(child, 'exit').then(([code]) => code as number | null)
  }

  static async start(entry: string, options: HubOptions): Promise<HubProcess> {
    const [port, adminPort] = [await freePort(), await freePort()]
    const cacheDir = options.cacheDir ?? mkdtempSync(path.join(scratch(), 'cache-'))
    const args = [
      ...hubNodeArgs,
      entry,
      ...(options.kubeconfig ? ['--kubeconfig', options.kubeconfig] : ['--server', options.server]),
      '--node-name',
      hubNode,
      '--cache-dir',
      cacheDir,
      '--port',
      String(port),
      '--admin-port',
      String(adminPort),
      '--secure-port',
      '0',
      '--log-level',
      debug ? 'debug' : 'warn',
      '--health-interval',
      '200ms',
      '--health-failures',
      '2',
      '--health-successes',
      '1',
      ...hubExtraArgs,
      ...(options.extraArgs ?? []),
    ]
    const spawnedAt = performance.now()
    const child = spawnAsStaticPod(args, ['ignore', 'pipe', 'pipe'])
    const hub = new HubProcess(child, `http://127.0.0.1:${port}`, `http://127.0.0.1:${adminPort}`, cacheDir, spawnedAt)
    if (!options.noWait) await hub.waitListening()
    return hub
  }

  get pid(): number {
    return this.child.pid!
  }

  /** what the hub printed last (its warnings and errors) */
  get log(): string {
    return this.output
  }

  async waitListening(timeoutMs = 30_000): Promise<void> {
    const deadline = performance.now() + timeoutMs
    while (performance.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`the hub exited (${this.child.exitCode}):\n${this.output}`)
      try {
        const res = await request(`${this.adminUrl}/v1/healthz`)
        await res.body.dump()
        if (res.statusCode === 200) return
      } catch {
        // not listening yet
      }
      await sleep(20)
    }
    throw new Error(`the hub did not listen within ${timeoutMs} ms:\n${this.output}`)
  }

  memory(): { rss: number; hwm: number } {
    return procMemory(this.pid)
  }

  async metrics(): Promise<string> {
    const res = await request(`${this.adminUrl}/metrics`)
    return res.body.text()
  }

  /** the sum of a counter or gauge over its labels */
  async metric(name: string): Promise<number> {
    const text = await this.metrics()
    const values = text
      .split('\n')
      .filter(l => l.startsWith(name + ' ') || l.startsWith(name + '{'))
      .map(l => Number(l.slice(l.lastIndexOf(' ') + 1)))
    if (values.length === 0) throw new Error(`no metric ${name}`)
    return values.reduce((a, b) => a + b, 0)
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.child.kill('SIGKILL')
    await this.exited
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.child.kill('SIGTERM')
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000) // a hub that hangs (a busy event loop) never takes its SIGTERM
    await this.exited
    clearTimeout(timer)
  }
}
