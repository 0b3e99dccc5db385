// Service topology on protobuf bytes: drops the endpoints the topology decision does not keep by
// copying the bytes of everything else. Only what the decision needs is decoded (the Service's name
// and namespace, each endpoint's node and zone); every field the filter does not change survives
// byte for byte, and only the length headers on the path to a change are rewritten. One object
// message at a time (Unknown.raw): the filter chain (filters/chain.ts) carries it over list bodies,
// single objects and watch frames, and their envelopes.
//
// Field numbers (checked against a real kube-apiserver v1.24, test/fixtures/apiserver-v1.24):
//   EndpointSlice (discovery.k8s.io/v1 and v1beta1): 1 metadata, 2 repeated Endpoint, 3 ports, 4 addressType
//   v1 Endpoint: 1 addresses, 2 conditions, 3 hostname, 4 targetRef, 5 deprecatedTopology, 6 nodeName, 7 zone, 8 hints
//   v1beta1 Endpoint: 1 addresses, 2 conditions, 3 hostname, 4 targetRef, 5 topology (map), 6 nodeName, 7 hints
//   core v1 Endpoints: 1 metadata, 2 repeated EndpointSubset
//   EndpointSubset: 1 addresses, 2 notReadyAddresses, 3 ports; EndpointAddress: 1 ip, 2 targetRef, 3 hostname, 4 nodeName
import { type EndpointPlace, type TopologyContext, decideTopology, hostnameKey, zoneLabel } from './topology.ts'
import { FieldReader, WIRE_LEN } from '../lib/codec/wire.ts'
import { Edit } from './protobuf-edit.ts'

export { ProtobufError } from '../lib/codec/wire.ts'

export interface ServiceTopologyInput {
  topology: TopologyContext
  annotationOf(namespace: string, service: string): string | undefined
  onInvalid?(namespace: string, service: string, reason: string): void
}

export interface RawFilterResult {
  raw: Buffer
  changed: boolean
  dropped: number
}

const serviceNameLabel = Buffer.from('kubernetes.io/service-name')
const hostnameKeyBytes = Buffer.from(hostnameKey)
const zoneLabelBytes = Buffer.from(zoneLabel)

const sliceV1 = 'discovery.k8s.io/v1'
const sliceV1beta1 = 'discovery.k8s.io/v1beta1'

// ---------------------------------------------------------------------------------------------
// One object: find out what to drop (decoding as little as possible), then emit the kept bytes.

interface ObjectPlan {
  dropped: number
  emit(edit: Edit): void
}

function planObject(apiVersion: string, kind: string, src: Buffer, start: number, end: number, input: ServiceTopologyInput): ObjectPlan | undefined {
  if (kind === 'EndpointSlice') {
    if (apiVersion === sliceV1) return planSlice(false, src, start, end, input)
    if (apiVersion === sliceV1beta1) return planSlice(true, src, start, end, input)
  } else if (kind === 'Endpoints' && apiVersion === 'v1') {
    return planEndpoints(src, start, end, input)
  }
  return undefined
}

interface MetaRefs {
  name: string
  namespace: string
  /** the label kubernetes.io/service-name */
  service: string | undefined
}

/** Reads name, namespace and the service-name label of one ObjectMeta occurrence (later ones win, as in protobuf). */
function readMeta(src: Buffer, start: number, end: number, into: MetaRefs, wantName: boolean, wantService: boolean): void {
  const m = new FieldReader(src, start, end)
  while (m.next()) {
    if (m.field === 3) into.namespace = m.string()
    else if (m.field === 1 && wantName) into.name = m.string()
    else if (m.field === 11 && wantService) {
      m.expect(WIRE_LEN)
      const e = new FieldReader(src, m.start, m.end)
      let isService = false
      let value = ''
      while (e.next()) {
        if (e.field === 1) {
          e.expect(WIRE_LEN)
          isService = equalBytes(src, e.start, e.end, serviceNameLabel)
        } else if (e.field === 2) value = e.string()
      }
      if (isService) into.service = value
    }
  }
}

