// One hub's part in its node pool: it competes for the pool's Lease (lease-election.ts); while it
// leads, its pool port answers (lib/front/pool-port.ts) and the Lease says where and with which
// certificate; while another hub leads, the pool-wide list+watches go there (leader-source.ts), and
// back to the cloud at once when that leader fails, stops renewing or steps down. Which source is
// decided here from the Lease alone (chooseSource, a pure function); the moves are the source
// switch's, which resumes every watch where it was.
import type { Logger } from 'pino'
import type { RequestSource, SourceSwitch } from '../upstream/source-switch.ts'
import { LeaseElection } from './lease-election.ts'
import type { LeaseApi, StoredLease } from './lease-election.ts'
import { LeaderSource } from './leader-source.ts'
import type { LeaderEndpoint } from './leader-source.ts'

export const addressAnnotation = 'outpost.io/pool-address'
export const certificateAnnotation = 'outpost.io/pool-certificate'

export type Role = 'leader' | 'follower' | 'candidate'

/** What the metrics want to know. */
export interface PoolObserver {
  leading(on: boolean): void
  following(on: boolean): void
  leaderChanged(): void
  fellBack(): void
}

export interface PoolMemberOptions {
  identity: string
  pool: string
  lease: { namespace: string; name: string; api: LeaseApi; durationMs: number; renewDeadlineMs: number; retryPeriodMs: number }
  /** where this hub's pool port is reached, and its pinned certificate: published while it leads */
  publish: () => { address: string; certificate: string } | undefined
  /** the switch the pool-wide reflectors read through, and the cloud it points at when there is no leader to follow */
  poolSource: SourceSwitch
  cloud: RequestSource
  /** the node's client certificate: without one this hub cannot follow (it may still lead) */
  credentials: () => { cert?: Buffer; key?: Buffer }
  log: Logger
  observer?: PoolObserver
  now?: () => number
  /** after a leader failed a request, how long before it is tried again (doubling, to 60 s) */
  retryLeaderMs?: number
  /** this hub stopped leading: what it still serves its followers must end, so they move on */
  onStopLeading?(): void
}

/**
 * The leader to follow, from the Lease as last read: another holder whose term has not run out on
 * this hub's clock, that published an address and a certificate. Undefined: use the cloud.
 */
export function chooseSource(
  identity: string,
  lease: StoredLease | undefined,
  termEndsAt: number | undefined,
  now: number,
): { leader: LeaderEndpoint } | { none: string } {
  if (!lease || lease.record.holderIdentity === '') return { none: 'no hub leads the pool' }
  const holder = lease.record.holderIdentity
  if (holder === identity) return { none: 'this hub leads the pool' }
  if (termEndsAt === undefined || termEndsAt <= now) return { none: `the term of ${holder} ran out without a renewal` }
  const url = lease.annotations[addressAnnotation]
  const certificate = lease.annotations[certificateAnnotation]
  if (!url || !certificate) return { none: `${holder} published no address or certificate on the Lease` }
  return { leader: { identity: holder, url, certificate } }
}

export class PoolMember {
  private readonly election: LeaseElection
  private readonly now: () => number
  private following: LeaderSource | undefined
  private why = 'starting'
  private fallbacks = 0
  private lastFailure: { leader: string; reason: string; at: number } | undefined
  /**
   * A leader that failed is left alone for a while, and until it renews the Lease again (a dead
   * one never does); its key: identity, url and certificate.
   */
  private readonly resting = new Map<string, { until: number; waitMs: number; renewTime?: string }>()

  constructor(private readonly options: PoolMemberOptions) {
    this.now = options.now ?? Date.now
    const { lease } = options
    this.election = new LeaseElection(lease.api, {
      identity: options.identity,
      leaseDurationMs: lease.durationMs,
      renewDeadlineMs: lease.renewDeadlineMs,
      retryPeriodMs: lease.retryPeriodMs,
      now: this.now,
      // a follower whose leader has not failed lately reads the Lease once a lease duration (its
      // leader's streams say it is alive; a leader that stops leading ends them); every retry period otherwise
      idlePeriodMs: () => (this.following && !this.doubtful() ? lease.durationMs : lease.retryPeriodMs),
      annotations: (): Record<string, string> => {
        const published = options.publish()
        return published ? { [addressAnnotation]: published.address, [certificateAnnotation]: published.certificate } : {}
      },
      onError: error => options.log.warn({ pool: options.pool, err: error.message }, 'pool: the Lease could not be read or written'),
    })
    this.election.on('leading', () => {
      options.log.info({ pool: options.pool, lease: `${lease.namespace}/${lease.name}` }, 'pool: this hub leads its pool')
      options.observer?.leading(true)
    })
    this.election.on('stopped', () => {
      options.log.warn({ pool: options.pool }, 'pool: this hub stopped leading its pool')
      options.observer?.leading(false)
      options.onStopLeading?.()
    })
    this.election.on('leader', holder => {
      options.log.info({ pool: options.pool, leader: holder || null }, 'pool: the leader changed')
      options.observer?.leaderChanged()
    })
    this.election.on('observed', () => this.reconsider())
  }

