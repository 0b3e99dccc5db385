// The load generator's clients (the bench's own process): keep-alive GETs, timed lists, watch
// streams counted frame by frame (JSON lines or length-prefixed protobuf) or read event by event.
import { Agent, request } from 'undici'
import type { Dispatcher } from 'undici'

export const userAgents = {
  kubeProxy: 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/2cc6ddc',
  kubelet: 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89',
  kubectl: 'kubectl/v1.32.0',
}
export type Format = 'json' | 'protobuf'
export const protobufType = 'application/vnd.kubernetes.protobuf'

/** What each client sends: kube-proxy and kubelet ask for protobuf (and gzip), JSON clients for JSON. */
export function clientHeaders(userAgent: string, format: Format): Record<string, string> {
  return format === 'json'
    ? { 'user-agent': userAgent, accept: 'application/json' }
    : { 'user-agent': userAgent, accept: `${protobufType}, */*`, 'accept-encoding': 'gzip' }
}

/**
 * kubectl with a token of its own: the hub relays it (someone else's identity is neither cached nor
 * answered from the hub's caches or shared watches), so it is the pass-through baseline. The
 * simulator takes any token.
 */
export function passThroughHeaders(format: Format): Record<string, string> {
  return { ...clientHeaders(userAgents.kubectl, format), authorization: 'Bearer bench-pass-through' }
}

/** a wall-clock time in ms comparable across processes */
export const clock = (): number => performance.timeOrigin + performance.now()

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
}

export const median = (values: number[]): number => percentile(values, 50)

async function getOnce(url: string, headers: Record<string, string>, dispatcher: Dispatcher): Promise<void> {
  const res = await request(url, { headers, dispatcher })
  if (res.statusCode !== 200) throw new Error(`GET ${url}: ${res.statusCode} ${await res.body.text()}`)
  await res.body.dump()
}

/**
 * Requests per second: `connections` keep-alive connections, each sending its next request as
 * soon as the last is answered, for `durationMs`; and every request's latency (ms).
 */
export async function closedLoop(
  url: string,
  headers: Record<string, string>,
  connections: number,
  durationMs: number,
  /** an HTTPS server with a certificate of its own (a real apiserver's): not verified */
  insecure = false,
): Promise<{ perSecond: number; latencies: number[] }> {
  const agent = new Agent({ connections, pipelining: 1, keepAliveTimeout: 60_000, ...(insecure ? { connect: { rejectUnauthorized: false } } : {}) })
  try {
    await Promise.all(Array.from({ length: connections }, () => getOnce(url, headers, agent))) // every connection open
    const latencies: number[] = []
    const start = performance.now()
    const deadline = start + durationMs
    await Promise.all(
      Array.from({ length: connections }, async () => {
        for (let sent = performance.now(); sent < deadline; sent = performance.now()) {
          await getOnce(url, headers, agent)
          latencies.push(performance.now() - sent)
        }
      }),
    )
    return { perSecond: latencies.length / ((performance.now() - start) / 1000), latencies }
  } finally {
    await agent.close()
  }
}

/** Latencies (ms) of `count` requests sent one at a time over a keep-alive connection. */
export async function sequentialLatencies(url: string, headers: Record<string, string>, count: number): Promise<number[]> {
  const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 })
  try {
    await getOnce(url, headers, agent)
    const times: number[] = []
    for (let i = 0; i < count; i++) {
      const start = performance.now()
      await getOnce(url, headers, agent)
      times.push(performance.now() - start)
    }
    return times
  } finally {
    await agent.close()
  }
}

export interface Listed {
  ms: number
  bytes: number
  contentType: string
  encoding: string
}

/** One list, timed from the request to its last byte (the body is read, not decoded). */
export async function timedList(url: string, headers: Record<string, string>, dispatcher?: Dispatcher): Promise<Listed> {
  const start = performance.now()
  const res = await request(url, { headers, dispatcher })
  const body = await res.body.arrayBuffer()
  const ms = performance.now() - start
  if (res.statusCode !== 200) throw new Error(`LIST ${url}: ${res.statusCode} ${Buffer.from(body).toString().slice(0, 500)}`)
  return { ms, bytes: body.byteLength, contentType: String(res.headers['content-type'] ?? ''), encoding: String(res.headers['content-encoding'] ?? 'identity') }
}

/** Splits a watch body into frames: JSON lines, or protobuf frames behind a 4-byte big-endian length. */
class FrameCounter {
  count = 0
  private pending = Buffer.alloc(0)
  /** bytes of the current protobuf frame still to skip, when not collecting frames */
  private skip = 0

