// npm run bench: the hub measured side by side with direct access to the simulator, in one run.
// Prints absolute figures and the hub/baseline ratio for each; nothing here asserts a threshold.
import { mkdtempSync, readFileSync } from 'node:fs'
import { Agent } from 'undici'
import os from 'node:os'
import path from 'node:path'
import { ApiServerSimulator } from '../simulator/index.ts'
import { agent, kubelet, percentile, getLatencies, concurrentThroughput, listTime, watchThroughput, startHubProcess, printRows } from './common.ts'
import type { Row } from './common.ts'
import { topologyRows } from './topology.ts'

async function main(): Promise<void> {
  const simulator = await ApiServerSimulator.start()
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-'))
  const certDir = mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-pki-'))
  const hubArgs = ['--server', simulator.url, '--cache-dir', cacheDir, '--cert-dir', certDir, '--health-interval', '200ms', '--health-failures', '2']
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
  // The HTTPS port against the plain one, same hub: what TLS and the token check add.
  const tlsAgent = new Agent({ connections: 64, keepAliveTimeout: 30_000, connect: { ca: readFileSync(path.join(certDir, 'ca.crt')) } })
  const token = { authorization: 'Bearer bench-token' }
  await getLatencies(targets.hub, getPath, 200, agent, token) // the token path has pools of its own: warm both
  await getLatencies(hub.secureUrl, getPath, 200, tlsAgent, token)
  const plain = await getLatencies(targets.hub, getPath, 2000, agent, token)
  const secure = await getLatencies(hub.secureUrl, getPath, 2000, tlsAgent, token)
  await tlsAgent.close()
  rows.push({ name: 'GET p50: hub plain port vs HTTPS port', direct: percentile(plain, 50), hub: percentile(secure, 50), unit: 'ms', higherIsBetter: false })
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

  const filterRows = await topologyRows()
  printRows('proxy and cache: direct to the simulator (baseline) vs through the hub in its own process', rows)
  printRows('service topology: unfiltered pass-through (baseline) vs filtered, same run', filterRows)
  await agent.close()
  console.log(`\ndemo cold start (npm start → first list served through the hub): ${demo.startMs.toFixed(0)} ms (bar: 5000 ms)`)
  console.log(`offline cold start with 20,000 cached objects (process start → first list served from disk): ${cold.startMs.toFixed(0)} ms`)
}

main().catch(error => {
  console.error(error)
  process.exit(1)
})
