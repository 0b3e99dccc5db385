// The clients of the attack rows (test/bench/rows-attack.ts): raw sockets that send a request and
// never read the answer, one-GET keep-alive sockets, a closed loop that runs until told to stop,
// a probe of the hub's heap after a full GC through its inspector; and what each measure does to
// its hub: start it fresh, warm its caches, read its memory and fds, time a slice write to a watch.
import { fork } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync } from 'node:fs'
import net from 'node:net'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import WebSocket from 'ws'
import type { Context } from './context.ts'
import { clientHeaders, clock, openWatch, percentile, userAgents } from './load.ts'
import type { OpenWatch } from './load.ts'
import * as objects from './objects.ts'
import { HubProcess, sleep } from './processes.ts'
import type { HubOptions } from './processes.ts'

const MiB = 1024 * 1024

/** what the attack rows ask for */
export const slices = '/apis/discovery.k8s.io/v1/endpointslices'
export const kubeProxySelector = `labelSelector=${encodeURIComponent(objects.kubeProxySelector)}`
export const watchQuery = 'allowWatchBookmarks=true&resourceVersion=0&timeoutSeconds=540&watch=true'
export const nodePath = `/api/v1/nodes/${objects.hubNode}?resourceVersion=0`

/** The hub's open file descriptors (sockets, files, pipes): /proc/<pid>/fd. */
export const fdCount = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length

