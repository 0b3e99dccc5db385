// Keeps the OutpostAutonomy condition on this node's Node, with the node's own credentials (the
// Node authorizer lets a node patch its own status, as kubelet does): a strategic merge patch of
// that one condition, which merges by type and leaves kubelet's conditions alone. When it reads and
// writes is lib/autonomy/schedule.ts; what it says is lib/autonomy/condition.ts.
import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import type { CacheStore } from '../cache/store.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { hubUserAgent } from '../config.ts'
import { readAll } from '../upstream/read-all.ts'
import { describeError } from '../upstream/upstream.ts'
import { Backoff } from '../upstream/backoff.ts'
import type { BackoffOptions } from '../upstream/backoff.ts'
import { autonomyCondition, conditionType, sameCondition } from './condition.ts'
import type { AutonomyCondition, AutonomyStatus } from './condition.ts'
import { autonomyFacts } from './facts.ts'
import { nextStep } from './schedule.ts'
import type { ScheduleState } from './schedule.ts'

/** A JSON request of the hub's own to the apiserver; `contentType` for a PATCH. */
export type NodeApi = (method: 'GET' | 'PATCH', path: string, body?: unknown, contentType?: string) => Promise<{ statusCode: number; body: any }>

const strategicMergePatch = 'application/strategic-merge-patch+json'
const requestTimeoutMs = 10_000

