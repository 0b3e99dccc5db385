// Leader election with a coordination.k8s.io/v1 Lease, with client-go leaderelection's semantics
// (tools/leaderelection/leaderelection.go, resourcelock/leaselock.go): a candidate takes the Lease
// when it is free or its holder's term has run out, as measured on the candidate's own clock from
// when it last saw the record change (never from the renewTime written by another node's clock);
// writes carry the resourceVersion they were built from, so of two racing candidates the apiserver
// lets one win (409 for the other); a leader renews every retry period and steps down when it has
// not renewed for the renew deadline, which is shorter than the lease: it has stopped leading
// before any other candidate may take over. A leader that stops releases the Lease.
//
// The decision is a pure function (decide) over plain data, table-tested; LeaseElection runs it.
import { EventEmitter } from 'node:events'

/** The Lease's spec as client-go's LeaderElectionRecord reads it. */
export interface LeaseRecord {
  holderIdentity: string
  leaseDurationSeconds: number
  acquireTime: string
  renewTime: string
  leaseTransitions: number
}

export interface StoredLease {
  record: LeaseRecord
  resourceVersion: string
  /** what the leader publishes with it (where followers reach it) */
  annotations: Record<string, string>
}

/** The Lease on the apiserver; create and update throw LeaseConflictError on a 409. */
export interface LeaseApi {
  get(): Promise<StoredLease | undefined>
  create(record: LeaseRecord, annotations: Record<string, string>): Promise<StoredLease>
  update(record: LeaseRecord, annotations: Record<string, string>, resourceVersion: string): Promise<StoredLease>
}

export class LeaseConflictError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'LeaseConflictError'
  }
}

/** What the candidate knows of the Lease: the record last read, and when (its own clock) it last changed. */
export interface Observation {
  lease: StoredLease
  /** ms on this candidate's clock when the record was first seen as it is now */
  changedAt: number
}

export type Decision =
  | { action: 'create'; record: LeaseRecord }
  | { action: 'update'; record: LeaseRecord; resourceVersion: string }
  /** someone else holds it and their term has not run out on this candidate's clock */
  | { action: 'wait'; holder: string; expiresAt: number }

/** The Lease's RFC 3339 time with microseconds, as metav1.MicroTime writes it. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z')
}

/**
 * One round of tryAcquireOrRenew: take or renew the Lease, or wait. `observed` is undefined when the
 * Lease does not exist. A renewal keeps acquireTime and leaseTransitions; a takeover counts one more
 * transition.
 */
export function decide(identity: string, observed: Observation | undefined, now: number, leaseDurationSeconds: number): Decision {
  const fresh = (transitions: number, acquireTime: string): LeaseRecord => ({
    holderIdentity: identity,
    leaseDurationSeconds,
    acquireTime,
    renewTime: microTime(now),
    leaseTransitions: transitions,
  })
  if (!observed) return { action: 'create', record: fresh(0, microTime(now)) }
  const { record, resourceVersion } = observed.lease
  const mine = record.holderIdentity === identity
  const expiresAt = observed.changedAt + record.leaseDurationSeconds * 1000
  if (record.holderIdentity !== '' && !mine && expiresAt > now) return { action: 'wait', holder: record.holderIdentity, expiresAt }
  if (mine) return { action: 'update', record: fresh(record.leaseTransitions, record.acquireTime || microTime(now)), resourceVersion }
  return { action: 'update', record: fresh(record.leaseTransitions + 1, microTime(now)), resourceVersion }
}

export interface LeaseElectionOptions {
  identity: string
  leaseDurationMs?: number
  renewDeadlineMs?: number
  retryPeriodMs?: number
  /** published with the Lease while this candidate leads (where followers reach it) */
  annotations?: () => Record<string, string>
  /**
   * How long a candidate that does not lead waits between reads of the Lease (default the retry
   * period). Reading less often is always safe (it can only take over later); a follower whose
   * leader answers reads seldom, and often again once it has a reason to doubt it (poke()).
   */
  idlePeriodMs?: () => number
  now?: () => number
  /** told of failures to read or write the Lease (not of lost races) */
  onError?(error: Error): void
}

/**
 * Runs the election. Emits 'leading' when this candidate becomes the leader, 'stopped' when it
 * stops leading (deadline passed, or stop()), 'leader' with the holder's identity whenever the
 * holder it observes changes, and 'observed' after every round.
 */
