// Node pools of hubs (leader hubs, issue 27) against the simulator as a real cluster authenticates
// nodes: HTTPS with client certificates of one CA (CN system:node:<name>, O system:nodes), a Node
// per node labelled with its pool and with InternalIP 127.0.0.1, and per node a kubeconfig of its
// own. Hubs run in this process (startPoolHub) or as `outpost` child processes (spawnPoolHub, for
// a SIGKILL). Plus the local clients a node runs, counting their lists: @kubernetes/client-node
// informers (JSON) and a protobuf list+watch as client-go's reflector makes it.
import { mkdtemp } from 'node:fs/promises'
import path from 'node:path'
import { pipeline } from 'node:stream'
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { ApiServerSimulator } from '../simulator/index.ts'
import type { SimulatorOptions } from '../simulator/index.ts'
import { createTestPki, issueClientCertificate, writeKubeconfig } from './pki.ts'
import type { Pem, TestPki } from './pki.ts'
import { eventually, freePort, hubConfig, quietLogger } from './hub.ts'
import { kubeConfigFor } from './clients.ts'
import { processTempDir } from './temp-dirs.ts'
import { startHub } from '../../lib/hub.ts'
import type { Hub } from '../../lib/hub.ts'
import type { HubConfig } from '../../lib/config.ts'
import { WatchFrameSplitter } from '../../lib/api/frames.ts'
import { decodeBody, decodeWatchFrame } from '../../lib/codec/typed.ts'

/**
 * Short enough for a test, long enough for a loaded box: a leader renews every 500 ms and has 2 s
 * to get one through before it steps down; the others take over 3 s after its last renewal.
 */
export const poolTimings = { poolLeaseDurationMs: 3_000, poolRenewDeadlineMs: 2_000, poolRetryPeriodMs: 500 }

export interface PoolNode {
  name: string
  pool: string
  kubeconfig: string
  /** its client certificate, as the kubeconfig holds it */
  cert: Pem
}

export interface PoolCluster {
  simulator: ApiServerSimulator
  pki: TestPki
  nodes: PoolNode[]
  /** the names of a pool's nodes */
  namesOf(pool: string): string[]
  close(): Promise<void>
}

/** The simulator over TLS with node client certificates, and the nodes of each pool. */
export async function startPoolCluster(pools: Record<string, string[]>, options: Omit<SimulatorOptions, 'tls'> = {}): Promise<PoolCluster> {
  const pki = await createTestPki()
  const simulator = await ApiServerSimulator.start({ ...options, tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true } })
  const nodes: PoolNode[] = []
  for (const [pool, names] of Object.entries(pools)) {
    for (const name of names) {
      simulator.create({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, labels: { 'apps.openyurt.io/nodepool': pool, 'kubernetes.io/hostname': name } },
        status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] },
      })
      const cert = await issueClientCertificate(pki.ca, `system:node:${name}`, ['system:nodes'])
      const dir = await mkdtemp(path.join(processTempDir('outpost-pool-'), `${name}-`))
      const kubeconfig = await writeKubeconfig(dir, { server: simulator.url, ca: pki.ca.cert, ...cert, inline: true })
      nodes.push({ name, pool, kubeconfig, cert })
    }
  }
  return {
    simulator,
    pki,
    nodes,
    namesOf: pool => nodes.filter(n => n.pool === pool).map(n => n.name),
    close: () => simulator.close(),
  }
}

/** A hub of a pool in this process, its pool port on a free loopback port. */
export function startPoolHub(node: PoolNode, overrides: Partial<HubConfig> = {}): Promise<Hub> {
  const config = hubConfig([], {
    nodeName: node.name,
    kubeconfig: node.kubeconfig,
    poolSharing: true,
    poolPort: 0,
    poolBindAddress: '127.0.0.1',
    ...poolTimings,
    ...overrides,
  })
  return startHub(config, { logger: quietLogger(), cacheBookmarkIntervalMs: 1_000 })
}

