// One client request, end to end: classify it, turn away who may not use this port, read the body,
// ask the pure plan (plan.ts) for the routes, and try their answerers in order until one answers.
// Whatever an answerer throws is a 500 Status: the reply is hijacked from fastify, so nobody else
// would answer and the client would wait forever. The only place a request's outcome is logged
// and counted.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { classify, qualifiedResource } from '../api/requestinfo.ts'
import type { RequestInfo } from '../api/requestinfo.ts'
import { failure, serviceUnavailable } from '../api/status.ts'
import { isCachedKind } from '../cache/recorder.ts'
import type { CachePolicy } from '../cache/recorder.ts'
import { isDiscoveryDocument } from '../cache/documents.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import type { Source } from '../observe/metrics.ts'
import { BodyBudgetError, BodyTimeoutError, BodyTooLargeError, hasBody, readBody } from './body.ts'
import { impersonationProblem, ownCredentials } from './authn.ts'
import type { Authenticate } from './authn.ts'
import { planRequest } from './plan.ts'
import type { Route } from './plan.ts'
import { sendStatus } from './respond.ts'
import { isStatus } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import { bodyBudgetExceeded } from './inflight.ts'
import type { BodyBudget, InflightLimiter } from './inflight.ts'
import { ClientGone } from './answerer.ts'
import type { Answerer, Call, Outcome } from './answerer.ts'

export type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>

/** What the plan is made from, besides the request: each a narrow view of a long-lived part of the hub. */
export interface PlanSources {
  cloud: { isOnline(): boolean }
  /** which components' reads are recorded; undefined: the disk cache is off, nothing is recorded or answered from it */
  caching: CachePolicy | undefined
  /** undefined: shared watch caches are off */
  watchCaches: { serves(info: RequestInfo): boolean } | undefined
  filters: { forRequest(info: RequestInfo): ResponseFilter | undefined }
}

export interface RouterOptions {
  answerers: Partial<Record<Route, Answerer>>
  sources: PlanSources
  log: Logger
  observer?: { requestDone(info: RequestInfo, code: number, source: Source, seconds: number): void }
  /** request bodies: at most maxBytes, and no longer than idleMs between chunks */
  /** request bodies: each at most maxBytes; all held at once at most what the budget allows */
  body: { maxBytes: number; idleMs: number; budget?: BodyBudget }
  /** a Status for a request whose resourceVersion the hub must refuse whoever answers (a version it minted: lib/overlay/minted.ts) */
  versionProblem?(info: RequestInfo): Status | undefined
  /** requests served at once (undefined: no cap, as on the pool port, which caps per peer) */
  limiter?: InflightLimiter
}

export class Router {
  constructor(private readonly options: RouterOptions) {}

  /** The handler of one port: `authenticate` says who may use it (undefined: anyone who reaches it, loopback). */
  handlerFor(port: { authenticate?: Authenticate; log?: Logger } = {}): Handler {
    return (req, res) => this.handle(req, res, port.authenticate, port.log ?? this.options.log)
  }

  private async handle(req: IncomingMessage, res: ServerResponse, authenticate: Authenticate | undefined, log: Logger): Promise<void> {
    const started = performance.now()
    const info = classify(req.method ?? 'GET', req.url ?? '/', req.headers['user-agent'])
    let source: Source = 'hub'
    try {
      source = await this.route(info, req, res, authenticate)
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      log.error({ component: info.component, verb: info.verb, path: info.path, err: message }, 'request failed inside the hub')
      sendStatus(res, failure(500, `the hub failed to answer: ${message}`, 'InternalError'))
    }
    // Headers never sent: the client left first, or the connection was cut (nginx's 499).
    const code = res.headersSent ? res.statusCode : 499
    const seconds = (performance.now() - started) / 1000
    this.options.observer?.requestDone(info, code, source, seconds)
    if (log.isLevelEnabled('debug')) {
      // from: whose cache answered, when it was the cache
      const from = res.getHeader('x-outpost-cache-source') as string | undefined
      log.debug(
        { component: info.component, verb: info.verb, resource: qualifiedResource(info) || info.path, code, source, from, ms: Math.round(seconds * 1000) },
        'request',
      )
    }
  }

