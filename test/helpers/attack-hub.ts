// The hub as a process of its own for test/attack.e2e.ts: its RSS and file descriptors are then
// its own, not the test's, as on a node. Run under tsx (the suite does not build dist/), with the
// static pod's runtime environment (heap limit, malloc tuning), so its memory is shaped as in
// production, if higher by tsx's own share.
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { request } from 'undici'
import { eventually, freePort } from './hub.ts'
import { productionRuntimeEnv } from '../bench/runtime-env.ts'

const entry = new URL('../../cmd/outpost.ts', import.meta.url).pathname

/**
 * A test that throws before its teardown, or that tap times out, must not leave a hub behind
 * (this one may hold gigabytes): killed when this process exits, or is told to.
 */
function killWithThisProcess(child: ChildProcess): void {
  const kill = () => child.kill('SIGKILL')
  process.once('exit', kill)
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      kill()
      process.kill(process.pid, signal)
    })
  }
  child.once('exit', () => process.off('exit', kill))
}

export class AttackHub {
  private output = ''
  private readonly exited: Promise<unknown>

  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    readonly adminUrl: string,
    readonly port: number,
  ) {
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-20_000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    this.exited = once(child, 'exit')
  }

  static async start(server: string, nodeName: string, cacheDir: string, extraArgs: string[]): Promise<AttackHub> {
    const [port, adminPort] = [await freePort(), await freePort()]
    const runtime = productionRuntimeEnv()
    const args = ['--import', 'tsx', entry, '--server', server, '--cache-dir', cacheDir, '--node-name', nodeName]
    args.push('--port', String(port), '--admin-port', String(adminPort), '--secure-port', '0', '--log-level', 'warn')
    args.push('--health-interval', '200ms', '--health-timeout', '5s', '--health-failures', '3', '--health-successes', '1', ...extraArgs)
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...runtime } })
    const hub = new AttackHub(child, `http://127.0.0.1:${port}`, `http://127.0.0.1:${adminPort}`, port)
    killWithThisProcess(child)
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`the hub exited (${child.exitCode}):\n${hub.output}`)
        try {
          const res = await request(`${hub.adminUrl}/v1/healthz`)
          await res.body.dump()
          return res.statusCode === 200
        } catch {
          return false
        }
      },
      60_000,
      'the hub process to listen',
    )
    return hub
  }

  get pid(): number {
    return this.child.pid!
  }

  /** what the hub logged last (warnings and errors) */
  get log(): string {
    return this.output
  }

  /** VmRSS, MiB */
  rssMiB(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8')
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) / 1024
  }

  /** the client connections the hub holds open on its proxy port (its own upstream ones aside) */
  connections(): number {
    const onPort = new Set<string>()
    for (const table of ['tcp', 'tcp6']) {
      for (const line of readFileSync(`/proc/${this.pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
        const fields = line.trim().split(/\s+/)
        if (fields.length < 10) continue
        // local_address is ADDR:PORT in hex; state 01 is ESTABLISHED; the inode ties it to a descriptor
        if (parseInt(fields[1].split(':')[1], 16) === this.port && fields[3] === '01') onPort.add(fields[9])
      }
    }
    let count = 0
    for (const fd of readdirSync(`/proc/${this.pid}/fd`)) {
      try {
        const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${this.pid}/fd/${fd}`))?.[1]
        if (inode && onPort.has(inode)) count++
      } catch {
        // closed while listing
      }
    }
    return count
  }

  async metrics(): Promise<string> {
    const res = await request(`${this.adminUrl}/metrics`)
    return res.body.text()
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.child.kill('SIGKILL')
    await this.exited
  }
}
