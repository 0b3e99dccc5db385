// forwardkubesvctraffic (kube-proxy's EndpointSlices): the EndpointSlice default/kubernetes (the
// apiserver names it "kubernetes") gets one endpoint, the hub host, ready, and its first port named
// "https" gets the hub port, so that kube-proxy sends this node's traffic for Service
// default/kubernetes to the hub. Only when the slice's addressType is the hub host's family; else it
// is left as it is and context.warn says why (the caller warns once). Every other slice, and every
// other field, is left as it is. As YurtHub's pkg/yurthub/filter/forwardkubesvctraffic, except:
//   - a hub host that is not an IP address has no family: the slice is left as it is (YurtHub takes
//     it for IPv4 and writes a name into an IPv4 slice, which kube-proxy cannot use);
//   - discovery.k8s.io/v1beta1 slices (kube-proxy before 1.21) too: the fields written are the same;
//   - the input is never mutated, and a slice that already points at the hub is the input itself.
//
// Protobuf field numbers (k8s.io/api discovery v1 and v1beta1 generated.proto, v1.24):
//   EndpointSlice: 1 metadata (ObjectMeta: 1 name, 3 namespace), 2 repeated endpoints, 3 repeated ports, 4 addressType
//   Endpoint: 1 repeated addresses, 2 conditions (EndpointConditions: 1 ready)
//   EndpointPort: 1 name, 3 port (int32 varint)
import { isIPv4, isIPv6 } from 'node:net'
import { objectMeta } from '../lib/codec/protobuf.ts'
import { type FilterContext, type Json, type ObjectFilter, hasKind, isKindOf, isObject, namespacedName, usableHub, withNamedPort } from './object-filter.ts'
import { Patches, applyPatches, inner, lastString, messageField, spansOf, stringField, varintField } from './protobuf-edit.ts'

export const kubeSliceNamespace = 'default'
export const kubeSliceName = 'kubernetes'
export const kubeSlicePortName = 'https'

const name = 'forwardkubesvctraffic'
const kinds = [
  { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice' },
  { apiVersion: 'discovery.k8s.io/v1beta1', kind: 'EndpointSlice' },
]

/** The EndpointSlice addressType of the hub host: IPv4, IPv6, or undefined when it is not an IP address. */
export function hubAddressType(host: string): 'IPv4' | 'IPv6' | undefined {
  if (isIPv4(host)) return 'IPv4'
  if (isIPv6(host)) return 'IPv6'
  return undefined
}

/** Whether the slice gets the hub, or why not (a reason for the operator). */
export function kubeSliceDecision(addressType: string, host: string): { forward: true } | { forward: false; reason: string } {
  const family = hubAddressType(host)
  if (family === undefined) return { forward: false, reason: `hub host ${host} is not an IP address: default/kubernetes EndpointSlice left unchanged` }
  if (addressType !== family) {
    return {
      forward: false,
      reason: `address type of the default/kubernetes EndpointSlice (${addressType}) is not the hub host's (${family}, ${host}): left unchanged; configure a hub host of its family`,
    }
  }
  return { forward: true }
}

function decide(addressType: string, context: FilterContext): boolean {
  if (!usableHub(name, context)) return false
  const decision = kubeSliceDecision(addressType, context.hub.host)
  if (!decision.forward) context.warn?.(name, decision.reason)
  return decision.forward
}

const isHubEndpoint = (e: unknown, host: string): boolean =>
  isObject(e) &&
  Object.keys(e).length === 2 &&
  Array.isArray(e.addresses) &&
  e.addresses.length === 1 &&
  e.addresses[0] === host &&
  isObject(e.conditions) &&
  Object.keys(e.conditions).length === 1 &&
  e.conditions.ready === true

function json(object: unknown, kind: string, context: FilterContext): unknown {
  if (!isObject(object) || !isKindOf(object, kind, kinds)) return object
  const { namespace, name: slice } = namespacedName(object)
  if (namespace !== kubeSliceNamespace || slice !== kubeSliceName) return object
  const addressType = typeof object.addressType === 'string' ? object.addressType : ''
  if (!decide(addressType, context)) return object
  const { host, port } = context.hub
  const out: Json = { ...object }
  let changed = false
  if (!(Array.isArray(object.endpoints) && object.endpoints.length === 1 && isHubEndpoint(object.endpoints[0], host))) {
    out.endpoints = [{ addresses: [host], conditions: { ready: true } }]
    changed = true
  }
  const ports = withNamedPort(object.ports, kubeSlicePortName, port)
  if (ports) {
    out.ports = ports
    changed = true
  }
  return changed ? out : object
}

function protobuf(raw: Buffer, kind: string, context: FilterContext): Buffer {
  if (!hasKind(kind, kinds)) return raw
  const meta = objectMeta(raw)
  if (meta.namespace !== kubeSliceNamespace || meta.name !== kubeSliceName) return raw
  const top = new Patches(spansOf(raw))
  if (!decide(lastString(raw, top.spans, 4), context)) return raw
  const { host, port } = context.hub
  // Endpoint {1 addresses: [host], 2 conditions {1 ready: true}}, as gogo-protobuf writes it
  top.replaceAll(raw, 2, [messageField(2, stringField(1, host), messageField(2, varintField(1, 1)))])
  const https = top.spans.findIndex(s => s.field === 3 && lastString(raw, inner(raw, s), 1) === kubeSlicePortName)
  if (https !== -1) {
    const portPatches = new Patches(inner(raw, top.spans[https]))
    portPatches.set(raw, 3, varintField(3, port))
    top.nest(raw, https, portPatches)
  }
  return applyPatches(raw, top)
}

export const forwardKubeSvcTrafficFilter: ObjectFilter = {
  name,
  kinds,
  json,
  protobuf,
  drops: false,
  only: { namespace: kubeSliceNamespace, name: kubeSliceName },
}