  private async route(info: RequestInfo, req: IncomingMessage, res: ServerResponse, authenticate: Authenticate | undefined): Promise<Source> {
    const clientGone = new ClientGone()
    res.on('close', () => {
      if (!res.writableFinished) clientGone.abort()
    })
    const denied = authenticate?.(req) ?? impersonationProblem(req.headers)
    if (denied) {
      sendStatus(res, denied)
      return 'hub'
    }
    const slot = this.options.limiter?.admit(info.verb === 'watch' ? 'long-running' : 'short', info.component)
    if (slot && isStatus(slot)) {
      sendStatus(res, slot)
      return 'hub'
    }
    if (slot) res.once('close', () => slot.release())
    // what the apiserver answers to this path whoever asks (a bad escape, a watch of nothing): online or not
    const problem = info.problem ?? this.options.versionProblem?.(info)
    if (problem) {
      sendStatus(res, problem)
      return 'hub'
    }
    let body: Buffer | undefined
    if (hasBody(req)) {
      const budget = this.options.body.budget
      let held = 0
      const reserve = budget
        ? (bytes: number) => {
            if (!budget.take(bytes, info.component)) return false
            held += bytes
            return true
          }
        : undefined
      if (budget) res.once('close', () => budget.give(held))
      try {
        body = await readBody(req, this.options.body.maxBytes, this.options.body.idleMs, reserve)
      } catch (error) {
        // the rest of the body is not read: the connection cannot carry another request
        res.shouldKeepAlive = false
        if (error instanceof BodyTooLargeError) sendStatus(res, failure(413, error.message))
        else if (error instanceof BodyBudgetError) sendStatus(res, bodyBudgetExceeded(budget!.maxBytes))
        else if (error instanceof BodyTimeoutError) sendStatus(res, failure(408, error.message, 'Timeout'))
        else res.destroy()
        return 'hub'
      }
    }
    const call = this.plan(info, req, res, body, clientGone)
    const outcome = await tryInOrder(call, this.options.answerers)
    if (outcome.kind === 'answered') return outcome.source
    sendStatus(
      res,
      serviceUnavailable(outcome.kind === 'unavailable' ? outcome.reason : `no source in this hub answers ${info.verb} ${info.path}: ${outcome.why}`),
    )
    return 'hub'
  }

  private plan(info: RequestInfo, req: IncomingMessage, res: ServerResponse, body: Buffer | undefined, clientGone: ClientGone): Call {
    const { cloud, caching, watchCaches, filters } = this.options.sources
    const filter = filters.forRequest(info)
    const plan = planRequest({
      actsAsNode: !ownCredentials(req.headers),
      online: cloud.isOnline(),
      cacheable: caching?.isCacheable(info) ?? false,
      recordedWrite: caching?.recordsWrite(info) ?? false,
      document: caching !== undefined && isDiscoveryDocument(info),
      cachedKind: caching !== undefined && isCachedKind(info),
      watchCache: watchCaches?.serves(info) ?? false,
      filtered: filter !== undefined,
    })
    return { info, req, res, body, plan, filter, clientGone }
  }
}

/**
 * The plan's routes in order, until one answers; the last outcome when none does. A route whose
 * answerer this hub does not have is declined.
 */
export async function tryInOrder(call: Call, answerers: Partial<Record<Route, Answerer>>): Promise<Outcome> {
  let last: Outcome = { kind: 'declined', why: 'no route' }
  let reason: string | undefined
  for (const route of call.plan.routes) {
    const answerer = answerers[route]
    last = answerer ? await answerer.answer(call, reason) : { kind: 'declined', why: `no ${route} answerer` }
    if (last.kind === 'answered') return last
    if (last.kind === 'unavailable') reason = last.reason
  }
  return last
}
