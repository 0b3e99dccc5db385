// The node's own pods as kubelet last wrote their status while the cloud was away: what the
// localendpoints filter shows their endpoints as. It is learned from kubelet's status writes (which
// are still refused: kubelet retries until the apiserver takes them, so the cloud learns the truth
// from kubelet, never from the hub), kept on disk before a write is answered, and dropped per pod
// once the cloud's endpoints have caught up or the TTL after the cloud's return has run out
// (verdict.ts). It never leaves the node.
//
// Versions: an offline watch that tells of a changed endpoint needs a resourceVersion its client
// does not hold yet (client-go's informer treats a relisted object at the version it holds as a
// sync, which reaches no handler; client-node's drops such a MODIFIED). Offline there is no newer
// real one, so the overlay mints one above every real version of the endpoint resources the hub
// holds, and remembers the range exactly (minted.ts says what a read carrying one gets): no real
// version is ever changed, and a minted one never goes to the apiserver.
import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import type { LocalEndpointsInput, LocalPod } from '../../filters/local-pod.ts'
import { overlayVerdict } from './verdict.ts'
import { mayNameOverlaidPod } from '../../filters/localendpoints.ts'
import type { Observation } from './verdict.ts'
import type { MintedRange } from './minted.ts'

export const overlayStateName = 'pod-overlay'
/** how long after the cloud's return a minted version is still told from a real one */
const mintedKeptMs = 60 * 60 * 1000
/** how far above the highest real version minted ones start: etcd does not write 2^40 revisions in the hour a range is kept */
const mintedGap = 2n ** 40n
/** at most this many pods are overlaid (a node runs at most a few hundred) */
export const maxOverlaidPods = 1024

interface Entry {
  pod: LocalPod
  /** the pod's IPs as the cloud last said them */
  was: readonly string[]
  since: number
  updated: number
  /** per family, what the cloud's endpoints named since the cloud came back */
  observed: Map<string, Observation>
}

interface Minted {
  /** the highest real version of the endpoint resources when the range was minted, plus mintedGap */
  over: bigint
  top: bigint
  /** when the cloud came back after the range was minted (ms); undefined while offline */
  until?: number
}

interface StateFile {
  pods: { pod: LocalPod; was: string[]; since: number; updated: number }[]
  minted?: { over: string; top: string; until?: number }
}

export interface OverlayState {
  readState(name: string): Promise<unknown>
  writeState(name: string, value: unknown): Promise<void>
}

export interface PodOverlayOptions {
  nodeName: string
  /** where the overlay is kept; undefined: the cache dir is unusable, nothing is learned */
  state: OverlayState | undefined
  log: Logger
  /** longest an entry outlives the cloud's return */
  ttlMs: number
  /** how often entries are checked against the cloud while it is up */
  checkMs?: number
  now?: () => number
}

/** One pod for /debug/cache. */
export interface OverlaidPod {
  pod: string
  uid: string
  was: readonly string[]
  now: readonly string[]
  ready: boolean
  gone: boolean
  since: string
  updated: string
  cloud: Record<string, Observation>
}

const samePod = (a: LocalPod, b: LocalPod): boolean =>
  a.uid === b.uid &&
  a.ready === b.ready &&
  a.serving === b.serving &&
  a.gone === b.gone &&
  a.terminating === b.terminating &&
  a.ips.length === b.ips.length &&
  a.ips.every((ip, i) => ip === b.ips[i])

const familyOf = (ip: string): string => (ip.includes(':') ? 'IPv6' : 'IPv4')

/** Emits 'beforechange' just before, and 'change' just after, each change of what the filter reads. */
export class PodOverlay extends EventEmitter {
  private readonly entries = new Map<string, Entry>()
  private minted: Minted | undefined
  /** the hub says which at start (setOnline): an overlay read back while the cloud is up starts its TTL then */
  private online = false
  private cloudBackAt: number | undefined
  private timer: NodeJS.Timeout | undefined
  private current: LocalEndpointsInput
  /** saves run one at a time; a save asked for meanwhile covers every change before it */
  private saving: Promise<void> = Promise.resolve()
  private saveQueued: Promise<void> | undefined
  /** a change not yet known to be on disk */
  private unsaved = false
  private readonly now: () => number