  get pool(): string {
    return this.options.pool
  }

  get role(): Role {
    if (this.election.isLeader) return 'leader'
    return this.following ? 'follower' : 'candidate'
  }

  get isLeader(): boolean {
    return this.election.isLeader
  }

  start(): void {
    this.election.start()
  }

  async stop(): Promise<void> {
    await this.election.stop()
    this.follow(undefined, 'stopped')
  }

  /** After each round of the election: follow the Lease's holder, or use the cloud. */
  private reconsider(): void {
    const choice = chooseSource(this.options.identity, this.election.lease, this.election.termEndsAt, this.now())
    if ('none' in choice) return this.follow(undefined, choice.none)
    const { leader } = choice
    const key = `${leader.identity}\0${leader.url}\0${leader.certificate}`
    const rest = this.resting.get(key)
    // the renewal to wait past is the one read right after the failure (poke()), not an older copy
    if (rest && rest.renewTime === undefined) rest.renewTime = this.election.lease?.record.renewTime ?? ''
    if (rest && (rest.until > this.now() || rest.renewTime === this.election.lease?.record.renewTime))
      return this.follow(undefined, `${leader.identity} failed: ${this.lastFailure?.reason ?? 'unreachable'}`)
    if (this.following && this.followingKey === key) return
    const { cert, key: privateKey } = this.options.credentials()
    if (!cert || !privateKey) return this.follow(undefined, 'this node has no client certificate to present to the leader (token credentials)')
    let source: LeaderSource
    try {
      source = new LeaderSource({
        leader,
        credentials: { cert, key: privateKey },
        cloud: this.options.cloud,
        onFailure: reason => this.leaderFailed(source, key, reason),
        // a leader that answers again starts its next failure's wait from the beginning
        onAnswered: () => this.resting.delete(key),
      })
    } catch (error) {
      return this.follow(undefined, (error as Error).message)
    }
    this.followingKey = key
    this.follow(source, `following ${leader.identity}`)
  }

  private followingKey = ''

  private follow(source: LeaderSource | undefined, why: string): void {
    this.why = why
    if (source === this.following) return
    const before = this.following
    this.following = source
    if (!source) this.followingKey = ''
    this.options.poolSource.use(source ?? this.options.cloud)
    before?.close()
    this.options.observer?.following(source !== undefined)
    this.options.log.info(
      { pool: this.options.pool, leader: source?.leader.identity ?? null, why },
      source ? 'pool: pool-wide reads from the leader' : 'pool: pool-wide reads from the cloud',
    )
  }

  /** a leader failed within the last two lease durations */
  private doubtful(): boolean {
    return this.lastFailure !== undefined && this.now() - this.lastFailure.at < 2 * this.options.lease.durationMs
  }

  private leaderFailed(source: LeaderSource, key: string, reason: string): void {
    this.election.poke()
    this.fallbacks++
    this.options.observer?.fellBack()
    this.lastFailure = { leader: source.leader.identity, reason, at: this.now() }
    // the requests of one failure (every reflector's at once) count as one: the wait doubles per episode
    const rest = this.resting.get(key)
    if (!rest || rest.until <= this.now()) {
      const waitMs = Math.min(60_000, (rest?.waitMs ?? (this.options.retryLeaderMs ?? 2_500) / 2) * 2)
      this.resting.set(key, { until: this.now() + waitMs, waitMs })
      if (this.resting.size > 16) this.resting.delete(this.resting.keys().next().value!)
      this.options.log.warn(
        { pool: this.options.pool, leader: source.leader.identity, err: reason, retryInMs: waitMs },
        'pool: the leader failed; pool-wide reads from the cloud',
      )
    }
    if (this.following === source) this.follow(undefined, `${source.leader.identity} failed: ${reason}`)
  }

  /** What /debug/pool shows (with the resources' sources added by the hub). */
  describe(): {
    pool: string
    identity: string
    role: Role
    why: string
    lease: { namespace: string; name: string; holder: string; acquireTime: string; renewTime: string; transitions: number; leaseDurationSeconds: number } | null
    leader: { identity: string; url: string } | null
    fallbacks: number
    lastFailure: { leader: string; reason: string; at: string } | null
  } {
    const lease = this.election.lease
    const { namespace, name } = this.options.lease
    return {
      pool: this.options.pool,
      identity: this.options.identity,
      role: this.role,
      why: this.election.isLeader ? 'this hub holds the Lease' : this.why,
      lease: lease
        ? {
            namespace,
            name,
            holder: lease.record.holderIdentity,
            acquireTime: lease.record.acquireTime,
            renewTime: lease.record.renewTime,
            transitions: lease.record.leaseTransitions,
            leaseDurationSeconds: lease.record.leaseDurationSeconds,
          }
        : null,
      leader: this.following ? { identity: this.following.leader.identity, url: this.following.leader.url } : null,
      fallbacks: this.fallbacks,
      lastFailure: this.lastFailure ? { ...this.lastFailure, at: new Date(this.lastFailure.at).toISOString() } : null,
    }
  }
}