export interface PoolHubProcess {
  name: string
  proxyUrl: string
  adminUrl: string
  child: ChildProcess
  /** what it wrote to stderr lately (warnings and errors), for a failing test to show */
  logs(): string
  /** SIGKILL: no release of the Lease, no goodbye; resolves once it has exited */
  kill(): Promise<void>
  /** SIGTERM, as on a node's shutdown */
  stop(): Promise<void>
}

const entry = new URL('../../cmd/outpost.ts', import.meta.url).pathname
const duration = (ms: number) => `${ms}ms`

/**
 * A hub as `outpost` runs on a node, in a child process; resolves once its admin port answers. A
 * port freePort() found free may be taken by another test's process before the hub binds it: then
 * the hub is started again on other ports.
 */
export async function spawnPoolHub(node: PoolNode, extraArgs: string[] = []): Promise<PoolHubProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnOnce(node, extraArgs)
    } catch (error) {
      if (attempt >= 3 || !/EADDRINUSE/.test((error as Error).message)) throw error
    }
  }
}

async function spawnOnce(node: PoolNode, extraArgs: string[]): Promise<PoolHubProcess> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const args = [
    ...['--kubeconfig', node.kubeconfig, '--node-name', node.name, '--nodepool', node.pool],
    ...['--cache-dir', processTempDir('outpost-pool-cache-'), '--port', String(port), '--admin-port', String(adminPort), '--secure-port', '0'],
    ...['--log-level', 'warn', '--health-interval', '200ms', '--health-timeout', '5s', '--health-failures', '3', '--health-successes', '1'],
    ...['--pool-sharing=on', '--pool-port', '0', '--pool-bind-address', '127.0.0.1', '--pool-advertise-address', '127.0.0.1'],
    ...['--pool-lease-duration', duration(poolTimings.poolLeaseDurationMs), '--pool-renew-deadline', duration(poolTimings.poolRenewDeadlineMs)],
    ...['--pool-retry-period', duration(poolTimings.poolRetryPeriodMs)],
    ...extraArgs,
  ]
  const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', chunk => (stderr = (stderr + chunk).slice(-32_768)))
  const exited = new Promise(resolve => child.once('exit', resolve))
  const gone = () => child.exitCode !== null || child.signalCode !== null
  const signal = async (name: NodeJS.Signals) => {
    if (gone()) return
    child.kill(name)
    await exited
  }
  const adminUrl = `http://127.0.0.1:${adminPort}`
  try {
    await eventually(
      async () => {
        if (gone()) throw new Error(`hub ${node.name} exited before it listened`)
        return (await poolState(adminUrl).catch(() => undefined)) !== undefined
      },
      30_000,
      `hub ${node.name} to listen`,
    )
  } catch (error) {
    await signal('SIGKILL')
    // what it said last (EADDRINUSE, say) may still be on its way
    await Promise.race([new Promise(resolve => child.stderr!.once('close', resolve)), new Promise(resolve => setTimeout(resolve, 1_000))])
    throw new Error(`${(error as Error).message}; it said: ${stderr}`)
  }
  return {
    name: node.name,
    proxyUrl: `http://127.0.0.1:${port}`,
    adminUrl,
    child,
    logs: () => stderr,
    kill: () => signal('SIGKILL'),
    stop: () => signal('SIGTERM'),
  }
}

/** What `GET <admin>/debug/pool` answers. */
export async function poolState(adminUrl: string): Promise<any> {
  const res = await request(`${adminUrl}/debug/pool`)
  if (res.statusCode !== 200) {
    await res.body.dump()
    throw new Error(`/debug/pool answered ${res.statusCode}`)
  }
  return res.body.json()
}

