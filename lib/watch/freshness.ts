// What proves a watch cache fresh enough for a consistent read (a list, or a watch's initial state,
// with no resourceVersion), after kube-apiserver's consistent reads from cache (KEP-2340): the
// apiserver's current revision R, learned with one cheap consistent request (a `limit=1` list of the
// cache's scope, whose resourceVersion is etcd's revision when it was read), then the cache must
// reach R. Reads that arrive before a probe is sent (in the same turn of the event loop) share it;
// one that arrives while a probe is on the wire waits for the next (its write may have landed after the probe was answered), so at most
// one probe is in flight and one queued per cache, however many reads wait.
import type { Readable } from 'node:stream'
import { readAll } from '../upstream/read-all.ts'

const noop = () => {}

/** how long a probe may take before the reads waiting on it are relayed */
const probeTimeoutMs = 3_000
/** a limit=1 answer is one object: anything bigger is not a probe's answer */
const maxProbeBytes = 4 * 1024 * 1024

/** How a probe asks the apiserver: the answer to a GET of `path` (status, body). */
export type ProbeRequest = (path: string) => Promise<{ statusCode: number; body: Readable }>

/** The revision a limit=1 list answer names, or why there is none. */
export function listRevision(statusCode: number, body: Buffer): bigint {
  if (statusCode !== 200) throw new Error(`the apiserver answered ${statusCode}: ${body.toString('utf8', 0, 200)}`)
  const rv = (JSON.parse(body.toString('utf8')) as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion
  if (typeof rv !== 'string' || !/^\d{1,20}$/.test(rv)) throw new Error(`the apiserver's list named no resourceVersion (${String(rv)})`)
  return BigInt(rv)
}

export class RevisionProbe {
  /** the probe on the wire */
  private sent: Promise<bigint> | undefined
  /** the probe to send once the one on the wire is answered: reads that came meanwhile share it */
  private queued: Promise<bigint> | undefined
  /** the last probe's round trip, which sets how long a read waits for an event (ms) */
  roundTripMs = 0

  constructor(
    /** the cache's list path (its scope's selectors included) */
    private readonly listPath: string,
    private readonly request: ProbeRequest,
  ) {}

  /** etcd's revision at some moment after this call. */
  latest(): Promise<bigint> {
    if (this.queued) return this.queued
    // sent on the next turn of the event loop, or once the probe on the wire is answered: every read until then shares it
    const turn = this.sent ? this.sent.then(noop, noop) : new Promise<void>(resolve => setImmediate(resolve))
    this.queued = turn.then(() => {
      this.queued = undefined
      return this.send()
    })
    return this.queued
  }

  private send(): Promise<bigint> {
    const started = performance.now()
    const path = `${this.listPath}${this.listPath.includes('?') ? '&' : '?'}limit=1`
    const asked = (async () => {
      const res = await this.request(path)
      const body = await readAll(res.body, maxProbeBytes)
      return listRevision(res.statusCode, body)
    })()
    // an apiserver that does not answer in time proves nothing: the reads waiting on it are relayed
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer to the probe within ${probeTimeoutMs} ms`)), probeTimeoutMs)
    })
    const probe = Promise.race([asked, late]).finally(() => clearTimeout(timer))
    asked.catch(noop)
    this.sent = probe
    const done = () => {
      if (this.sent === probe) this.sent = undefined
      this.roundTripMs = performance.now() - started
    }
    probe.then(done, done)
    return probe
  }
}

/**
 * How long a consistent read waits for the cache to reach the probe's revision before it is relayed:
 * the event of a write made just before the probe comes down the cache's watch about as fast as the
 * probe's answer came back; a revision moved by another resource is never reached, and then waiting
 * longer only delays the relay.
 */
export function proofWaitMs(roundTripMs: number): number {
  return Math.min(250, Math.max(20, Math.ceil(2 * roundTripMs)))
}

/** clients (User-Agent products) a cache keeps a floor for; past it the least recently raised is forgotten */
const maxFloors = 64

/**
 * What each client of a cache was last given by the apiserver when its consistent read was relayed:
 * its later `resourceVersion=0` reads ("any state") must not be older, so they wait for the cache to
 * reach it (bounded), else are relayed too. Clients are told apart by their User-Agent product, as
 * the hub knows them; a floor goes once the cache reaches it.
 */
export class ReadFloors {
  private readonly floors = new Map<string, bigint>()

  raise(client: string, revision: bigint): void {
    const held = this.floors.get(client)
    if (held !== undefined && held >= revision) return
    this.floors.delete(client)
    this.floors.set(client, revision)
    if (this.floors.size > maxFloors) this.floors.delete(this.floors.keys().next().value!)
  }

  /** The version `client`'s reads must reach, while the cache (at `reached`) is below it. */
  floorFor(client: string, reached: bigint): bigint | undefined {
    const floor = this.floors.get(client)
    if (floor === undefined) return undefined
    if (reached < floor) return floor
    this.floors.delete(client)
    return undefined
  }

  get size(): number {
    return this.floors.size
  }
}
