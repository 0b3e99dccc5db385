// npm run bench: the hub measured side by side with direct access to the simulator, in one run.
// Prints absolute figures and the hub/direct ratio for each; nothing here asserts a threshold.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Agent, request } from 'undici'
import { ApiServerSimulator } from '../simulator/index.ts'
import { freePort } from '../helpers/hub.ts'

const agent = new Agent({ connections: 64, keepAliveTimeout: 30_000 })
/** kubelet's User-Agent: what the hub caches (the other measures go uncached, as kubectl's would) */
const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89' }

interface Row {
  name: string
  direct: number
  hub: number
  unit: string
  /** true when bigger is better (throughput), false for times */
  higherIsBetter: boolean
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

async function getLatencies(base: string, path: string, count: number): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    const res = await request(base + path, { dispatcher: agent })
    await res.body.dump()
    times.push(performance.now() - start)
  }
  return times.sort((a, b) => a - b)
}

async function concurrentThroughput(base: string, path: string, total: number, concurrency: number): Promise<number> {
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

async function listTime(base: string, path: string, rounds: number, headers: Record<string, string> = {}): Promise<number> {
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
async function watchThroughput(
  simulator: ApiServerSimulator,
  base: string,
  label: string,
  count: number,
  headers: Record<string, string> = {},
): Promise<number> {
  const rv = simulator.currentResourceVersion()
  const res = await request(`${base}/api/v1/namespaces/bench/configmaps?watch=true&resourceVersion=${rv}`, { dispatcher: agent, headers })
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
    simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `w-${label}-${i}`, namespace: 'bench' }, data: { i: String(i) } })
    if (i % 500 === 0) await new Promise(resolve => setImmediate(resolve))
  }
  await done
  const elapsed = (performance.now() - start) / 1000
  res.body.destroy()
  return count / elapsed
}

/**
 * The outpost command in its own process, as on a node (so its CPU is not the load generator's):
 * resolves once a list has been served through it, with the time that took from process start.
 */
async function startHubProcess(
  args: string[],
  readyPath = '/apis/discovery.k8s.io/v1/endpointslices',
  headers: Record<string, string> = {},
): Promise<{ url: string; startMs: number; stop: () => Promise<void> }> {
  const port = await freePort()
  const adminPort = await freePort()
  const start = performance.now()
  const entry = new URL('../../cmd/outpost.ts', import.meta.url).pathname
  const child = spawn(process.execPath, ['--import', 'tsx', entry, '--port', String(port), '--admin-port', String(adminPort), '--log-level', 'warn', ...args], {
    stdio: 'ignore',
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
      if (res.statusCode === 200) return { url, startMs: performance.now() - start, stop }
    } catch {
      // not listening yet
    }
    await new Promise(resolve => setTimeout(resolve, 10))
  }
}

async function main(): Promise<void> {
  const simulator = await ApiServerSimulator.start()
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-'))
  const hubArgs = ['--server', simulator.url, '--cache-dir', cacheDir, '--health-interval', '200ms', '--health-failures', '2']
  const hub = await startHubProcess(hubArgs)
  simulator.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } })
  simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'one', namespace: 'default' }, data: { a: 'b' } })
  for (let i = 0; i < 5000; i++) {
    simulator.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `pod-${i}`, namespace: 'default', labels: { app: `a${i % 10}` } },
      spec: { nodeName: `node-${i % 50}`, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.9' }] },
      status: { phase: 'Running' },
    })
  }
  const targets = { direct: simulator.url, hub: hub.url }
  const rows: Row[] = []

  const getPath = '/api/v1/namespaces/default/configmaps/one'
  await getLatencies(targets.direct, getPath, 200) // warm-up both paths
  await getLatencies(targets.hub, getPath, 200)
  const direct = await getLatencies(targets.direct, getPath, 2000)
  const viaHub = await getLatencies(targets.hub, getPath, 2000)
  rows.push({ name: 'GET one object, p50', direct: percentile(direct, 50), hub: percentile(viaHub, 50), unit: 'ms', higherIsBetter: false })
  rows.push({ name: 'GET one object, p99', direct: percentile(direct, 99), hub: percentile(viaHub, 99), unit: 'ms', higherIsBetter: false })
  rows.push({
    name: 'GET, 32 concurrent clients',
    direct: await concurrentThroughput(targets.direct, getPath, 10_000, 32),
    hub: await concurrentThroughput(targets.hub, getPath, 10_000, 32),
    unit: 'req/s',
    higherIsBetter: true,
  })
  rows.push({
    name: 'LIST 5,000 pods (median of 9)',
    direct: await listTime(targets.direct, '/api/v1/pods', 9),
    hub: await listTime(targets.hub, '/api/v1/pods', 9),
    unit: 'ms',
    higherIsBetter: false,
  })
  rows.push({
    name: 'watch events delivered (20,000 writes)',
    direct: await watchThroughput(simulator, targets.direct, 'd', 20_000),
    hub: await watchThroughput(simulator, targets.hub, 'h', 20_000),
    unit: 'events/s',
    higherIsBetter: true,
  })
  rows.push({
    name: 'watch events, recorded to disk first (15,000)',
    direct: await watchThroughput(simulator, targets.direct, 'dc', 15_000, kubelet),
    hub: await watchThroughput(simulator, targets.hub, 'hc', 15_000, kubelet),
    unit: 'events/s',
    higherIsBetter: true,
  })

  // Offline: kubelet's pods list answered from the cache, against the same list from the cloud.
  const podsDirect = await listTime(targets.direct, '/api/v1/pods', 9, kubelet)
  await listTime(targets.hub, '/api/v1/pods', 1, kubelet) // recorded
  await simulator.setFault('refuse')
  await new Promise(resolve => setTimeout(resolve, 1_500)) // two failed probes: offline
  rows.push({
    name: 'LIST 5,000 pods: cloud vs hub offline cache',
    direct: podsDirect,
    hub: await listTime(targets.hub, '/api/v1/pods', 9, kubelet),
    unit: 'ms',
    higherIsBetter: false,
  })
  await hub.stop()

  // Cold start offline: the cache holds the 15,000 watched configmaps and the 5,000 pods.
  const cold = await startHubProcess(hubArgs, '/api/v1/pods', kubelet)
  await cold.stop()
  await simulator.close()

  const demo = await startHubProcess([]) // npm start: the demo, simulator included
  await demo.stop()
  await agent.close()

  const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(2))
  console.log('\noutpost bench: direct to the simulator vs through the hub (its own process), same run\n')
  console.log(`${'measure'.padEnd(42)}${'direct'.padStart(12)}${'hub'.padStart(12)}  unit       hub/direct`)
  for (const row of rows) {
    const ratio = row.hub / row.direct
    console.log(`${row.name.padEnd(42)}${fmt(row.direct).padStart(12)}${fmt(row.hub).padStart(12)}  ${row.unit.padEnd(10)} ${ratio.toFixed(2)}x`)
  }
  console.log(`\ndemo cold start (npm start → first list served through the hub): ${demo.startMs.toFixed(0)} ms (bar: 5000 ms)`)
  console.log(`offline cold start with 20,000 cached objects (process start → first list served from disk): ${cold.startMs.toFixed(0)} ms`)
}

main().catch(error => {
  console.error(error)
  process.exit(1)
})
