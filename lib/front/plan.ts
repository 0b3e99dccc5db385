// One request, one plan: decided once, from what the request is and what the hub knows now, before
// anything is sent anywhere. Pure, so a table test pins every path down; lib/front/router.ts
// carries it out.
//
//   routes    who may answer, in order: a shared watch cache, the apiserver, the disk cache. The
//             router tries each until one answers; one that declines (not its request after all) or
//             is unavailable (no apiserver reachable) hands the request to the next
//   record    what of a successful answer goes to the disk cache first: objects (a read's, or the
//             answer to the node's own write), a discovery document, nothing
//   filter    the answer passes the requesting component's filters on the way out
//
// and, once the apiserver's answer is in, one shape: a watch (frames relayed in order, each
// recorded, filtered and tracked), a whole body (read, recorded, filtered, then sent), or a stream
// passed through untouched.
import type { RequestInfo } from '../api/requestinfo.ts'

export type Route = 'watch-cache' | 'upstream' | 'offline'

export interface Plan {
  routes: Route[]
  /** no Authorization header: the node's own client, whom the cache may answer and record for */
  actsAsNode: boolean
  /** the cloud counted as reachable when the plan was made (the disk cache answering then is a blip's fallback) */
  online: boolean
  record: 'objects' | 'document' | undefined
  filter: boolean
}

/** What the plan is made from, besides the request itself. */
export interface PlanFacts {
  actsAsNode: boolean
  online: boolean
  /** the component's reads of this kind are recorded (--cache-components) */
  cacheable: boolean
  /** a write whose answer is recorded like a read: the node reads back what it wrote */
  recordedWrite: boolean
  /** a discovery document (/api, /apis, …) */
  document: boolean
  /** a read the disk cache may hold, whoever reads it */
  cachedKind: boolean
  /** a list or watch a shared watch cache serves */
  watchCache: boolean
  /** a filter applies to this component and resource */
  filtered: boolean
}

export function planRequest(facts: PlanFacts): Plan {
  const { actsAsNode, online } = facts
  // someone else's identity: neither answered from nor recorded into what the node holds
  // a read a shared watch cache serves is kept by that cache (once per format), never again per component
  const shared = actsAsNode && facts.watchCache
  const record = !actsAsNode ? undefined : facts.document ? 'document' : (facts.cacheable && !shared) || facts.recordedWrite ? 'objects' : undefined
  // if no apiserver can be reached, the cache answers the node's reads instead of a 503
  const fallback = actsAsNode && (facts.cachedKind || facts.document)
  const cloud: Route[] = online ? (fallback ? ['upstream', 'offline'] : ['upstream']) : ['offline']
  const routes: Route[] = shared ? ['watch-cache', ...cloud] : cloud
  return { routes, actsAsNode, online, record, filter: facts.filtered }
}

export type Shape = 'watch' | 'whole' | 'stream'

/** The shape of the apiserver's answer, from the plan and what came back. */
export function shapeOf(plan: Plan, info: RequestInfo, answer: { ok: boolean; framed: boolean; encoded: boolean; decodable: boolean }): Shape {
  if (info.verb === 'watch') return answer.ok && answer.framed && !answer.encoded ? 'watch' : 'stream'
  const staged = plan.record === 'document' || (plan.record === 'objects' && answer.decodable) || (plan.filter && answer.decodable)
  return answer.ok && staged ? 'whole' : 'stream'
}