function equalBytes(src: Buffer, start: number, end: number, want: Buffer): boolean {
  return end - start === want.length && src.compare(want, 0, want.length, start, end) === 0
}

/** keep[i] for each endpoint, or undefined when the object passes unchanged (also when everything is kept). */
function decide(input: ServiceTopologyInput, namespace: string, service: string, annotation: string, places: EndpointPlace[]): boolean[] | undefined {
  const decision = decideTopology(annotation, places, input.topology)
  if (decision.kind === 'unchanged') {
    if (decision.invalid !== undefined) input.onInvalid?.(namespace, service, decision.invalid)
    return undefined
  }
  return decision.keep.every(Boolean) ? undefined : decision.keep
}

/**
 * An object's metadata (field 1) and its repeated field 2 (a slice's endpoints, an Endpoints'
 * subsets) as (tagStart, payload start, payload end) triples.
 */
function metaAndRepeated(src: Buffer, start: number, end: number, wantName: boolean, wantService: boolean): { meta: MetaRefs; spans: number[] } {
  const meta: MetaRefs = { name: '', namespace: '', service: undefined }
  const spans: number[] = []
  const r = new FieldReader(src, start, end)
  while (r.next()) {
    if (r.field === 1) {
      r.expect(WIRE_LEN)
      readMeta(src, r.start, r.end, meta, wantName, wantService)
    } else if (r.field === 2) {
      r.expect(WIRE_LEN)
      spans.push(r.tagStart, r.start, r.end)
    }
  }
  return { meta, spans }
}

function planSlice(beta: boolean, src: Buffer, start: number, end: number, input: ServiceTopologyInput): ObjectPlan | undefined {
  const { meta, spans } = metaAndRepeated(src, start, end, false, true)
  if (!meta.service || !meta.namespace) return undefined
  const annotation = input.annotationOf(meta.namespace, meta.service)
  if (annotation === undefined) return undefined

  const keep = decide(input, meta.namespace, meta.service, annotation, slicePlaces(beta, src, spans))
  if (!keep) return undefined

  let dropped = 0
  for (const k of keep) if (!k) dropped++
  return {
    dropped,
    emit(edit) {
      let cursor = start
      for (let i = 0; i < keep.length; i++) {
        if (keep[i]) continue
        edit.copy(cursor, spans[3 * i])
        cursor = spans[3 * i + 2]
      }
      edit.copy(cursor, end)
    },
  }
}

/** The places of a slice's endpoints, from metaAndRepeated's spans. */
function slicePlaces(beta: boolean, src: Buffer, spans: number[]): EndpointPlace[] {
  const places: EndpointPlace[] = []
  for (let i = 0; i < spans.length; i += 3) places.push(slicePlace(beta, src, spans[i + 1], spans[i + 2]))
  return places
}

function slicePlace(beta: boolean, src: Buffer, start: number, end: number): EndpointPlace {
  let nodeName: string | undefined
  let zone: string | undefined
  let topologyNode: string | undefined
  const e = new FieldReader(src, start, end)
  while (e.next()) {
    if (e.field === 6) nodeName = e.string()
    else if (e.field === 7 && !beta) zone = e.string()
    else if (e.field === 5 && beta) {
      // topology map entry {1 key, 2 value}
      e.expect(WIRE_LEN)
      const m = new FieldReader(src, e.start, e.end)
      let keyStart = 0
      let keyEnd = 0
      let value = ''
      while (m.next()) {
        if (m.field === 1) {
          m.expect(WIRE_LEN)
          keyStart = m.start
          keyEnd = m.end
        } else if (m.field === 2) value = m.string()
      }
      if (equalBytes(src, keyStart, keyEnd, hostnameKeyBytes)) topologyNode = value
      else if (equalBytes(src, keyStart, keyEnd, zoneLabelBytes)) zone = value
    }
  }
  // v1beta1 objects written before nodeName existed carry the node only in the topology map.
  // Empty strings count as absent, as in the JSON filter.
  if (!nodeName) nodeName = topologyNode
  const place: EndpointPlace = {}
  if (nodeName) place.nodeName = nodeName
  if (zone) place.zone = zone
  return place
}