  constructor(private readonly options: PodOverlayOptions) {
    super()
    this.now = options.now ?? Date.now
    this.current = this.makeInput()
  }

  get size(): number {
    return this.entries.size
  }

  /** Reads what a previous run kept (a reboot with the cloud away is the case this is for). */
  async load(): Promise<void> {
    const saved = (await this.options.state?.readState(overlayStateName)) as StateFile | undefined
    if (!saved || !Array.isArray(saved.pods)) return
    for (const p of saved.pods.slice(0, maxOverlaidPods)) {
      if (!p?.pod || typeof p.pod.namespace !== 'string' || typeof p.pod.name !== 'string' || !Array.isArray(p.pod.ips)) continue
      this.entries.set(`${p.pod.namespace}/${p.pod.name}`, { pod: p.pod, was: p.was ?? [], since: p.since, updated: p.updated, observed: new Map() })
    }
    if (saved.minted) {
      try {
        this.minted = { over: BigInt(saved.minted.over), top: BigInt(saved.minted.top), until: saved.minted.until }
      } catch {
        this.minted = undefined
      }
    }
    if (this.entries.size > 0) {
      this.current = this.makeInput()
      this.options.log.info({ pods: this.entries.size }, 'pod overlay: kept from before the restart')
    }
  }

  /** What the localendpoints filter reads now (a new object after each change). */
  input(): LocalEndpointsInput {
    return this.current
  }

  private makeInput(): LocalEndpointsInput {
    const pods = new Map<string, LocalPod>()
    for (const [key, entry] of this.entries) pods.set(key, entry.pod)
    return { nodeName: this.options.nodeName, pods, observed: (pod, addressType, addresses) => this.observe(pod, addressType, addresses) }
  }

  /**
   * kubelet wrote this status for its pod while the cloud was away: its endpoints show it from now
   * on. Resolves once it is on disk (a crash after that loses nothing kubelet was answered for).
   */
  async learn(pod: LocalPod, cloudIps: readonly string[]): Promise<void> {
    const key = `${pod.namespace}/${pod.name}`
    const entry = this.entries.get(key)
    // kubelet retries each write every few seconds: the same status again costs no disk write
    if (entry && samePod(entry.pod, pod)) return this.unsaved ? this.save() : Promise.resolve()
    if (!entry && this.entries.size >= maxOverlaidPods) throw new Error(`the overlay holds ${maxOverlaidPods} pods already`)
    const at = this.now()
    this.change([pod], () => {
      this.entries.set(key, { pod, was: entry?.was ?? cloudIps, since: entry?.since ?? at, updated: at, observed: new Map() })
      if (!this.online) this.mintNext()
    })
    return this.save()
  }

  /** The cloud is up or away: while up, entries are checked against it; while away they stay. */
  setOnline(online: boolean): void {
    if (online === this.online) return
    this.online = online
    if (online) {
      this.cloudBackAt = this.now()
      if (this.minted && this.minted.until === undefined) this.minted.until = this.cloudBackAt + mintedKeptMs
      this.arm()
    } else {
      this.cloudBackAt = undefined
      if (this.minted) this.minted.until = undefined
      for (const entry of this.entries.values()) entry.observed.clear()
      this.disarm()
    }
  }

  /** The highest real version the hub holds of the endpoint resources: minted versions go above it. */
  private realVersion: () => bigint = () => 0n

  setRealVersion(read: () => bigint): void {
    this.realVersion = read
  }

  /** The newest minted version, if the overlay minted one in this outage. */
  mintedVersion(): bigint | undefined {
    return this.minted && this.minted.until === undefined ? this.minted.top : undefined
  }

  private mintNext(): void {
    const real = this.realVersion()
    // far above the highest real version: etcd's revision moves on while the cloud is away, and a real
    // version equal to a minted one of the same object would read as one the informer already holds
    if (!this.minted || this.minted.until !== undefined || real >= this.minted.over) this.minted = { over: real + mintedGap, top: real + mintedGap + 1n }
    else this.minted.top++
  }

  /** The versions minted, while a client may still hold one (until an hour after the cloud's return). */
  mintedRange(): MintedRange | undefined {
    const minted = this.minted
    if (minted?.until !== undefined && this.now() > minted.until) this.minted = undefined
    return this.minted && { over: this.minted.over, top: this.minted.top, offline: this.minted.until === undefined }
  }

