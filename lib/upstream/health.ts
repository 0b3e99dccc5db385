// Is the cloud reachable? Probes every apiserver on an interval and listens to what real traffic
// says (a connection-level failure counts like a failed probe, a response like a good one). A
// server goes down after N consecutive failures (at once when its link died: an HTTP/2 PING went
// unanswered) and comes back after M consecutive successes (default 1: the first answer); the
// cloud is online while at least one server is up. While a server is down it is probed again
// within a second, so the hub is online about a second after the apiserver first answers. Until
// the first probe round completes the cloud is assumed online; that round decides outright.
import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'

export type CloudState = 'online' | 'offline'

export interface HealthOptions {
  servers: URL[]
  /** one probe of one server; resolves true when healthy. The hub passes a function that GETs /readyz through lib/upstream/upstream.ts with the node's credentials. */
  probe: (server: URL, signal: AbortSignal) => Promise<boolean>
  /** default 5000 */
  intervalMs: number
  /** default 2000 (a probe that takes longer counts as a failure) */
  timeoutMs: number
  /** default 3: consecutive failures of a server before it is down */
  failuresToDown: number
  /** default 2: consecutive successes before it is up again */
  successesToUp: number
  log: Logger
}

/** While a server is down, probes follow each other from this, doubling, up to a second: never much later than the apiserver's return. */
const downProbeMs = { first: 250, most: 1_000 }

export const healthDefaults: Pick<HealthOptions, 'intervalMs' | 'timeoutMs' | 'failuresToDown' | 'successesToUp'> = {
  intervalMs: 5000,
  timeoutMs: 2000,
  failuresToDown: 3,
  successesToUp: 1,
}

/** HealthOptions with the tunables optional (healthDefaults fill them in). */
export type HealthInit = Omit<HealthOptions, keyof typeof healthDefaults> & Partial<Pick<HealthOptions, keyof typeof healthDefaults>>

interface ServerHealth {
  url: URL
  /** undefined until the first observation, which decides outright */
  up: boolean | undefined
  failures: number
  successes: number
  lastFailure: string
  /** the misconfiguration already logged for this server (once, until it answers again) */
  reported?: FailureKind
}

/**
 * Why a server failed, as an operator acts on it: not reachable (a WAN drop: the hub answers from
 * its cache until it is back), or reached but it cannot be trusted or it refused the node
 * (a misconfiguration: waiting will not fix it).
 */
export type FailureKind = 'unreachable' | 'untrusted' | 'refused' | 'plain-http'

/** A TLS handshake answered by a server that speaks plain HTTP (what OpenSSL makes of "HTTP/1.1 400") */
const plainHttpCodes = /\b(ERR_SSL_WRONG_VERSION_NUMBER|ERR_SSL_PACKET_LENGTH_TOO_LONG|ERR_SSL_HTTP_REQUEST)\b/
const plainHttpReason = 'it answered the TLS handshake in plain HTTP'

/** TLS verification failures (Node's and OpenSSL's codes), in a failure's description */
const untrustedCodes =
  /\b(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_[A-Z0-9_]+|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL_[A-Z0-9_]+|ERR_TLS_[A-Z0-9_]+)\b/

