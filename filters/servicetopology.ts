// The service topology filter over decoded JSON: finds an endpoints object's Service, asks
// decideTopology which endpoints this node may use, and returns the object trimmed to them. Pure: the
// input is never mutated; the result shares every untouched part with it, and when nothing is dropped
// it is the input itself.

import { decideTopology, hostnameKey, zoneLabel, type EndpointPlace, type TopologyContext } from './topology.ts'

export interface ServiceTopologyInput {
  topology: TopologyContext
  /** the openyurt.io/topologyKeys annotation of Service <namespace>/<name>; undefined when the Service has none or is unknown */
  annotationOf(namespace: string, service: string): string | undefined
  /** told about an annotation that cannot be used (the caller logs it once per Service) */
  onInvalid?(namespace: string, service: string, reason: string): void
}

/** dropped = endpoints (addresses, for core Endpoints) removed */
export interface FilterResult<T> {
  object: T
  changed: boolean
  dropped: number
}

/** The kinds the filter understands; list items carry no kind, so the caller names the list's. */
export type EndpointsKind = 'EndpointSlice' | 'Endpoints'

export const serviceNameLabel = 'kubernetes.io/service-name'

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)

/**
 * The Service an endpoints object belongs to: label kubernetes.io/service-name for EndpointSlices
 * (never guessed from the name), the object's own name for core Endpoints; undefined when there is none.
 */
export function serviceOf(kind: string, metadata: { name?: string; labels?: Record<string, string> }): string | undefined {
  if (kind === 'EndpointSlice') return str(metadata.labels?.[serviceNameLabel])
  if (kind === 'Endpoints') return str(metadata.name)
  return undefined
}

/** The object's kind, if it is one the filter handles: its own kind and apiVersion, else the hint. */
function kindOf(object: Json, hint: EndpointsKind | undefined): EndpointsKind | undefined {
  const kind = object.kind === undefined || object.kind === '' ? hint : object.kind
  const apiVersion = object.apiVersion
  const noVersion = apiVersion === undefined || apiVersion === ''
  if (kind === 'EndpointSlice' && (noVersion || apiVersion === 'discovery.k8s.io/v1' || apiVersion === 'discovery.k8s.io/v1beta1')) return kind
  if (kind === 'Endpoints' && (noVersion || apiVersion === 'v1')) return kind
  return undefined
}

/**
 * Where an EndpointSlice endpoint is. v1: nodeName and zone. v1beta1: topology["kubernetes.io/hostname"]
 * and topology["topology.kubernetes.io/zone"] (v1beta1 also has nodeName, behind a feature gate, which
 * wins). Read field by field, so an item without apiVersion needs no guess at its version.
 */
function slicePlace(endpoint: unknown): EndpointPlace {
  if (!isObject(endpoint)) return {}
  const topology = isObject(endpoint.topology) ? endpoint.topology : {}
  const nodeName = str(endpoint.nodeName) ?? str(topology[hostnameKey])
  const zone = str(endpoint.zone) ?? str(topology[zoneLabel])
  const place: EndpointPlace = {}
  if (nodeName !== undefined) place.nodeName = nodeName
  if (zone !== undefined) place.zone = zone
  return place
}

function addressPlace(address: unknown): EndpointPlace {
  const nodeName = isObject(address) ? str(address.nodeName) : undefined
  return nodeName === undefined ? {} : { nodeName }
}

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** Where a decoded EndpointSlice's endpoints are, in order (for /debug/topology); undefined for anything else. */
export function slicePlaces(object: unknown): EndpointPlace[] | undefined {
  return isObject(object) && Array.isArray(object.endpoints) ? object.endpoints.map(slicePlace) : undefined
}

/** The decision for a Service's endpoints, or undefined when the object passes as it is. */
function decide(object: Json, kind: EndpointsKind, places: EndpointPlace[], input: ServiceTopologyInput): boolean[] | undefined {
  const metadata = isObject(object.metadata) ? object.metadata : {}
  const namespace = str(metadata.namespace)
  const labels = isObject(metadata.labels) ? (metadata.labels as Record<string, string>) : undefined
  const service = serviceOf(kind, { name: str(metadata.name), labels })
  if (namespace === undefined || service === undefined) return undefined
  const decision = decideTopology(input.annotationOf(namespace, service), places, input.topology)
  if (decision.kind === 'unchanged') {
    if (decision.invalid !== undefined) input.onInvalid?.(namespace, service, decision.invalid)
    return undefined
  }
  return decision.keep.every(Boolean) ? undefined : decision.keep
}

/**
 * Trims an EndpointSlice (discovery.k8s.io v1 or v1beta1) or a core v1 Endpoints to the endpoints
 * this node may use. `kind` is the list's item kind, for list items that carry none. Anything else,
 * and any object the decision leaves whole, is returned as it is (same reference, changed false).
 * A slice left with nothing keeps `endpoints: []`; an Endpoints drops emptied address lists and
 * emptied subsets, and `subsets` itself when none is left, as the apiserver omits them.
 */
export function filterEndpointsObject<T>(object: T, input: ServiceTopologyInput, kind?: EndpointsKind): FilterResult<T> {
  const unchanged: FilterResult<T> = { object, changed: false, dropped: 0 }
  if (!isObject(object)) return unchanged
  const k = kindOf(object, kind)
  if (k === 'EndpointSlice') {
    if (!Array.isArray(object.endpoints)) return unchanged
    const endpoints: unknown[] = object.endpoints
    const keep = decide(object, k, endpoints.map(slicePlace), input)
    if (!keep) return unchanged
    const kept = endpoints.filter((_, i) => keep[i])
    return { object: { ...object, endpoints: kept } as T, changed: true, dropped: endpoints.length - kept.length }
  }
  if (k === 'Endpoints') {
    if (!Array.isArray(object.subsets)) return unchanged
    const subsets: unknown[] = object.subsets
    // One decision over every address of the object: per subset, addresses then notReadyAddresses.
    const places: EndpointPlace[] = []
    for (const subset of subsets) {
      if (!isObject(subset)) continue
      for (const a of list(subset.addresses)) places.push(addressPlace(a))
      for (const a of list(subset.notReadyAddresses)) places.push(addressPlace(a))
    }
    const keep = decide(object, k, places, input)
    if (!keep) return unchanged
    let i = 0
    let dropped = 0
    const trim = (addresses: unknown[]): unknown[] => {
      const kept = addresses.filter(() => keep[i++])
      dropped += addresses.length - kept.length
      return kept
    }
    const out: unknown[] = []
    for (const subset of subsets) {
      if (!isObject(subset)) {
        out.push(subset)
        continue
      }
      const ready = list(subset.addresses)
      const notReady = list(subset.notReadyAddresses)
      const keptReady = trim(ready)
      const keptNotReady = trim(notReady)
      if (keptReady.length === ready.length && keptNotReady.length === notReady.length) {
        out.push(subset)
        continue
      }
      if (keptReady.length === 0 && keptNotReady.length === 0) continue
      const copy: Json = { ...subset }
      if (keptReady.length > 0) copy.addresses = keptReady
      else delete copy.addresses
      if (keptNotReady.length > 0) copy.notReadyAddresses = keptNotReady
      else delete copy.notReadyAddresses
      out.push(copy)
    }
    const result: Json = { ...object }
    if (out.length > 0) result.subsets = out
    else delete result.subsets
    return { object: result as T, changed: true, dropped }
  }
  return unchanged
}
