// Shared by the bench suites: one keep-alive client, the hub as a child process, timing helpers.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Agent, request } from 'undici'
import type { Dispatcher } from 'undici'
import type { ApiServerSimulator } from '../simulator/index.ts'
import { freePort } from '../helpers/hub.ts'

export const agent = new Agent({ connections: 64, keepAliveTimeout: 30_000 })
/** kubelet's User-Agent: what the hub caches (the other measures go uncached, as kubectl's would) */
export const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89' }

export interface Row {
  name: string
  direct: number
  hub: number
  unit: string
  /** true when bigger is better (throughput), false for times */
  higherIsBetter: boolean
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

export async function getLatencies(base: string, path: string, count: number, dispatcher: Dispatcher = agent, headers: Record<string, string> = {}): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    const res = await request(base + path, { dispatcher, headers })
    await res.body.dump()
    times.push(performance.now() - start)
  }
  return times.sort((a, b) => a - b)
}

export async function concurrentThroughput(base: string, path: string, total: number, concurrency: number): Promise<number> {
  let next = 0
  const start = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < total) {
        const res = await request(base + path, { dispatcher: agent })
        await res.body.dump()
      }
    }),
  )
  return total / ((performance.now() - start) / 1000)
}

export async function listTime(base: string, path: string, rounds: number, headers: Record<string, string> = {}): Promise<number> {
  const times: number[] = []
  for (let i = 0; i < rounds; i++) {
    const start = performance.now()
    const res = await request(base + path, { dispatcher: agent, headers })
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${await res.body.text()}`)
    await res.body.arrayBuffer()
    times.push(performance.now() - start)
  }
  return times.sort((a, b) => a - b)[Math.floor(rounds / 2)]
}

/** Events per second a watch delivers while the simulator writes `count` objects as fast as it can. */
/**
 * Events per second a watch delivers while `write(i)` changes the cluster `count` times as fast as it
 * can (each write must produce exactly one event on the watch).
 */
export async function watchEventsPerSecond(
  simulator: ApiServerSimulator,
  watchUrl: string,
  headers: Record<string, string>,
  count: number,
  write: (i: number) => void,
): Promise<number> {
  const res = await request(`${watchUrl}&resourceVersion=${simulator.currentResourceVersion()}`, { dispatcher: agent, headers })
  let seen = 0
  let buffered = ''
  const done = (async () => {
    for await (const chunk of res.body) {
      buffered += chunk.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      seen += lines.length
      if (seen >= count) break
    }
  })()
  const start = performance.now()
  for (let i = 0; i < count; i++) {
    write(i)
    if (i % 100 === 0) await new Promise(resolve => setImmediate(resolve))
  }
  await done
  const elapsed = (performance.now() - start) / 1000
  res.body.destroy()
  return count / elapsed
}

/** watchEventsPerSecond for a burst of new ConfigMaps. */
export function watchThroughput(simulator: ApiServerSimulator, base: string, label: string, count: number, headers: Record<string, string> = {}): Promise<number> {
  return watchEventsPerSecond(simulator, `${base}/api/v1/namespaces/bench/configmaps?watch=true`, headers, count, i =>
    simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `w-${label}-${i}`, namespace: 'bench' }, data: { i: String(i) } }),
  )
}

/**
 * The outpost command in its own process, as on a node (so its CPU is not the load generator's):
 * resolves once a list has been served through it, with the time that took from process start.
 */
export async function startHubProcess(
  args: string[],
  readyPath = '/apis/discovery.k8s.io/v1/endpointslices',
  headers: Record<string, string> = {},
): Promise<{ url: string; secureUrl: string; startMs: number; stop: () => Promise<void> }> {
  const port = await freePort()
  const adminPort = await freePort()
  const securePort = await freePort()
  const start = performance.now()
  const entry = new URL('../../cmd/outpost.ts', import.meta.url).pathname
  const child = spawn(process.execPath, ['--import', 'tsx', entry, '--port', String(port), '--admin-port', String(adminPort), '--secure-port', String(securePort), '--log-level', process.env.BENCH_DEBUG ? 'debug' : 'warn', ...args], {
    stdio: process.env.BENCH_DEBUG ? 'inherit' : 'ignore',
  })
  const stop = async () => {
    child.kill('SIGTERM')
    await once(child, 'exit')
  }
  const url = `http://127.0.0.1:${port}`
  for (;;) {
    try {
      const res = await request(url + readyPath, { headers })
      await res.body.dump()
      if (res.statusCode === 200) return { url, secureUrl: `https://127.0.0.1:${securePort}`, startMs: performance.now() - start, stop }
    } catch {
      // not listening yet
    }
    await new Promise(resolve => setTimeout(resolve, 10))
  }
}

export function printRows(title: string, rows: Row[]): void {
  const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(2))
  console.log(`\n${title}\n`)
  console.log(`${'measure'.padEnd(48)}${'baseline'.padStart(12)}${'hub'.padStart(12)}  unit       ratio`)
  for (const row of rows) {
    console.log(`${row.name.padEnd(48)}${fmt(row.direct).padStart(12)}${fmt(row.hub).padStart(12)}  ${row.unit.padEnd(10)} ${(row.hub / row.direct).toFixed(2)}x`)
  }
}