  constructor(
    private readonly framing: Format,
    private readonly onFrame?: (frame: Buffer, arrivedAt: number) => void,
  ) {}

  push(chunk: Buffer, arrivedAt: number): void {
    if (this.framing === 'json') return this.pushJson(chunk, arrivedAt)
    if (!this.onFrame && this.skip > 0) {
      const skipped = Math.min(this.skip, chunk.length)
      this.skip -= skipped
      chunk = chunk.subarray(skipped)
      if (this.skip > 0) return
    }
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk
    for (;;) {
      if (data.length < 4) break
      const length = data.readUInt32BE(0)
      if (!this.onFrame && data.length < 4 + length) {
        this.count++
        this.skip = 4 + length - data.length
        data = Buffer.alloc(0)
        break
      }
      if (data.length < 4 + length) break
      this.count++
      this.onFrame?.(data.subarray(4, 4 + length), arrivedAt)
      data = data.subarray(4 + length)
    }
    this.pending = Buffer.from(data)
  }

  private pushJson(chunk: Buffer, arrivedAt: number): void {
    if (!this.onFrame) {
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) this.count++
      return
    }
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk
    for (let i = data.indexOf(10); i !== -1; i = data.indexOf(10)) {
      this.count++
      this.onFrame(data.subarray(0, i), arrivedAt)
      data = data.subarray(i + 1)
    }
    this.pending = Buffer.from(data)
  }
}

export interface OpenWatch {
  contentType: string
  /** frames received so far */
  readonly count: number
  /** resolves with performance.now() when `n` frames have arrived; rejects after `timeoutMs` */
  waitFor(n: number, timeoutMs: number): Promise<number>
  close(): void
}

/**
 * A watch, open once its response headers have arrived. Frames are counted without being copied
 * unless `onFrame` wants each one (`arrivedAt` is clock() when its last chunk arrived).
 */
export async function openWatch(
  url: string,
  headers: Record<string, string>,
  onFrame?: (frame: Buffer, arrivedAt: number) => void,
  dispatcher?: Dispatcher,
): Promise<OpenWatch> {
  const res = await request(url, { headers, dispatcher })
  if (res.statusCode !== 200) throw new Error(`WATCH ${url}: ${res.statusCode} ${(await res.body.text()).slice(0, 500)}`)
  const contentType = String(res.headers['content-type'] ?? '')
  const counter = new FrameCounter(contentType.startsWith(protobufType) ? 'protobuf' : 'json', onFrame)
  let waiter: { n: number; resolve: (t: number) => void; reject: (why: string) => void } | undefined
  let ended: Error | undefined
  const reading = (async () => {
    for await (const chunk of res.body) {
      counter.push(chunk as Buffer, clock())
      if (waiter && counter.count >= waiter.n) {
        waiter.resolve(performance.now())
        waiter = undefined
      }
    }
  })()
  reading.then(
    () => (ended = new Error('the watch ended')),
    (error: Error) => (ended = error),
  )
  return {
    contentType,
    get count() {
      return counter.count
    },
    waitFor(n, timeoutMs) {
      if (counter.count >= n) return Promise.resolve(performance.now())
      return new Promise<number>((resolve, reject) => {
        const fail = (why: string) => reject(new Error(`${counter.count} of ${n} events ${why}${ended ? ` (${ended.message})` : ''}`))
        const timer = setTimeout(() => fail(`after ${timeoutMs} ms`), timeoutMs)
        waiter = { n, resolve: t => (clearTimeout(timer), resolve(t)), reject: why => (clearTimeout(timer), fail(why)) }
      })
    },
    close() {
      waiter?.reject('when the watch was closed')
      waiter = undefined
      res.body.destroy()
    },
  }
}

/** One closed-loop run, with the CPU ms it cost the simulator, the proxy under test and the load generator. */
export interface Loop {
  perSecond: number
  latencies: number[]
  cpuMs: number[]
}

/** The median rate of several runs. */
export const loopRate = (runs: Loop[]): number => median(runs.map(l => l.perSecond))

/** The p99 latency over every request of several runs, ms, as text. */
export const loopP99 = (runs: Loop[]): string =>
  percentile(
    runs.flatMap(l => l.latencies),
    99,
  ).toFixed(2)

/** CPU µs per request of the simulator, the proxy and the load generator: `a / b / c`. */
export function loopCpu(runs: Loop[]): string {
  const requests = runs.reduce((n, l) => n + l.latencies.length, 0)
  return [0, 1, 2].map(i => ((runs.reduce((t, l) => t + l.cpuMs[i], 0) * 1000) / requests).toFixed(0)).join(' / ')
}