export function failureKind(reason: string): FailureKind {
  if (/^the apiserver refused the node's credentials/.test(reason)) return 'refused'
  if (reason.startsWith(plainHttpReason)) return 'plain-http'
  return untrustedCodes.test(reason) ? 'untrusted' : 'unreachable'
}

/**
 * A failure as one line for logs and readyz: a plain-HTTP answer to TLS said as such, OpenSSL's
 * dumps (`803C…:error:0A00010B:SSL routines:…:ssl3_record.c:350:` and a newline) left out.
 */
export function failureReason(reason: string): string {
  const plain = plainHttpCodes.exec(reason)
  if (plain) return `${plainHttpReason} (${plain[1]})`
  return reason
    .replace(/[0-9A-F]+:error:[0-9A-F]+:[^:]*:[^:]*:([^:]+):\S*:\d+:/g, '$1')
    .replace(/\s*\n\s*/g, ' ')
    .trim()
}

/** What to do about a failure that waiting will not fix. */
function fixFor(kind: Exclude<FailureKind, 'unreachable'>, url: URL): string {
  if (kind === 'plain-http') return `${serverLabel(url)} answers plain HTTP: give --server http://${url.host}`
  if (kind === 'untrusted')
    return "the hub cannot verify the apiserver's certificate: give --kubeconfig with the cluster's CA (certificate-authority-data), as kubelet's kubeconfig has it"
  return "the node's credentials were refused: check the client certificate or token in --kubeconfig (expired, revoked, or another cluster's), or --bootstrap-kubeconfig for a new one"
}

function describe(error: unknown): string {
  const err = error as { code?: string; message?: string }
  const message = err?.message ?? String(error)
  return err?.code && !message.includes(err.code) ? `${err.code}: ${message}` : message
}

/**
 * Emits 'change' (state: CloudState) when the cloud goes offline or comes back, 'server'
 * (server: URL, up: boolean) when one server changes, and 'answered' (server: URL) on every
 * successful probe or request.
 */
export class HealthChecker extends EventEmitter {
  private readonly options: HealthOptions
  private readonly servers: ServerHealth[]
  private current: CloudState = 'online'
  private timer: NodeJS.Timeout | undefined
  private running = false
  private readonly inFlight = new Set<AbortController>()
  /** rounds in a row with a server down: the probes' backoff */
  private downRounds = 0

  constructor(options: HealthInit) {
    super()
    // every read waiting on the apiserver listens for the cloud going down until it is answered
    // (lib/front/upstream-answerer.ts): --max-requests-inflight bounds them, not Node's leak
    // heuristic, whose warning at the 11th would tell an operator of a leak that is not there
    this.setMaxListeners(0)
    this.options = { ...healthDefaults, ...definedOnly(options) } as HealthOptions
    if (options.servers.length === 0) throw new Error('health: at least one apiserver URL is required')
    for (const field of ['intervalMs', 'timeoutMs', 'failuresToDown', 'successesToUp'] as const) {
      const value = this.options[field]
      if (!Number.isInteger(value) || value < 1) {
        throw new Error(`health: ${field} must be a positive integer, got ${value}`)
      }
    }
    this.servers = options.servers.map(url => ({ url, up: undefined, failures: 0, successes: 0, lastFailure: '' }))
  }

  get state(): CloudState {
    return this.current
  }

  /** Whether the cloud counts as reachable: the one way the hub's parts read the state (bound: pass it as it is). */
  readonly isOnline = (): boolean => this.current === 'online'

  /** Why the cloud counts as unreachable, server by server, for error messages. */
  outage(): string {
    return `${this.misconfiguration() ?? 'no apiserver reachable'}: ${this.failures()}`
  }

  /**
   * Why the cloud is offline, for readyz: a misconfiguration (TLS, credentials) apart from an
   * apiserver out of reach; undefined while it is online.
   */
  problem(): string | undefined {
    if (this.current === 'online') return undefined
    return `${this.misconfiguration() ?? 'apiserver unreachable'}: ${this.failures()}`
  }

  /** What is wrong when every server failed for a reason waiting will not fix; undefined otherwise. */
  private misconfiguration(): string | undefined {
    const kinds = new Set(this.servers.map(s => (s.lastFailure === '' ? 'unreachable' : failureKind(s.lastFailure))))
    if (kinds.has('unreachable')) return undefined
    // a scheme mistake is not a certificate or credential problem: say which it is
    return kinds.size === 1 && kinds.has('plain-http') ? 'the apiserver is given as https and speaks plain HTTP' : 'cannot authenticate / verify the apiserver'
  }

  private failures(): string {
    return this.servers
      .map(s => {
        const kind = s.lastFailure ? failureKind(s.lastFailure) : 'unreachable'
        const why = `${serverLabel(s.url)}: ${s.lastFailure || 'not answering'}`
        return kind === 'unreachable' ? why : `${why} (${fixFor(kind, s.url)})`
      })
      .join('; ')
  }

  serverUp(server: URL): boolean {
    const s = this.find(server)
    return s !== undefined && s.up !== false
  }

  /** Runs the first probe round (resolves when it is done), then one every intervalMs. */
  async start(): Promise<void> {
    if (this.running) return
    this.running = true
    await this.round()
    this.schedule()
  }

  stop(): void {
    this.running = false
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    for (const controller of this.inFlight) controller.abort(new Error('health checker stopped'))
    this.inFlight.clear()
  }

  reportFailure(server: URL, reason: string): void {
    const s = this.find(server)
    if (s) this.record(s, false, reason)
  }

  /** The server's link died (a PING unanswered): down now, not after failuresToDown. */
  reportDown(server: URL, reason: string): void {
    const s = this.find(server)
    if (!s) return
    s.failures = Math.max(s.failures, this.options.failuresToDown - 1)
    this.record(s, false, reason)
  }

  reportSuccess(server: URL): void {
    const s = this.find(server)
    if (s) this.record(s, true)
  }

  private find(server: URL): ServerHealth | undefined {
    return this.servers.find(s => s.url === server) ?? this.servers.find(s => s.url.href === server.href)
  }

  private schedule(): void {
    if (!this.running) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.round().then(() => this.schedule())
    }, this.nextDelay())
  }

  /** A down server answered (real traffic between rounds): the confirming round comes soon, not at the interval's end. */
  private hurry(): void {
    if (!this.running || this.timer === undefined) return // a round is under way: it schedules the next
    clearTimeout(this.timer)
    this.timer = undefined
    this.schedule()
  }

  /**
   * A server that is down is probed again within a second (250 ms, then doubling): a node is
   * online, and kubelet's node Ready, about a second after the apiserver answers, not an interval
   * later. A probe of a down server is a connection refused or a handshake resumed (cheap for both sides).
   */
  private nextDelay(): number {
    if (!this.servers.some(s => s.up === false)) {
      this.downRounds = 0
      return this.options.intervalMs
    }
    const delay = Math.min(downProbeMs.most, downProbeMs.first * 2 ** this.downRounds++)
    return Math.min(this.options.intervalMs, delay)
  }

  private async round(): Promise<void> {
    await Promise.all(
      this.servers.map(async s => {
        const result = await this.probeOnce(s.url)
        // A round cut short by stop() tells nothing about the server.
        if (!this.running) return
        this.record(s, result.ok, result.reason)
      }),
    )
  }

  private async probeOnce(server: URL): Promise<{ ok: boolean; reason?: string }> {
    const controller = new AbortController()
    this.inFlight.add(controller)
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<{ ok: boolean; reason: string }>(resolve => {
      timer = setTimeout(() => {
        const reason = `probe timed out after ${this.options.timeoutMs} ms`
        controller.abort(new Error(reason))
        resolve({ ok: false, reason })
      }, this.options.timeoutMs)
    })
    const aborted = new Promise<{ ok: boolean; reason: string }>(resolve => {
      controller.signal.addEventListener('abort', () => resolve({ ok: false, reason: describe(controller.signal.reason) }), { once: true })
    })
    const probe = (async () => {
      try {
        return (await this.options.probe(server, controller.signal)) ? { ok: true } : { ok: false, reason: 'probe reported unhealthy' }
      } catch (error) {
        return { ok: false, reason: describe(error) }
      }
    })()
    try {
      // A probe that ignores its signal still cannot hold the round past the timeout.
      return await Promise.race([probe, timeout, aborted])
    } finally {
      clearTimeout(timer)
      this.inFlight.delete(controller)
    }
  }

  private record(s: ServerHealth, ok: boolean, why = 'failed'): void {
    const { failuresToDown, successesToUp } = this.options
    const reason = ok ? why : failureReason(why) // one line, named; not on the path of every answered request
    const was = s.up
    if (ok) this.emit('answered', s.url)
    if (ok) {
      s.failures = 0
      s.successes++
      if (s.up === undefined || (!s.up && s.successes >= successesToUp)) s.up = true
      else if (s.up === false && s.successes === 1) this.hurry()
    } else {
      s.successes = 0
      s.failures++
      s.lastFailure = reason
      if (s.up === undefined || (s.up && s.failures >= failuresToDown)) s.up = false
    }
    const kind = ok ? undefined : failureKind(reason)
    if (ok && s.up) s.reported = undefined
    else if (kind && kind !== 'unreachable' && s.reported !== kind) {
      // at once, not after failuresToDown: a certificate or a credential does not heal by waiting
      s.reported = kind
      this.options.log.error({ server: serverLabel(s.url), reason }, `apiserver ${serverLabel(s.url)}: ${reason}: ${fixFor(kind, s.url)}`)
    }
    if (s.up === was) return
    // a misconfiguration has its error line above; an outage is news of its own
    // one server: the cloud's line says it (update), a second line would repeat it
    if ((was !== undefined || !s.up) && !(kind && kind !== 'unreachable') && this.servers.length > 1) {
      this.options.log.info(
        { server: serverLabel(s.url), up: s.up, reason: s.up ? undefined : reason },
        `apiserver ${serverLabel(s.url)} ${s.up ? 'up' : `down: ${reason}`}`,
      )
    }
    this.emit('server', s.url, s.up)
    // down between rounds (a dead link, failed requests): the probes that watch for its return start now
    if (!s.up) this.hurry()
    this.update()
  }

  private update(): void {
    const next: CloudState = this.servers.some(s => s.up !== false) ? 'online' : 'offline'
    if (next === this.current) return
    this.current = next
    if (next === 'offline') {
      if (this.misconfiguration()) this.options.log.info({ state: next }, 'cloud offline: the hub answers from its cache until the error above is fixed')
      else this.options.log.info({ state: next }, `cloud offline: ${this.failures()}`)
    } else {
      this.options.log.info({ state: next }, 'cloud online')
    }
    this.emit('change', next)
  }
}

/** How a server is named in logs, messages and metrics: its origin, plus its path when it has one. */
export function serverLabel(url: URL): string {
  return url.pathname === '/' ? url.origin : url.origin + url.pathname
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>
}
