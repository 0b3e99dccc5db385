// 14. The link to the cloud: the built hub over HTTP/2 (the default) beside the same hub with
// --http2=false (HTTP/1.1, a connection per watch, as before), against a TLS simulator in this
// process that speaks h2 as kube-apiserver does. Connections held for kubelet's per-object watches,
// how soon the hub is online after an outage and with how many handshakes, relayed GET throughput,
// and the bytes an idle node puts on the WAN.
import path from 'node:path'
import { request } from 'undici'
import { ApiServerSimulator } from '../simulator/index.ts'
import { createTestPki, writeKubeconfig } from '../helpers/pki.ts'
import { closedLoop, median } from './load.ts'
import { HubProcess, scratch, sleep, withCpu } from './processes.ts'
import { figureRow, ratioRow, type Row } from './report.ts'
import { node } from './objects.ts'

export interface LinkCounts {
  /** kubelet-style per-object watches, a few and many */
  watches: [number, number]
  outages: number
  getMs: number
  idleMs: number
}

const kubelet = { 'user-agent': 'kubelet/v1.32.0 (linux/amd64) kubernetes/abcdef' }
const userToken = 'bench-user-token-0123456789'
const modes = { h2: [] as string[], http1: ['--http2=false'] }
type Mode = keyof typeof modes

async function until(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

class LinkBench {
  private constructor(
    readonly sim: ApiServerSimulator,
    private readonly kubeconfig: string,
  ) {}

  static async start(): Promise<LinkBench> {
    const pki = await createTestPki()
    // kube-apiserver's BOOKMARKs come about once a minute
    const sim = await ApiServerSimulator.start({
      tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
      tokens: [userToken],
      bookmarkIntervalMs: 60_000,
      // no blackhole here: h2 read natively, as fast as the simulator can serve it
      http2: { holdable: false },
    })
    sim.create(node(0))
    for (let i = 0; i < 1_000; i++)
      sim.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `mounted-${i}`, namespace: 'default' }, data: { v: 'YQ==' } })
    sim.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'small', namespace: 'default' }, spec: { ports: [{ port: 80 }] } })
    const dir = path.join(scratch(), 'link-pki')
    const kubeconfig = await writeKubeconfig(dir, { server: sim.url, ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key, inline: true })
    return new LinkBench(sim, kubeconfig)
  }

  hub(entry: string, mode: Mode, extra: string[] = []): Promise<HubProcess> {
    return HubProcess.start(entry, { server: this.sim.url, extraArgs: ['--kubeconfig', this.kubeconfig, '--node-condition=false', ...modes[mode], ...extra] })
  }

  /** TCP connections at the apiserver while `count` per-object watches run through the hub. */
  async connectionsFor(hub: HubProcess, count: number): Promise<number> {
    const from = this.sim.currentResourceVersion()
    const bodies: { destroy(): void }[] = []
    try {
      for (let i = 0; i < count; i += 50) {
        const opened = await Promise.all(
          Array.from({ length: Math.min(50, count - i) }, async (_, j) => {
            const name = `mounted-${i + j}`
            const res = await request(`${hub.url}/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3D${name}&resourceVersion=${from}&watch=true`, {
              headers: kubelet,
            })
            if (res.statusCode !== 200) throw new Error(`watch ${name}: ${res.statusCode}`)
            return res.body
          }),
        )
        bodies.push(...opened)
      }
      await sleep(300)
      return this.sim.openConnections()
    } finally {
      for (const body of bodies) body.destroy()
    }
  }

  /** ms from the apiserver answering again to the hub's outpost_cloud_online, and the connections opened meanwhile. */
  async outage(hub: HubProcess): Promise<{ ms: number; opened: number; resumed: number }> {
    await this.sim.setFault('refuse')
    await until(async () => (await hub.metric('outpost_cloud_online')) === 0, 30_000, 'offline')
    await sleep(3_000) // the probing has backed off to its longest wait
    const opened = await hub.metric('outpost_upstream_connections_total')
    const resumed = await hub.metric('outpost_upstream_tls_resumed_total')
    await this.sim.setFault('none')
    const back = performance.now()
    await until(async () => (await hub.metric('outpost_cloud_online')) === 1, 30_000, 'online')
    const ms = performance.now() - back
    await sleep(2_000) // the shared caches watch again
    return {
      ms,
      opened: (await hub.metric('outpost_upstream_connections_total')) - opened,
      resumed: (await hub.metric('outpost_upstream_tls_resumed_total')) - resumed,
    }
  }

  /** Relayed GETs a second, and the hub's CPU ms per 1,000 of them (its own cost, whatever the server's). */
  async getRate(hub: HubProcess, ms: number): Promise<{ perSecond: number; cpuPerThousand: number }> {
    const headers = { 'user-agent': 'kubectl/v1.32.0', authorization: `Bearer ${userToken}` }
    const { result, cpuMs } = await withCpu([hub.pid], () => closedLoop(`${hub.url}/api/v1/namespaces/default/services/small`, headers, 20, ms))
    return { perSecond: result.perSecond, cpuPerThousand: (cpuMs[0] * 1000) / result.latencies.length }
  }

  /** Bytes both ways between an idle hub and the apiserver, per minute. */
  async idleBytes(hub: HubProcess, ms: number): Promise<number> {
    await sleep(2_000)
    const before = this.sim.bytesTransferred()
    await sleep(ms)
    return ((this.sim.bytesTransferred() - before) * 60_000) / ms
  }
}

