// What the router hands each source that may answer a request, and what a source says back. Each
// answerer is built once (lib/hub.ts) with exactly the dependencies it uses; per call it gets only
// the request. Outcomes are explicit: a source that is not the one to answer declines, one that
// cannot answer now says why, and the router goes on to the next route of the plan.
import { EventEmitter } from 'node:events'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { RequestInfo } from '../api/requestinfo.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import type { Source } from '../observe/metrics.ts'
import type { Plan } from './plan.ts'

/**
 * undici takes an EventEmitter as its abort signal. One per request is far cheaper than an
 * AbortController, whose DOMException and signal plumbing showed up at the top of the profile.
 */
export class ClientGone extends EventEmitter {
  aborted = false
  abort(): void {
    if (this.aborted) return
    this.aborted = true
    this.emit('abort')
  }
}

/** One request, read and planned once. */
export interface Call {
  info: RequestInfo
  /** the client's request (its headers; the body is read already) */
  req: IncomingMessage
  res: ServerResponse
  body: Buffer | undefined
  plan: Plan
  /** the requesting component's filters for this resource, chosen once */
  filter: ResponseFilter | undefined
  /** fires when the client goes away before its answer has ended */
  clientGone: ClientGone
}

export type Outcome =
  /** the response is written (or the client went away meanwhile) */
  | { kind: 'answered'; source: Source }
  /** not this source's request after all (a Table, a read of the past): the next route tries it */
  | { kind: 'declined'; why: string }
  /** this source cannot answer now (no apiserver reachable); the next route tries, and the last one's reason is the 503's */
  | { kind: 'unavailable'; reason: string }

export interface Answerer {
  /** `reason`: why the sources tried before could not answer (they were unavailable), if any */
  answer(call: Call, reason: string | undefined): Promise<Outcome>
}

export const answered = (source: Source): Outcome => ({ kind: 'answered', source })
export const declined = (why: string): Outcome => ({ kind: 'declined', why })
export const unavailable = (reason: string): Outcome => ({ kind: 'unavailable', reason })
