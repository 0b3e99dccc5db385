// Every request's plan, as a table: who may answer it and in what order (the disk cache after the
// apiserver: an unreachable cloud falls back to it), what is recorded, whether it is filtered.
import t from 'tap'
import { planRequest, shapeOf } from '../lib/front/plan.ts'
import type { PlanFacts } from '../lib/front/plan.ts'
import { classify } from '../lib/api/requestinfo.ts'

const base: PlanFacts = {
  actsAsNode: true,
  online: true,
  cacheable: false,
  recordedWrite: false,
  document: false,
  cachedKind: false,
  watchCache: false,
  filtered: false,
}

t.test('plans', async t => {
  const cases: [string, Partial<PlanFacts>, ReturnType<typeof planRequest>][] = [
    [
      "kube-proxy's slice watch: the shared watch cache, which keeps the objects itself (not recorded again for kube-proxy)",
      { watchCache: true, cacheable: true, cachedKind: true, filtered: true },
      { routes: ['watch-cache', 'upstream', 'offline'], actsAsNode: true, online: true, record: undefined, filter: true },
    ],
    [
      'the same offline: still the watch cache (it holds on through outages)',
      { watchCache: true, online: false, cachedKind: true },
      { routes: ['watch-cache', 'offline'], actsAsNode: true, online: false, record: undefined, filter: false },
    ],
    [
      "kubelet's configmap get: upstream, recorded",
      { cacheable: true, cachedKind: true },
      { routes: ['upstream', 'offline'], actsAsNode: true, online: true, record: 'objects', filter: false },
    ],
    [
      "kubectl's configmap get: upstream, not recorded, answered from the cache if the cloud fails",
      { cachedKind: true },
      { routes: ['upstream', 'offline'], actsAsNode: true, online: true, record: undefined, filter: false },
    ],
    [
      'a discovery document: recorded for every node client',
      { document: true },
      { routes: ['upstream', 'offline'], actsAsNode: true, online: true, record: 'document', filter: false },
    ],
    ['a write: upstream, nothing recorded, no fallback', {}, { routes: ['upstream'], actsAsNode: true, online: true, record: undefined, filter: false }],
    [
      "kubelet's Lease create: upstream, its answer recorded (kubelet reads it back after a restart), no fallback",
      { recordedWrite: true },
      { routes: ['upstream'], actsAsNode: true, online: true, record: 'objects', filter: false },
    ],
    [
      'the same write with a token: not recorded for the node',
      { actsAsNode: false, recordedWrite: true },
      { routes: ['upstream'], actsAsNode: false, online: true, record: undefined, filter: false },
    ],
    [
      'offline: the disk cache',
      { online: false, cachedKind: true, cacheable: true },
      { routes: ['offline'], actsAsNode: true, online: false, record: 'objects', filter: false },
    ],
    [
      'a token: never the caches, never recorded, never a fallback',
      { actsAsNode: false, watchCache: true, cacheable: true, cachedKind: true, document: false, filtered: true },
      { routes: ['upstream'], actsAsNode: false, online: true, record: undefined, filter: true },
    ],
    [
      'a token offline: the offline path, which refuses it',
      { actsAsNode: false, online: false, cachedKind: true },
      { routes: ['offline'], actsAsNode: false, online: false, record: undefined, filter: false },
    ],
  ]
  for (const [name, facts, want] of cases) t.same(planRequest({ ...base, ...facts }), want, name)
})

t.test('shapes of the apiserver answer', async t => {
  const watch = classify('GET', '/api/v1/pods?watch=true', 'kubelet/1')
  const list = classify('GET', '/api/v1/pods', 'kubelet/1')
  const recorded = planRequest({ ...base, cacheable: true, cachedKind: true })
  const plain = planRequest({ ...base, cachedKind: true })
  const filtered = planRequest({ ...base, filtered: true })
  const answer = { ok: true, framed: true, encoded: false, decodable: true }
  t.equal(shapeOf(recorded, watch, answer), 'watch', 'a framed watch is relayed frame by frame')
  t.equal(shapeOf(recorded, watch, { ...answer, encoded: true }), 'stream', 'an encoded watch passes untouched')
  t.equal(shapeOf(recorded, watch, { ...answer, ok: false }), 'stream', 'an error passes untouched')
  t.equal(shapeOf(recorded, list, answer), 'whole', 'a recorded list is read whole')
  t.equal(shapeOf(filtered, list, answer), 'whole', 'a filtered list is read whole')
  t.equal(shapeOf(plain, list, answer), 'stream', 'anything else streams')
  t.equal(shapeOf(recorded, list, { ...answer, decodable: false }), 'stream', 'a Table or another view streams')
})