export class LeaseElection extends EventEmitter {
  private observed: Observation | undefined
  private leading = false
  private lastRenew = 0
  private timer: NodeJS.Timeout | undefined
  private running = false
  private round: Promise<void> = Promise.resolve()
  private readonly leaseDurationMs: number
  private readonly renewDeadlineMs: number
  private readonly retryPeriodMs: number
  private readonly now: () => number

  constructor(
    private readonly api: LeaseApi,
    private readonly options: LeaseElectionOptions,
  ) {
    super()
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000
    if (!(this.renewDeadlineMs < this.leaseDurationMs)) throw new Error('the renew deadline must be shorter than the lease duration')
    if (!(this.retryPeriodMs < this.renewDeadlineMs)) throw new Error('the retry period must be shorter than the renew deadline')
    this.now = options.now ?? Date.now
  }

  get isLeader(): boolean {
    return this.leading
  }

  /** The Lease as last read or written, and who holds it. */
  get lease(): StoredLease | undefined {
    return this.observed?.lease
  }

  /** When the holder's term runs out on this candidate's clock, unless it renews; undefined when nobody holds it. */
  get termEndsAt(): number | undefined {
    const observed = this.observed
    if (!observed || observed.lease.record.holderIdentity === '') return undefined
    return observed.changedAt + observed.lease.record.leaseDurationSeconds * 1000
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.tick()
  }

  private readonly tick = (): void => {
    this.timer = undefined
    this.round = this.tryAcquireOrRenew().finally(() => {
      if (!this.running || this.timer) return
      const wait = this.leading ? this.retryPeriodMs : Math.max(this.retryPeriodMs, this.options.idlePeriodMs?.() ?? this.retryPeriodMs)
      this.timer = setTimeout(this.tick, wait)
    })
  }

  /** The next round now, not after a long idle wait: the leader may be gone. */
  poke(): void {
    if (!this.running || this.leading || !this.timer) return
    clearTimeout(this.timer)
    this.timer = setTimeout(this.tick, 0)
  }

  /** Stops competing; a leader releases the Lease (holder '') so another takes over at once. */
  async stop(): Promise<void> {
    this.running = false
    if (this.timer) clearTimeout(this.timer)
    await this.round
    if (!this.leading || !this.observed) return
    this.stepDown()
    const { record, resourceVersion, annotations } = this.observed.lease
    try {
      await this.api.update({ ...record, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(this.now()) }, annotations, resourceVersion)
    } catch (error) {
      if (!(error instanceof LeaseConflictError)) this.options.onError?.(error as Error)
    }
  }

  /** One round; exposed for tests that drive the clock. */
  async tryAcquireOrRenew(): Promise<void> {
    try {
      this.observe(await this.api.get())
      const decision = decide(this.options.identity, this.observed, this.now(), Math.round(this.leaseDurationMs / 1000))
      if (decision.action === 'wait') {
        if (this.leading) this.stepDown() // someone else holds it now
        return
      }
      const annotations = this.options.annotations?.() ?? {}
      const written =
        decision.action === 'create'
          ? await this.api.create(decision.record, annotations)
          : await this.api.update(decision.record, annotations, decision.resourceVersion)
      this.observe(written)
      this.lastRenew = this.now()
      if (!this.leading) {
        this.leading = true
        this.emit('leading')
      }
    } catch (error) {
      if (!(error instanceof LeaseConflictError)) this.options.onError?.(error as Error)
    } finally {
      // a leader that has not renewed for the deadline stops, before its lease can run out elsewhere
      if (this.leading && this.now() - this.lastRenew >= this.renewDeadlineMs) this.stepDown()
      this.emit('observed')
    }
  }

  private observe(lease: StoredLease | undefined): void {
    const before = this.observed?.lease.record
    if (!lease) {
      this.observed = undefined
      return
    }
    const same = before !== undefined && JSON.stringify(before) === JSON.stringify(lease.record)
    this.observed = { lease, changedAt: same ? this.observed!.changedAt : this.now() }
    if (before?.holderIdentity !== lease.record.holderIdentity) this.emit('leader', lease.record.holderIdentity)
  }

  private stepDown(): void {
    if (!this.leading) return
    this.leading = false
    this.emit('stopped')
  }
}