function send(port: number, path: string, headers: Record<string, string>): net.Socket {
  const socket = net.connect(port, '127.0.0.1')
  const lines = Object.entries({ host: `127.0.0.1:${port}`, ...headers }).map(([k, v]) => `${k}: ${v}`)
  socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`)
  return socket
}

export interface Unread {
  socket: net.Socket
  /** the answer's status code, from its first chunk (0: none came, or the socket failed) */
  status: Promise<number>
}

/**
 * A client that sends its request and never reads the answer: its first chunk is taken for the
 * status line, then the socket is paused, so Node stops reading it and the kernel's receive buffer
 * (its initial size: never read from, it is not grown) closes the window on the hub.
 */
export function unreadRequest(port: number, path: string, headers: Record<string, string>): Unread {
  const socket = send(port, path, headers)
  socket.on('error', () => {}) // the hub may end it: that is what is measured
  const status = new Promise<number>(resolve => {
    socket.once('data', (chunk: Buffer) => {
      socket.pause()
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1', 0, 16))?.[1] ?? 0))
    })
    socket.once('close', () => resolve(0))
  })
  return { socket, status }
}

/** One GET on a socket of its own, answered whole; the socket is left open (keep-alive). */
export function getOnSocket(port: number, path: string, headers: Record<string, string>, timeoutMs = 30_000): Promise<{ socket: net.Socket; status: number }> {
  const socket = send(port, path, headers)
  let data = Buffer.alloc(0)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`GET ${path}: no whole answer within ${timeoutMs} ms`))), timeoutMs)
    const fail = (error: Error) => (clearTimeout(timer), reject(error))
    socket.on('error', fail)
    socket.on('close', () => fail(new Error(`GET ${path}: the hub closed the connection`)))
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk])
      const end = data.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = data.toString('latin1', 0, end)
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)
      const whole = length ? data.length >= end + 4 + Number(length[1]) : data.subarray(-5).toString() === '0\r\n\r\n'
      if (!whole) return
      clearTimeout(timer)
      socket.removeAllListeners('close')
      socket.removeAllListeners('data')
      resolve({ socket, status: Number(head.slice(9, 12)) })
    })
  })
}

/**
 * GETs one after another on one keep-alive connection, from a process of its own
 * (get-probe.mjs), until `stop()` and at least `minMs` have passed: each latency (ms).
 */
export async function loopUntil(url: string, headers: Record<string, string>, stop: () => boolean, minMs: number): Promise<number[]> {
  const probe = fork(fileURLToPath(new URL('./get-probe.mjs', import.meta.url)), [url, JSON.stringify(headers)], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  const latencies = new Promise<number[]>((resolve, reject) => {
    probe.once('message', message => resolve(message as number[]))
    probe.once('exit', code => reject(new Error(`the GET probe exited with ${code} before it answered`)))
  })
  latencies.catch(() => {})
  await once(probe, 'spawn')
  const until = performance.now() + minMs
  let exited = false
  probe.once('exit', () => (exited = true))
  while (!exited && (!stop() || performance.now() < until)) await sleep(10)
  // a probe that died (the hub gone) is reported by `latencies`, not by a send on a closed channel, which would end the bench unreported
  if (probe.connected) probe.send('stop', () => {})
  return latencies
}

export interface Kept {
  heap: number
  external: number
  total: number
}

/**
 * The hub's memory after a full GC (V8 heap used + external memory: Buffers), through its inspector,
 * turned on by SIGUSR1 as `node --inspect` would (127.0.0.1:9229); undefined when it cannot be.
 */
export class HeapProbe {
  private nextId = 1

  private constructor(private readonly ws: WebSocket) {}

  static async open(hub: HubProcess): Promise<HeapProbe | undefined> {
    process.kill(hub.pid, 'SIGUSR1')
    const deadline = performance.now() + 5_000
    let url: string | undefined
    while (!url && performance.now() < deadline) {
      url = /Debugger listening on (ws:\/\/\S+)/.exec(hub.log)?.[1]
      if (/Starting inspector on .* failed/.test(hub.log)) return undefined
      if (!url) await sleep(50)
    }
    if (!url) return undefined
    const ws = new WebSocket(url)
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    return new HeapProbe(ws)
  }

  private call(method: string, params: object = {}): Promise<any> {
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      const onMessage = (data: WebSocket.RawData) => {
        const message = JSON.parse(data.toString()) as { id?: number; result?: any; error?: { message: string } }
        if (message.id !== id) return
        this.ws.off('message', onMessage)
        if (message.error) reject(new Error(`inspector ${method}: ${message.error.message}`))
        else resolve(message.result)
      }
      this.ws.on('message', onMessage)
      this.ws.send(JSON.stringify({ id, method, params }))
    })
  }

  /** MiB the hub's heap and Buffers hold after two full GCs. */
  async retained(): Promise<Kept> {
    await this.call('HeapProfiler.collectGarbage')
    await this.call('HeapProfiler.collectGarbage')
    const result = await this.call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })
    const usage = JSON.parse(result.result.value as string) as NodeJS.MemoryUsage
    return { heap: usage.heapUsed / MiB, external: usage.external / MiB, total: (usage.heapUsed + usage.external) / MiB }
  }

  close(): void {
    this.ws.close()
  }
}

// ---- the hub under attack ----------------------------------------------------------------------

export async function withHub<T>(ctx: Context, options: Partial<HubOptions>, use: (hub: HubProcess) => Promise<T>): Promise<T> {
  const hub = await HubProcess.start(ctx.hubEntry, { server: ctx.sim.url, ...options })
  try {
    return await use(hub)
  } finally {
    await hub.stop()
  }
}

/** Throws, with the hub's last words, if it has exited (an out-of-memory death is a finding, not a bench bug). */
export function alive(hub: HubProcess): void {
  if (hub.child.exitCode === null && hub.child.signalCode === null) return
  const last = hub.log.trim().split('\n').slice(-3).join(' | ').slice(0, 400)
  throw new Error(`the hub exited (${hub.child.exitCode ?? hub.child.signalCode}): ${last}`)
}

export function state(hub: HubProcess): { rss: number; hwm: number; fds: number } {
  alive(hub)
  return { ...hub.memory(), fds: fdCount(hub.pid) }
}

/** The hub's RSS before and after a full GC (when its heap can be read), and what its heap and Buffers keep then. */
export async function snapshot(hub: HubProcess, probe: HeapProbe | undefined): Promise<ReturnType<typeof state> & { rssBeforeGc: number; kept?: Kept }> {
  const rssBeforeGc = state(hub).rss
  const kept = await probe?.retained()
  return { ...state(hub), rssBeforeGc, kept }
}

/** Requests `path` until the hub answers 200 (429 while a shared cache's first list is not in). */
export async function until200(hub: HubProcess, path: string, headers: Record<string, string>, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const res = await request(hub.url + path, { headers })
    await res.body.dump()
    if (res.statusCode === 200) return
    if (performance.now() > deadline) throw new Error(`${path}: ${res.statusCode} after ${timeoutMs} ms`)
    await sleep(100)
  }
}

/** Until kubelet's GET of its Node is answered from the hub's nodes cache (the first ones go to the apiserver). */
export async function warmNodeGet(hub: HubProcess, headers: Record<string, string>): Promise<void> {
  const fromCache = async () =>
    (await hub.metrics())
      .split('\n')
      .filter(l => l.startsWith('outpost_served_from_cache_total{') && l.includes('component="kubelet"') && l.includes('verb="get"'))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
  const deadline = performance.now() + 30_000
  while ((await until200(hub, nodePath, headers), await fromCache()) === 0) {
    if (performance.now() > deadline) throw new Error("the hub never answered kubelet's GET of its Node from its cache")
    await sleep(100)
  }
}

export const p99 = (latencies: number[]): number => percentile(latencies, 99)

/**
 * Times `probes` writes of slice 0 in the simulator through a kube-proxy watch (JSON) of the hub:
 * ms from the write's request to the watch's frame. The watch is opened (and has its initial
 * events) by `kubeProxyEventWatch`.
 */
export async function eventDelays(ctx: Context, watch: EventWatch, probes: number): Promise<number[]> {
  const delays: number[] = []
  for (let i = 0; i < probes; i++) {
    const arrived = watch.next()
    const written = clock()
    await ctx.sim.call('modifySlices', { count: 1 })
    const at = await Promise.race([arrived, sleep(120_000).then(() => NaN)])
    if (Number.isNaN(at)) throw new Error('a kube-proxy watch did not see a slice change within 120 s')
    delays.push(at - written)
    await sleep(200)
  }
  return delays
}

export interface EventWatch {
  watch: OpenWatch
  /** resolves with clock() when the next MODIFIED of slice 0 arrives */
  next(): Promise<number>
}

export async function kubeProxyEventWatch(ctx: Context, hub: HubProcess): Promise<EventWatch> {
  const target = Buffer.from(`"name":"${objects.sliceName(0)}"`)
  let waiter: ((at: number) => void) | undefined
  const watch = await openWatch(`${hub.url}${slices}?${kubeProxySelector}&${watchQuery}`, clientHeaders(userAgents.kubeProxy, 'json'), (frame, at) => {
    if (waiter && frame.includes('"MODIFIED"') && frame.includes(target)) {
      waiter(at)
      waiter = undefined
    }
  })
  await watch.waitFor(ctx.counts.slices, 120_000)
  return { watch, next: () => new Promise<number>(resolve => (waiter = resolve)) }
}
