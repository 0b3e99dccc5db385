// masterservice (kubelet's Services): Service default/kubernetes points at the hub, so that pods on
// this node reach the apiserver through it: spec.clusterIP := hub host, spec.clusterIPs := [hub host],
// and the first port named "https" gets the hub port (kubelet derives the pods' KUBERNETES_SERVICE_*
// variables from it). Every other Service, and every other field, is left as it is. As YurtHub's
// pkg/yurthub/filter/masterservice, except that nothing is mutated and an unchanged object is the
// input itself (also when it already points at the hub).
//
// Protobuf field numbers (k8s.io/api core/v1 generated.proto, v1.24):
//   Service: 1 metadata (ObjectMeta: 1 name, 3 namespace), 2 spec
//   ServiceSpec: 1 repeated ServicePort, 3 clusterIP, 18 repeated clusterIPs
//   ServicePort: 1 name, 3 port (int32 varint)
import { objectMeta } from '../lib/codec/protobuf.ts'
import { type FilterContext, type Json, type ObjectFilter, hasKind, isKindOf, isObject, namespacedName, usableHub, withNamedPort } from './object-filter.ts'
import { type Span, Patches, applyPatches, inner, lastString, single, spansOf, stringField, varintField } from './protobuf-edit.ts'

export const masterServiceNamespace = 'default'
export const masterServiceName = 'kubernetes'
export const masterServicePortName = 'https'

const name = 'masterservice'
const kinds = [{ apiVersion: 'v1', kind: 'Service' }]

/** Whether namespace/name is the apiserver's Service. */
export const isMasterService = (namespace: string, service: string): boolean => namespace === masterServiceNamespace && service === masterServiceName

function json(object: unknown, kind: string, context: FilterContext): unknown {
  if (!isObject(object) || !isKindOf(object, kind, kinds)) return object
  const { namespace, name: service } = namespacedName(object)
  if (!isMasterService(namespace, service) || !isObject(object.spec) || !usableHub(name, context)) return object
  const { host, port } = context.hub
  const spec = object.spec
  const out: Json = { ...spec }
  let changed = false
  if (spec.clusterIP !== host) {
    out.clusterIP = host
    changed = true
  }
  if (!(Array.isArray(spec.clusterIPs) && spec.clusterIPs.length === 1 && spec.clusterIPs[0] === host)) {
    out.clusterIPs = [host]
    changed = true
  }
  const ports = withNamedPort(spec.ports, masterServicePortName, port)
  if (ports) {
    out.ports = ports
    changed = true
  }
  return changed ? { ...object, spec: out } : object
}

function protobuf(raw: Buffer, kind: string, context: FilterContext): Buffer {
  if (!hasKind(kind, kinds)) return raw
  const meta = objectMeta(raw)
  if (!isMasterService(meta.namespace, meta.name)) return raw
  const top = new Patches(spansOf(raw))
  const spec = single(top.spans, 2)
  if (spec === undefined || !usableHub(name, context)) return raw
  const { host, port } = context.hub
  const specPatches = new Patches(inner(raw, spec))
  specPatches.set(raw, 3, stringField(3, host))
  specPatches.replaceAll(raw, 18, [stringField(18, host)])
  const https = specPatches.spans.findIndex(s => s.field === 1 && portName(raw, s) === masterServicePortName)
  if (https !== -1) {
    const portPatches = new Patches(inner(raw, specPatches.spans[https]))
    portPatches.set(raw, 3, varintField(3, port))
    specPatches.nest(raw, https, portPatches)
  }
  top.nest(raw, top.spans.indexOf(spec), specPatches)
  return applyPatches(raw, top)
}

function portName(raw: Buffer, port: Span): string {
  return lastString(raw, inner(raw, port), 1)
}

export const masterServiceFilter: ObjectFilter = {
  name,
  kinds,
  json,
  protobuf,
  drops: false,
  only: { namespace: masterServiceNamespace, name: masterServiceName },
}
