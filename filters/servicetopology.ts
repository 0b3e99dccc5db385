// The service topology filter over decoded JSON: finds an endpoints object's Service, asks
// decideTopology which endpoints this node may use, and returns the object trimmed to them. Pure: the
// input is never mutated; the result shares every untouched part with it, and when nothing is dropped
// it is the input itself.

import { decideTopology, hostnameKey, zoneLabel, type EndpointPlace, type TopologyContext } from './topology.ts'
import { eachElement, eachMember, internedStringAt, skipValue, spliceArray, stringAt } from '../lib/codec/json-scan.ts'
import type { Range } from '../lib/codec/json-scan.ts'

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

/** An endpoints object's kind, if it is one the endpoint filters handle: its own kind and apiVersion, else the hint. */
export function kindOf(object: Record<string, unknown>, hint: EndpointsKind | undefined): EndpointsKind | undefined {
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

/** The object's namespace and Service, when it has both. */
function serviceRef(metadata: unknown, kind: EndpointsKind): { namespace: string; service: string } | undefined {
  if (!isObject(metadata)) return undefined
  const namespace = str(metadata.namespace)
  const labels = isObject(metadata.labels) ? (metadata.labels as Record<string, string>) : undefined
  const service = serviceOf(kind, { name: str(metadata.name), labels })
  return namespace === undefined || service === undefined ? undefined : { namespace, service }
}

/** The decision for a Service's endpoints, or undefined when the object passes as it is. */
function decide(ref: { namespace: string; service: string } | undefined, places: EndpointPlace[], input: ServiceTopologyInput): boolean[] | undefined {
  if (ref === undefined) return undefined
  const { namespace, service } = ref
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
    const keep = decide(serviceRef(object.metadata, k), endpoints.map(slicePlace), input)
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
    const keep = decide(serviceRef(object.metadata, k), places, input)
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

const sliceMembers = ['kind', 'apiVersion', 'metadata', 'endpoints']
const placeMembers = ['nodeName', 'zone', 'topology']
const topologyMembers = [hostnameKey, zoneLabel]
const nonEmpty = (s: string | undefined): string | undefined => (s === '' ? undefined : s)

// The endpoint being read by readPlace: where its strings are, [start, end) pairs for nodeName,
// zone, topology's hostname and topology's zone (start -1: absent). Module state, because reading
// is synchronous and never reentrant, and an endpoint costs no closures this way.
const noBytes = Buffer.alloc(0)
let placeBuf: Buffer = noBytes
const spans = new Int32Array(8)
const [nodeSlot, zoneSlot, hostSlot, topologyZoneSlot] = [0, 1, 2, 3]

function record(slot: number, start: number): number {
  const end = skipValue(placeBuf, start)
  spans[2 * slot] = start
  spans[2 * slot + 1] = end
  return end
}

const visitTopology = (which: number, start: number): number => record(hostSlot + which, start)
const visitPlace = (which: number, start: number): number =>
  which === 2 ? (placeBuf[start] === 0x7b ? eachMember(placeBuf, topologyMembers, visitTopology, start) : -1) : record(which, start)

/** The non-empty string recorded in `slot`, if any. */
function stringIn(buf: Buffer, slot: number): string | undefined {
  const start = spans[2 * slot]
  return start === -1 ? undefined : nonEmpty(internedStringAt(buf, start, spans[2 * slot + 1]))
}

const refMembers = ['name', 'namespace', 'labels']
const serviceLabelMember = [serviceNameLabel]

/**
 * The part of the metadata at `start` that names the Service (what serviceRef reads: name,
 * namespace, the service-name label), without parsing the rest. Values that are not strings read
 * as undefined, and a repeated member's last value counts, as JSON.parse would have it.
 */
function refMetadataAt(raw: Buffer, start: number): { name?: string; namespace?: string; labels?: Record<string, string | undefined> } {
  const meta: { name?: string; namespace?: string; labels?: Record<string, string | undefined> } = {}
  eachMember(
    raw,
    refMembers,
    (which, at) => {
      const end = skipValue(raw, at)
      if (which === 0) meta.name = stringAt(raw, { start: at, end })
      else if (which === 1) meta.namespace = stringAt(raw, { start: at, end })
      else if (raw[at] !== 0x7b) meta.labels = undefined
      else {
        const labels: Record<string, string | undefined> = {}
        eachMember(
          raw,
          serviceLabelMember,
          (_, valueAt) => {
            const valueEnd = skipValue(raw, valueAt)
            labels[serviceNameLabel] = stringAt(raw, { start: valueAt, end: valueEnd })
            return valueEnd
          },
          at,
        )
        meta.labels = labels
      }
      return end
    },
    start,
  )
  return meta
}

/** slicePlace over an endpoint's bytes at `start`; returns where it ends. */
function readPlace(buf: Buffer, start: number, into: EndpointPlace[]): number {
  if (buf[start] !== 0x7b) {
    into.push({}) // not an object: no place, the scanner skips it
    return -1
  }
  placeBuf = buf
  for (let slot = 0; slot < 4; slot++) spans[2 * slot] = -1
  const end = eachMember(buf, placeMembers, visitPlace, start)
  placeBuf = noBytes // a list's body is not kept alive by the last endpoint read
  // one shape for every place (a field absent reads as undefined, as decideTopology reads it)
  into.push({ nodeName: stringIn(buf, nodeSlot) ?? stringIn(buf, hostSlot), zone: stringIn(buf, zoneSlot) ?? stringIn(buf, topologyZoneSlot) })
  return end
}

/**
 * filterEndpointsObject for an EndpointSlice's JSON bytes, without parsing the object: only its
 * metadata and each endpoint's place are read (in one pass), and the kept endpoints are copied
 * byte for byte. The same Buffer when unchanged; undefined for a core Endpoints (the caller parses
 * it and uses filterEndpointsObject). Malformed JSON throws JsonScanError.
 */
export function filterSliceJsonBytes(raw: Buffer, input: ServiceTopologyInput, kind?: EndpointsKind): Buffer | undefined {
  const own: { kind?: Range; apiVersion?: Range } = {}
  let metadata: unknown
  let endpoints: Range | undefined
  const bounds: number[] = [] // each endpoint's start and end
  const places: EndpointPlace[] = []
  let unreadWith: unknown // the metadata that said the endpoints need not be read
  const annotated = (): boolean => {
    const ref = serviceRef(metadata, kindOf({ kind: stringAt(raw, own.kind), apiVersion: stringAt(raw, own.apiVersion) }, kind) ?? 'EndpointSlice')
    return ref !== undefined && input.annotationOf(ref.namespace, ref.service) !== undefined
  }
  eachMember(raw, sliceMembers, (which, at) => {
    const end = which === 3 ? -1 : skipValue(raw, at)
    if (which === 0) own.kind = { start: at, end }
    else if (which === 1) own.apiVersion = { start: at, end }
    else if (which === 2) metadata = raw[at] === 0x7b ? refMetadataAt(raw, at) : undefined
    else {
      bounds.length = 0
      places.length = 0
      endpoints = undefined
      // a Service without the annotation (metadata comes first, as the apiserver writes it): the endpoints need not be read
      unreadWith = metadata !== undefined && !annotated() ? metadata : undefined
      if (raw[at] !== 0x5b || unreadWith !== undefined) return -1
      const arrayEnd = eachElement(
        raw,
        elementAt => {
          const elementEnd = readPlace(raw, elementAt, places)
          const stop = elementEnd === -1 ? skipValue(raw, elementAt) : elementEnd
          bounds.push(elementAt, stop)
          return stop
        },
        at,
      )
      endpoints = { start: at, end: arrayEnd }
      return arrayEnd
    }
    return end
  })
  const kindString = stringAt(raw, own.kind)
  const apiVersion = stringAt(raw, own.apiVersion)
  // a kind or apiVersion that is not a string: not a kind the filter knows (as filterEndpointsObject)
  if ((own.kind && kindString === undefined) || (own.apiVersion && apiVersion === undefined)) return raw
  const k = kindOf({ kind: kindString, apiVersion }, kind)
  if (k === 'Endpoints') return undefined
  if (k !== 'EndpointSlice') return raw
  // (a metadata repeated after the endpoints, as no apiserver writes: asked again, parsed if it says otherwise)
  if (endpoints === undefined) return unreadWith !== undefined && unreadWith !== metadata && annotated() ? undefined : raw
  const keep = decide(serviceRef(metadata, k), places, input)
  if (!keep) return raw
  const kept: Buffer[] = []
  for (let i = 0; i < keep.length; i++) if (keep[i]) kept.push(raw.subarray(bounds[2 * i], bounds[2 * i + 1]))
  return spliceArray(raw, endpoints, kept)
}