/** The samples of a metric in `GET <admin>/metrics`: its labels as written (`{from="leader"}`, or ''), and value. */
export async function metricSamples(adminUrl: string, name: string): Promise<{ labels: string; value: number }[]> {
  const text = await (await request(`${adminUrl}/metrics`)).body.text()
  return text
    .split('\n')
    .filter(l => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    .map(l => ({ labels: l.slice(name.length, l.lastIndexOf(' ')), value: Number(l.slice(l.lastIndexOf(' ') + 1)) }))
}

/** One sample of a metric, by its exact labels; undefined when absent. */
export async function metric(adminUrl: string, name: string, labels = ''): Promise<number | undefined> {
  return (await metricSamples(adminUrl, name)).find(s => s.labels === labels)?.value
}

/**
 * Waits until the hubs (one pool's) have one leader, which the others follow, and returns its
 * identity; every hub is asked in each round, so a transient second leader is never mistaken for
 * the settled state.
 */
export async function settledLeader(adminUrls: string[], timeoutMs = 30_000): Promise<string> {
  let leader = ''
  await eventually(
    async () => {
      const states = await Promise.all(adminUrls.map(u => poolState(u).catch(() => undefined)))
      if (states.some(s => s === undefined)) return false
      const leading = states.filter(s => s.role === 'leader')
      if (leading.length !== 1) return false
      leader = leading[0].identity
      return states.every(s => s.role === 'leader' || (s.role === 'follower' && s.leader?.identity === leader))
    },
    timeoutMs,
    'one leader, followed by every other hub of the pool',
  )
  return leader
}

/** Which of the formats a logged request asked for: the topology source's metadata view, protobuf, or JSON. */
export function formatOf(headers: Record<string, string | string[] | undefined>): 'metadata' | 'protobuf' | 'json' {
  const accept = String(headers.accept ?? '')
  if (accept.includes('as=PartialObjectMetadata')) return 'metadata'
  return accept.startsWith('application/vnd.kubernetes.protobuf') ? 'protobuf' : 'json'
}

/** A local client's view of a resource, with what an informer's user relies on counted. */
export interface LocalClient {
  readonly name: string
  /** the objects it holds: `<namespace>/<name>` → resourceVersion */
  versions(): Map<string, string>
  /** lists made (the first included); a relist costs the WAN and the apiserver */
  lists(): number
  /** events out of order: a version not newer than one already seen for the object (a duplicate or a step back) */
  problems: string[]
  stop(): void
}

const keyOf = (o: any) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name}`

/** Notes an event about an object; a version not newer than one seen before is a duplicate or a step back. */
function tracker(problems: string[], who: string) {
  const latest = new Map<string, bigint>()
  return (type: string, o: any) => {
    const key = keyOf(o)
    const rv = BigInt(o.metadata?.resourceVersion ?? '0')
    const before = latest.get(key)
    if (before !== undefined && rv <= before) problems.push(`${who}: ${type} ${key} at ${rv}, after ${before}`)
    latest.set(key, rv)
  }
}

/** @kubernetes/client-node's informer of EndpointSlices (JSON), as kube-proxy or coredns through the hub. */
export async function sliceInformer(proxyUrl: string, userAgent: string, labelSelector?: string): Promise<LocalClient> {
  const kc = kubeConfigFor(proxyUrl, userAgent)
  const api = kc.makeApiClient(k8s.DiscoveryV1Api)
  let lists = 0
  const informer = k8s.makeInformer(
    kc,
    '/apis/discovery.k8s.io/v1/endpointslices',
    () => {
      lists++
      return api.listEndpointSliceForAllNamespaces(labelSelector ? { labelSelector } : {})
    },
    labelSelector,
  )
  const problems: string[] = []
  const note = tracker(problems, `${userAgent.split('/')[0]} json`)
  let listed = false
  informer.on('add', o => listed && note('add', o))
  informer.on('update', o => listed && note('update', o))
  informer.on('delete', o => listed && note('delete', o))
  let stopped = false
  // client-node stops at a watch error; client-go would watch again from where it was, so does this
  informer.on('error', () => {
    if (!stopped) setTimeout(() => !stopped && void informer.start().catch(() => {}), 200)
  })
  await informer.start()
  for (const o of informer.list()) note('list', o)
  listed = true
  return {
    name: `${userAgent.split('/')[0]} json`,
    versions: () => new Map(informer.list().map(o => [keyOf(o), o.metadata!.resourceVersion!])),
    lists: () => lists,
    problems,
    stop: () => {
      stopped = true
      void informer.stop()
    },
  }
}

/** A protobuf list, then watches resumed from the last version seen (a relist only after a 410), as client-go's reflector. */
export async function protobufReflector(proxyUrl: string, path: string, userAgent: string, labelSelector?: string): Promise<LocalClient> {
  const headers = { 'user-agent': userAgent, accept: 'application/vnd.kubernetes.protobuf, */*' }
  const selector: Record<string, string> = labelSelector ? { labelSelector } : {}
  const objects = new Map<string, string>()
  const problems: string[] = []
  const name = `${userAgent.split('/')[0]} protobuf`
  const note = tracker(problems, name)
  const controller = new AbortController()
  let lists = 0
  let rv = ''
  const list = async () => {
    lists++
    const res = await request(`${proxyUrl}${path}?${new URLSearchParams(selector)}`, { headers, signal: controller.signal })
    if (res.statusCode !== 200) throw new Error(`${name}: list answered ${res.statusCode}: ${await res.body.text()}`)
    const body = decodeBody(Buffer.from(await res.body.arrayBuffer())) as any
    objects.clear()
    for (const o of body.items ?? []) objects.set(keyOf(o), o.metadata.resourceVersion)
    rv = body.metadata.resourceVersion
  }
  const watch = async (): Promise<boolean> => {
    const query = new URLSearchParams({ ...selector, watch: 'true', allowWatchBookmarks: 'true', resourceVersion: rv })
    const res = await request(`${proxyUrl}${path}?${query}`, { headers, signal: controller.signal })
    if (res.statusCode === 410) return (await res.body.dump(), false)
    if (res.statusCode !== 200) throw new Error(`${name}: watch answered ${res.statusCode}`)
    for await (const frame of pipeline(res.body, new WatchFrameSplitter('protobuf'), () => {})) {
      const event = decodeWatchFrame(frame as Buffer) as { type: string; object: any }
      if (event.type === 'ERROR') {
        if (event.object.code === 410) return false
        problems.push(`${name}: ERROR ${JSON.stringify(event.object)}`)
        continue
      }
      if (event.type !== 'BOOKMARK') note(event.type, event.object)
      if (event.type === 'ADDED' || event.type === 'MODIFIED') objects.set(keyOf(event.object), event.object.metadata.resourceVersion)
      if (event.type === 'DELETED') objects.delete(keyOf(event.object))
      rv = event.object.metadata.resourceVersion
    }
    return true
  }
  await list()
  void (async () => {
    while (!controller.signal.aborted) {
      try {
        if (!(await watch())) await list()
      } catch {
        // cut: watch again from where it was, as client-go does after a short wait
      }
      await new Promise(resolve => setTimeout(resolve, 200))
    }
  })()
  return { name, versions: () => new Map(objects), lists: () => lists, problems, stop: () => controller.abort() }
}

/** The simulator's EndpointSlices (v1), as a local client should end up holding them. */
export function sliceVersions(simulator: ApiServerSimulator, namespace?: string): Map<string, string> {
  return new Map(
    simulator
      .list('discovery.k8s.io/v1', 'EndpointSlice')
      .filter(o => namespace === undefined || o.metadata.namespace === namespace)
      .map(o => [keyOf(o), o.metadata.resourceVersion]),
  )
}

/** Whether a client holds exactly `expected`, the same objects at the same versions. */
export function holds(client: LocalClient, expected: Map<string, string>, namespace?: string): boolean {
  const held = [...client.versions()].filter(([key]) => namespace === undefined || key.startsWith(`${namespace}/`))
  return held.length === expected.size && held.every(([key, rv]) => expected.get(key) === rv)
}