export async function linkRows(entry: string, counts: LinkCounts, progress: (what: string) => void): Promise<Row[]> {
  const bench = await LinkBench.start()
  const figures: Record<
    Mode,
    { few: number; many: number; online: number; opened: number; resumed: number; get: { perSecond: number; cpuPerThousand: number }; idle: number }
  > = {} as never
  try {
    for (const mode of ['h2', 'http1'] as const) {
      progress(`link: ${mode}: ${counts.watches.join(' and ')} per-object watches`)
      let hub = await bench.hub(entry, mode)
      try {
        const few = await bench.connectionsFor(hub, counts.watches[0])
        const many = await bench.connectionsFor(hub, counts.watches[1])
        progress(`link: ${mode}: relayed GET`)
        const get = await bench.getRate(hub, counts.getMs)
        await hub.stop()
        // the shipped health defaults (a 5 s interval), not the bench's 200 ms: how soon the hub notices is the point
        hub = await bench.hub(entry, mode, ['--health-interval', '5s', '--health-failures', '3'])
        progress(`link: ${mode}: idle bytes for ${counts.idleMs / 1000} s`)
        const idle = await bench.idleBytes(hub, counts.idleMs)
        progress(`link: ${mode}: ${counts.outages} outages`)
        const outages = []
        for (let i = 0; i < counts.outages; i++) outages.push(await bench.outage(hub))
        figures[mode] = {
          few,
          many,
          get,
          idle,
          online: median(outages.map(o => o.ms)),
          opened: median(outages.map(o => o.opened)),
          resumed: median(outages.map(o => o.resumed)),
        }
      } finally {
        await hub.stop()
      }
    }
  } finally {
    await bench.sim.close()
  }
  const { h2, http1 } = figures
  const base = (id: string, name: string, unit: string, note?: string) => ({ id: `link.${id}`, name, unit, baselineLabel: 'HTTP/1.1', note })
  return [
    figureRow(
      base('connections', `TCP connections at the apiserver, ${counts.watches[0]} kubelet per-object watches`, 'conns'),
      http1.few,
      h2.few,
      'lower',
      '≤ 3',
      h2.few <= 3,
    ),
    figureRow(
      base('connections-many', `TCP connections at the apiserver, ${counts.watches[1]} per-object watches`, 'conns'),
      http1.many,
      h2.many,
      'lower',
      '≤ 3',
      h2.many <= 3,
    ),
    figureRow(
      base('online-after-outage', 'ms from the apiserver answering again to the hub online (health interval 5 s)', 'ms'),
      http1.online,
      h2.online,
      'lower',
      '≤ 2000 ms',
      h2.online <= 2_000,
    ),
    figureRow(
      base('connections-after-outage', 'connections opened to come back after an outage', 'conns', `TLS resumed: ${h2.resumed} (HTTP/1.1: ${http1.resumed})`),
      http1.opened,
      h2.opened,
      'lower',
      '≤ 1 per identity',
      h2.opened <= 1,
    ),
    ratioRow(
      base(
        'get.relayed',
        'GET one Service with a token, relayed, 20 connections',
        'req/s',
        "the simulator's h2 server (Node's compatibility API) costs it more than its HTTP/1.1 one",
      ),
      http1.get.perSecond,
      h2.get.perSecond,
      'higher',
      1,
    ),
    ratioRow(
      base(
        'get.relayed-cpu',
        "the hub's CPU per 1,000 relayed GETs",
        'ms',
        'the floor: a bare node:http2 client costs 1.4x undici HTTP/1.1 a GET (test/bench/floor-h2.mjs)',
      ),
      http1.get.cpuPerThousand,
      h2.get.cpuPerThousand,
      'lower',
    ),
    figureRow(
      base('idle-bytes', 'bytes on the WAN per idle minute (probes every 5 s, PINGs, BOOKMARKs each minute)', 'B/min', `${(h2.idle / 60).toFixed(0)} B/s`),
      http1.idle,
      h2.idle,
      'lower',
      '—',
      true,
    ),
  ]
}