  private observe(pod: LocalPod, addressType: string, addresses: readonly string[]): void {
    if (!this.online || this.cloudBackAt === undefined) return
    const entry = this.entries.get(`${pod.namespace}/${pod.name}`)
    if (!entry || entry.pod !== pod || addressType === 'FQDN') return
    const now = pod.ips.find(ip => familyOf(ip) === addressType)
    entry.observed.set(addressType, now !== undefined && addresses.length === 1 && addresses[0] === now ? 'current' : 'stale')
  }

  private arm(): void {
    if (this.timer || this.entries.size === 0) return
    this.timer = setInterval(() => this.check(), this.options.checkMs ?? 1_000)
    this.timer.unref()
  }

  private disarm(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }

  /** Entries the cloud has caught up with, or that outlived the TTL, go. */
  check(): void {
    const drop: [string, string][] = []
    for (const [key, entry] of this.entries) {
      const verdict = overlayVerdict({
        online: this.online,
        cloudBackAt: this.cloudBackAt,
        now: this.now(),
        ttlMs: this.options.ttlMs,
        observed: entry.observed,
      })
      if (!verdict.keep) drop.push([key, verdict.why])
    }
    if (drop.length > 0) {
      this.change(
        drop.map(([key]) => this.entries.get(key)!.pod),
        () => {
          for (const [key] of drop) this.entries.delete(key)
        },
      )
      for (const [key, why] of drop)
        this.options.log.info({ pod: key, why }, `pod overlay: ${key} follows the cloud again (${why === 'ttl' ? 'TTL ran out' : 'the cloud caught up'})`)
      void this.save().catch(() => {})
    }
    if (this.entries.size === 0) this.disarm()
  }

  /**
   * Which objects the last change can touch: those whose bytes (JSON or protobuf) name one of the
   * pods it changed (a conservative test: an endpoint names its pod in its targetRef).
   */
  affected(): (body: Buffer) => boolean {
    const changed = this.lastChanged
    return body => mayNameOverlaidPod(body, changed)
  }

  private lastChanged: ReadonlyMap<string, LocalPod> = new Map()

  /** `pods`: the pods the change is about (learned, or let go), whose endpoints may show differently after it. */
  private change(pods: readonly LocalPod[], apply: () => void): void {
    this.emit('beforechange')
    apply()
    this.lastChanged = new Map(pods.map(pod => [`${pod.namespace}/${pod.name}`, pod]))
    this.current = this.makeInput()
    this.unsaved = true
    this.emit('change')
    if (this.online) this.arm()
  }

  /** Saves the whole overlay (it is small); resolves once a save made after this call is durable. */
  private save(): Promise<void> {
    const state = this.options.state
    if (!state) return Promise.resolve()
    if (this.saveQueued) return this.saveQueued
    const queued = this.saving.then(
      () => {},
      () => {},
    )
    this.saveQueued = queued.then(async () => {
      this.saveQueued = undefined
      this.unsaved = false
      try {
        await state.writeState(overlayStateName, this.snapshot())
      } catch (error) {
        this.unsaved = true
        throw error
      }
    })
    this.saving = this.saveQueued
    return this.saveQueued
  }

  private snapshot(): StateFile {
    const minted = this.minted ? { over: this.minted.over.toString(), top: this.minted.top.toString(), until: this.minted.until } : undefined
    return {
      pods: [...this.entries.values()].map(({ pod, was, since, updated }) => ({ pod, was: [...was], since, updated })),
      ...(minted ? { minted } : {}),
    }
  }

  describe(): { pods: OverlaidPod[]; mintedVersions?: { over: string; top: string } } {
    const iso = (ms: number) => new Date(ms).toISOString()
    return {
      pods: [...this.entries].map(([key, e]) => ({
        pod: key,
        uid: e.pod.uid,
        was: e.was,
        now: e.pod.ips,
        ready: e.pod.ready,
        gone: e.pod.gone,
        since: iso(e.since),
        updated: iso(e.updated),
        cloud: Object.fromEntries(e.observed),
      })),
      ...(this.minted ? { mintedVersions: { over: this.minted.over.toString(), top: this.minted.top.toString() } } : {}),
    }
  }

  close(): void {
    this.disarm()
  }
}