/** The node's credentials, as the upstream carries them (callJson cannot send a PATCH's content type). */
export function nodeApiOf(upstream: Pick<Upstream, 'request'>, timeoutMs = requestTimeoutMs): NodeApi {
  return async (method, path, body, contentType = 'application/json') => {
    // as kubelet's status writes: a request the apiserver does not answer in time is given up and tried again
    const signal = Object.assign(new EventEmitter(), { aborted: false })
    const timer = setTimeout(() => {
      signal.aborted = true
      signal.emit('abort')
    }, timeoutMs)
    let text: string
    let statusCode: number
    try {
      const res = await upstream.request({
        method,
        path,
        headers: { 'user-agent': hubUserAgent, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': contentType }) },
        body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
        signal,
      })
      statusCode = res.statusCode
      text = (await readAll(res.body)).toString()
    } finally {
      clearTimeout(timer)
    }
    let parsed: unknown
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {
      parsed = { message: text.slice(0, 200) }
    }
    return { statusCode, body: parsed }
  }
}

export interface AutonomyWriterOptions {
  nodeName: string
  api: NodeApi
  /** what the condition should say now; asked every tick */
  condition: () => AutonomyCondition
  isOnline: () => boolean
  log: Logger
  /** how long a new value must hold before it is written (default 10 s) */
  settleMs?: number
  /** the least time between two writes (default 30 s) */
  minIntervalMs?: number
  /** how often the facts are looked at (default 1 s): the cache has no event for all of them */
  tickMs?: number
  /** after a failed read or write (default 1 s doubling to a minute) */
  backoff?: BackoffOptions
  now?: () => number
}

/** What the writer knows, for /debug. */
export interface AutonomyReport {
  desired: AutonomyCondition
  onNode: AutonomyCondition | null | undefined
  writes: number
  failures: number
}

export class AutonomyWriter {
  private readonly state: ScheduleState
  /** the Node's condition's lastTransitionTime: kept when only the reason or message changes */
  private transitionTime: string | undefined
  private readonly backoff: Backoff
  private readonly now: () => number
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private wasOnline = false
  private failing = false
  private stopped = false
  writes = 0
  failures = 0

  constructor(private readonly options: AutonomyWriterOptions) {
    this.now = options.now ?? Date.now
    this.backoff = new Backoff({ initialMs: 1_000, maxMs: 60_000, ...options.backoff })
    this.state = { desired: options.condition(), desiredSince: this.now(), onNode: undefined }
  }

  start(): this {
    this.timer = setInterval(() => void this.tick(), this.options.tickMs ?? 1_000)
    this.timer.unref()
    void this.tick()
    return this
  }

  /** One look at the facts, and the read or write they call for; a tick already running is not doubled. */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve()
    this.running ??= this.step().finally(() => (this.running = undefined))
    return this.running
  }

  /** No more reads or writes; one in flight is not waited for (it ends within its timeout, or when the upstream closes). */
  stop(): void {
    this.stopped = true
    clearInterval(this.timer)
    this.timer = undefined
  }

  report(): AutonomyReport {
    return { desired: this.state.desired, onNode: this.state.onNode, writes: this.writes, failures: this.failures }
  }

  private async step(): Promise<void> {
    const online = this.options.isOnline()
    // the Node may have been re-registered while the cloud was away: what it holds is read again
    if (online && !this.wasOnline) this.state.onNode = undefined
    this.wasOnline = online
    const desired = this.options.condition()
    if (!sameCondition(desired, this.state.desired)) {
      this.state.desired = desired
      this.state.desiredSince = this.now()
    }
    const { settleMs = 10_000, minIntervalMs = 30_000 } = this.options
    const step = nextStep(this.state, { online, now: this.now(), settleMs, minIntervalMs })
    try {
      if (step.do === 'read') await this.read()
      else if (step.do === 'write') await this.write()
      else return
      this.state.retryAt = undefined
      this.failing = false
    } catch (error) {
      if (this.stopped) return
      this.failures++
      this.state.retryAt = this.now() + this.backoff.next()
      const log = this.options.log
      // once per run of failures: a Node not registered yet, or the cloud gone, retries quietly
      ;(this.failing ? log.debug : log.warn).call(
        log,
        { node: this.options.nodeName, err: describeError(error) },
        `${conditionType} condition: ${step.do} failed; retrying`,
      )
      this.failing = true
    }
  }

  private nodePath(): string {
    return `/api/v1/nodes/${encodeURIComponent(this.options.nodeName)}`
  }

  private async read(): Promise<void> {
    const answer = await this.options.api('GET', this.nodePath())
    if (answer.statusCode !== 200) throw failure('reading the Node', answer)
    this.remember(answer.body)
  }

  private async write(): Promise<void> {
    const { desired, onNode } = this.state
    const now = goTime(this.now())
    const transition = onNode?.status === desired.status && this.transitionTime ? this.transitionTime : now
    const condition = { type: conditionType, ...desired, lastHeartbeatTime: now, lastTransitionTime: transition }
    const answer = await this.options.api('PATCH', `${this.nodePath()}/status`, { status: { conditions: [condition] } }, strategicMergePatch)
    if (answer.statusCode !== 200) throw failure('writing the condition', answer)
    this.state.lastWriteAt = this.now()
    this.writes++
    this.remember(answer.body)
    this.options.log.info({ node: this.options.nodeName, status: desired.status, reason: desired.reason }, `${conditionType} condition written`)
  }

  /** What the Node holds, from an answer that carries it. */
  private remember(node: any): void {
    const found = (node?.status?.conditions ?? []).find((c: any) => c?.type === conditionType)
    this.state.onNode = found ? { status: found.status as AutonomyStatus, reason: found.reason ?? '', message: found.message ?? '' } : null
    this.transitionTime = found?.lastTransitionTime
  }
}

/**
 * The hub's writer: the facts from its cache, the node's credentials from its upstream. Online
 * only; the caller stops it on close.
 */
export function startAutonomyCondition(options: {
  upstream: Pick<Upstream, 'request'>
  store: Pick<CacheStore, 'durability' | 'loading' | 'all'>
  cacheOff: string | undefined
  nodeName: string
  isOnline: () => boolean
  log: Logger
  settleMs?: number
  minIntervalMs?: number
  tickMs?: number
}): AutonomyWriter {
  const { upstream, store, cacheOff, nodeName, ...rest } = options
  return new AutonomyWriter({
    ...rest,
    nodeName,
    api: nodeApiOf(upstream),
    condition: () => autonomyCondition(autonomyFacts(store, nodeName, cacheOff)),
  }).start()
}

/** RFC 3339 in whole seconds, as metav1.Time is written. */
function goTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function failure(doing: string, answer: { statusCode: number; body: any }): Error {
  const message = typeof answer.body?.message === 'string' ? answer.body.message : JSON.stringify(answer.body)
  return new Error(`${doing}: the apiserver answered ${answer.statusCode}: ${message}`)
}
