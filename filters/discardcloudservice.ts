// discardcloudservice (kube-proxy's Services): Services only the cloud can serve are dropped from
// what kube-proxy on an edge node sees: a LoadBalancer Service annotated svc.openyurt.io/discard:
// "true", and the cloud-only ClusterIP Service kube-system/x-tunnel-server-internal-svc. Everything
// else passes as it is. As YurtHub's pkg/yurthub/filter/discardcloudservice (the annotation value
// must be exactly "true"; the type exactly "LoadBalancer").
//
// Protobuf field numbers (k8s.io/api core/v1 generated.proto, v1.24):
//   Service: 1 metadata (ObjectMeta: 1 name, 3 namespace, 12 annotations {1 key, 2 value}), 2 spec
//   ServiceSpec: 4 type
import { objectMeta } from '../lib/codec/protobuf.ts'
import { type ObjectFilter, annotationOf, hasKind, isKindOf, isObject, namespacedName, str } from './object-filter.ts'
import { type Span, inner, lastString, spansOf } from './protobuf-edit.ts'

export const discardServiceAnnotation = 'svc.openyurt.io/discard'
/** ClusterIP Services of the cloud side (namespace/name) no edge node can reach. */
export const cloudClusterIPServices: ReadonlySet<string> = new Set(['kube-system/x-tunnel-server-internal-svc'])

const name = 'discardcloudservice'
const kinds = [{ apiVersion: 'v1', kind: 'Service' }]

/** Whether a Service is dropped, from its namespace, name, spec.type and discard annotation. */
export function isCloudService(namespace: string, service: string, type: string, discard: string | undefined): boolean {
  if (type === 'LoadBalancer' && discard === 'true') return true
  return cloudClusterIPServices.has(`${namespace}/${service}`)
}

function json(object: unknown, kind: string): unknown {
  if (!isObject(object) || !isKindOf(object, kind, kinds)) return object
  const { namespace, name: service } = namespacedName(object)
  const type = isObject(object.spec) ? str(object.spec.type) : ''
  return isCloudService(namespace, service, type, annotationOf(object, discardServiceAnnotation)) ? null : object
}

/** spec.type of a raw Service: the last occurrence, across spec occurrences (which merge). */
export function serviceTypeRaw(raw: Buffer, spans: Span[]): string {
  let type = ''
  for (const s of spans) {
    if (s.field !== 2) continue
    const spec = inner(raw, s)
    if (spec.some(f => f.field === 4)) type = lastString(raw, spec, 4)
  }
  return type
}

function protobuf(raw: Buffer, kind: string): Buffer | null {
  if (!hasKind(kind, kinds)) return raw
  const meta = objectMeta(raw)
  const discard = Object.hasOwn(meta.annotations, discardServiceAnnotation) ? meta.annotations[discardServiceAnnotation] : undefined
  return isCloudService(meta.namespace, meta.name, serviceTypeRaw(raw, spansOf(raw)), discard) ? null : raw
}

export const discardCloudServiceFilter: ObjectFilter = { name, kinds, json, protobuf, drops: true }
