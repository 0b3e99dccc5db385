// nodeportisolation (kube-proxy's Services): a NodePort or LoadBalancer Service annotated
// nodeport.openyurt.io/listen is listened on only in the node pools it enables; on the nodes of any
// other pool it is dropped from what kube-proxy sees. The annotation is a comma-separated list:
// "pool1" enables pool1, "-pool2" disables pool2, "*" enables every pool not named; a named entry wins
// over "*", and a pool neither named nor covered by "*" is disabled. Entries are trimmed, empty ones
// ignored, and of entries naming the same pool ("a", "-a") the first counts. A node whose pool is not
// known ('' in the context) keeps every Service, as native Kubernetes does. As YurtHub's
// pkg/yurthub/filter/nodeportisolation, except that the pool comes in the context (YurtHub asks the
// apiserver for this node's labels from inside the filter).
//
// Protobuf field numbers (k8s.io/api core/v1 generated.proto, v1.24):
//   Service: 1 metadata (ObjectMeta: 12 annotations {1 key, 2 value}), 2 spec; ServiceSpec: 4 type
import { objectMeta } from '../lib/codec/protobuf.ts'
import { serviceTypeRaw } from './discardcloudservice.ts'
import { type FilterContext, type ObjectFilter, annotationOf, hasKind, isKindOf, isObject, str } from './object-filter.ts'
import { spansOf } from './protobuf-edit.ts'

export const nodePortListenAnnotation = 'nodeport.openyurt.io/listen'

const name = 'nodeportisolation'
const kinds = [{ apiVersion: 'v1', kind: 'Service' }]

// Go's strings.TrimSpace: Unicode White_Space (JavaScript's trim() also takes U+FEFF, not U+0085).
const goSpace = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]'
const goTrim = new RegExp(`^${goSpace}+|${goSpace}+$`, 'g')

/** The annotation's entries as YurtHub keeps them: trimmed, non-empty, the first per pool name. */
export function parseNodePortListen(annotation: string): Set<string> {
  const entries = new Set<string>()
  const pools = new Set<string>()
  for (const raw of annotation.split(',')) {
    const entry = raw.replace(goTrim, '')
    const pool = entry.startsWith('-') ? entry.slice(1) : entry
    if (pool === '' || pools.has(pool)) continue
    pools.add(pool)
    entries.add(entry)
  }
  return entries
}

/** keep or drop, for a Service with the annotation, seen from a node of `pool` ('' when unknown: keep). */
export function nodePortListenDecision(annotation: string, pool: string): 'keep' | 'drop' {
  if (pool === '') return 'keep'
  const entries = parseNodePortListen(annotation)
  if (entries.has(pool)) return 'keep'
  if (entries.has(`-${pool}`)) return 'drop'
  return entries.has('*') ? 'keep' : 'drop'
}

const isolated = (type: string): boolean => type === 'NodePort' || type === 'LoadBalancer'

function decide(type: string, annotation: string | undefined, context: FilterContext): boolean {
  const pool = typeof context.nodePool === 'string' ? context.nodePool : ''
  return !isolated(type) || annotation === undefined || nodePortListenDecision(annotation, pool) === 'keep'
}

function json(object: unknown, kind: string, context: FilterContext): unknown {
  if (!isObject(object) || !isKindOf(object, kind, kinds)) return object
  const type = isObject(object.spec) ? str(object.spec.type) : ''
  return decide(type, annotationOf(object, nodePortListenAnnotation), context) ? object : null
}

function protobuf(raw: Buffer, kind: string, context: FilterContext): Buffer | null {
  if (!hasKind(kind, kinds)) return raw
  const { annotations } = objectMeta(raw)
  const annotation = Object.hasOwn(annotations, nodePortListenAnnotation) ? annotations[nodePortListenAnnotation] : undefined
  return decide(serviceTypeRaw(raw, spansOf(raw)), annotation, context) ? raw : null
}

export const nodePortIsolationFilter: ObjectFilter = { name, kinds, json, protobuf, drops: true }