function planEndpoints(src: Buffer, start: number, end: number, input: ServiceTopologyInput): ObjectPlan | undefined {
  const { meta, spans: subsets } = metaAndRepeated(src, start, end, true, false)
  if (!meta.name || !meta.namespace) return undefined
  const annotation = input.annotationOf(meta.namespace, meta.name)
  if (annotation === undefined) return undefined

  // every address (ready and not ready) of every subset, in wire order: (tagStart, end)
  const addresses: number[] = []
  /** addressStart[j] = index of subset j's first address; one more entry at the end */
  const addressStart: number[] = []
  const places: EndpointPlace[] = []
  for (let i = 0; i < subsets.length; i += 3) {
    addressStart.push(places.length)
    const s = new FieldReader(src, subsets[i + 1], subsets[i + 2])
    while (s.next()) {
      if (s.field !== 1 && s.field !== 2) continue
      s.expect(WIRE_LEN)
      addresses.push(s.tagStart, s.end)
      places.push(addressPlace(src, s.start, s.end))
    }
  }
  addressStart.push(places.length)
  const keep = decide(input, meta.namespace, meta.name, annotation, places)
  if (!keep) return undefined

  let dropped = 0
  for (const k of keep) if (!k) dropped++
  return {
    dropped,
    emit(edit) {
      let cursor = start
      for (let j = 0; j < addressStart.length - 1; j++) {
        const first = addressStart[j]
        const last = addressStart[j + 1]
        let kept = 0
        for (let a = first; a < last; a++) if (keep[a]) kept++
        if (kept === last - first) continue // untouched (even if empty): part of the running copy
        const tagStart = subsets[3 * j]
        const payloadStart = subsets[3 * j + 1]
        const payloadEnd = subsets[3 * j + 2]
        edit.copy(cursor, tagStart)
        cursor = payloadEnd
        if (kept === 0) continue // emptied by the filter: the subset goes
        const h = edit.open(2)
        let c = payloadStart
        for (let a = first; a < last; a++) {
          if (keep[a]) continue
          edit.copy(c, addresses[2 * a])
          c = addresses[2 * a + 1]
        }
        edit.copy(c, payloadEnd)
        edit.close(h)
      }
      edit.copy(cursor, end)
    },
  }
}

function addressPlace(src: Buffer, start: number, end: number): EndpointPlace {
  const e = new FieldReader(src, start, end)
  let nodeName: string | undefined
  while (e.next()) if (e.field === 4) nodeName = e.string()
  return nodeName ? { nodeName } : {}
}

/**
 * raw = an object message (Unknown.raw; no k8s\0 envelope). kind: 'EndpointSlice' | 'Endpoints'
 * (apiVersion tells v1 from v1beta1); anything else → unchanged (same Buffer). The Service: label
 * kubernetes.io/service-name for slices, the object's name for Endpoints.
 */
export function filterEndpointsRaw(apiVersion: string, kind: string, raw: Buffer, input: ServiceTopologyInput): RawFilterResult {
  const plan = planObject(apiVersion, kind, raw, 0, raw.length, input)
  if (!plan) return { raw, changed: false, dropped: 0 }
  const edit = new Edit()
  plan.emit(edit)
  return { raw: edit.build(raw), changed: true, dropped: plan.dropped }
}

/** Where a raw EndpointSlice's endpoints are (for /debug/topology); undefined for anything else. */
export function slicePlacesRaw(apiVersion: string, raw: Buffer): EndpointPlace[] | undefined {
  if (apiVersion !== sliceV1 && apiVersion !== sliceV1beta1) return undefined
  return slicePlaces(apiVersion === sliceV1beta1, raw, metaAndRepeated(raw, 0, raw.length, false, false).spans)
}
