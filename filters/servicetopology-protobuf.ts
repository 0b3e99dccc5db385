// Service topology on protobuf bytes: drops the endpoints the topology decision does not keep by
// copying the bytes of everything else. Only what the decision needs is decoded (the Service's name
// and namespace, each endpoint's node and zone); every field the filter does not change survives
// byte for byte, and only the length headers on the path to a change are rewritten.
//
// Field numbers (checked against a real kube-apiserver v1.24, test/fixtures/apiserver-v1.24):
//   EndpointSlice (discovery.k8s.io/v1 and v1beta1): 1 metadata, 2 repeated Endpoint, 3 ports, 4 addressType
//   v1 Endpoint: 1 addresses, 2 conditions, 3 hostname, 4 targetRef, 5 deprecatedTopology, 6 nodeName, 7 zone, 8 hints
//   v1beta1 Endpoint: 1 addresses, 2 conditions, 3 hostname, 4 targetRef, 5 topology (map), 6 nodeName, 7 hints
//   core v1 Endpoints: 1 metadata, 2 repeated EndpointSubset
//   EndpointSubset: 1 addresses, 2 notReadyAddresses, 3 ports; EndpointAddress: 1 ip, 2 targetRef, 3 hostname, 4 nodeName
import { type EndpointPlace, type TopologyContext, decideTopology, hostnameKey, zoneLabel } from './topology.ts'
import { FieldReader, ProtobufError, WIRE_LEN } from '../lib/codec/wire.ts'
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
// Edits: the output as a list of operations on one source buffer (copy a range, write a length
// header), sized as it is built, so the result is one exact-size allocation and one pass of copies.

// ---------------------------------------------------------------------------------------------
// One object: find out what to drop (decoding as little as possible), then emit the kept bytes.

interface ObjectPlan {
  dropped: number
  emit(edit: Edit): void
}

function supported(apiVersion: string, kind: string): boolean {
  if (kind === 'EndpointSlice') return apiVersion === sliceV1 || apiVersion === sliceV1beta1
  if (kind === 'Endpoints') return apiVersion === 'v1'
  return false
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

// ---------------------------------------------------------------------------------------------
// Envelopes: k8s\0 + Unknown (single object or *List), and watch frames.

interface Outcome {
  changed: boolean
  dropped: number
}

/**
 * Emits the body src[start, end) (`k8s\0` + Unknown) into edit, filtered. Always emits the whole
 * body (unchanged parts as copies); the caller throws the edit away when nothing changed.
 */
function planBody(src: Buffer, start: number, end: number, input: ServiceTopologyInput, edit: Edit): Outcome {
  if (end - start < 4 || src[start] !== 0x6b || src[start + 1] !== 0x38 || src[start + 2] !== 0x73 || src[start + 3] !== 0) {
    throw new ProtobufError('body does not start with the k8s protobuf magic')
  }
  let apiVersion = ''
  let kind = ''
  let rawTag = -1
  let rawStart = 0
  let rawEnd = 0
  let encoded = false
  const r = new FieldReader(src, start + 4, end)
  while (r.next()) {
    if (r.field === 1) {
      r.expect(WIRE_LEN)
      const t = new FieldReader(src, r.start, r.end)
      while (t.next()) {
        if (t.field === 1) apiVersion = t.string()
        else if (t.field === 2) kind = t.string()
      }
    } else if (r.field === 2) {
      r.expect(WIRE_LEN)
      rawTag = r.tagStart
      rawStart = r.start
      rawEnd = r.end
    } else if (r.field === 3) {
      r.expect(WIRE_LEN)
      encoded = r.end > r.start
    }
  }
  const unchanged: Outcome = { changed: false, dropped: 0 }
  const itemKind = kind.endsWith('List') ? kind.slice(0, -4) : undefined
  if (rawTag < 0 || encoded || !(supported(apiVersion, kind) || (itemKind !== undefined && supported(apiVersion, itemKind)))) {
    edit.copy(start, end)
    return unchanged
  }
  edit.copy(start, rawTag)
  const h = edit.open(2)
  let outcome = unchanged
  if (itemKind === undefined) {
    const plan = planObject(apiVersion, kind, src, rawStart, rawEnd, input)
    if (plan) {
      plan.emit(edit)
      outcome = { changed: true, dropped: plan.dropped }
    } else edit.copy(rawStart, rawEnd)
  } else {
    outcome = planList(apiVersion, itemKind, src, rawStart, rawEnd, input, edit)
  }
  edit.close(h)
  edit.copy(rawEnd, end)
  return outcome
}

/** A *List message: ListMeta and every other field copied, each item (field 2) filtered. */
function planList(apiVersion: string, kind: string, src: Buffer, start: number, end: number, input: ServiceTopologyInput, edit: Edit): Outcome {
  const outcome: Outcome = { changed: false, dropped: 0 }
  let cursor = start
  const r = new FieldReader(src, start, end)
  while (r.next()) {
    if (r.field !== 2) continue
    r.expect(WIRE_LEN)
    const plan = planObject(apiVersion, kind, src, r.start, r.end, input)
    if (!plan) continue
    edit.copy(cursor, r.tagStart)
    const h = edit.open(2)
    plan.emit(edit)
    edit.close(h)
    cursor = r.end
    outcome.changed = true
    outcome.dropped += plan.dropped
  }
  edit.copy(cursor, end)
  return outcome
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

/** A whole protobuf body (k8s\0 + Unknown): a single object or a *List of them; the same Buffer when nothing changed. */
export function filterProtobufBody(body: Buffer, input: ServiceTopologyInput): { body: Buffer; changed: boolean; dropped: number } {
  const edit = new Edit()
  const outcome = planBody(body, 0, body.length, input, edit)
  if (!outcome.changed) return { body, changed: false, dropped: 0 }
  return { body: edit.build(body), changed: true, dropped: outcome.dropped }
}

const filteredEvents = new Set(['ADDED', 'MODIFIED', 'DELETED'])

/**
 * One watch frame as WatchFrameSplitter emits it (4-byte big-endian length + WatchEvent {1 type,
 * 2 RawExtension {1 raw}}): the event's object filtered; BOOKMARK, ERROR and other types unchanged.
 */
export function filterProtobufWatchFrame(frame: Buffer, input: ServiceTopologyInput): { frame: Buffer; changed: boolean; dropped: number } {
  if (frame.length < 4) throw new ProtobufError('watch frame shorter than its length prefix')
  const length = frame.readUInt32BE(0)
  if (length !== frame.length - 4) {
    throw new ProtobufError(`watch frame length prefix ${length} does not match its ${frame.length - 4} bytes`)
  }
  let typeStart = -1
  let typeEnd = -1
  let extTag = -1
  let extStart = 0
  let extEnd = 0
  const r = new FieldReader(frame, 4)
  while (r.next()) {
    if (r.field === 1) {
      r.expect(WIRE_LEN)
      typeStart = r.start
      typeEnd = r.end
    } else if (r.field === 2) {
      r.expect(WIRE_LEN)
      extTag = r.tagStart
      extStart = r.start
      extEnd = r.end
    }
  }
  const unchanged = { frame, changed: false, dropped: 0 }
  if (extTag < 0 || typeEnd - typeStart > 8 || !filteredEvents.has(frame.toString('latin1', typeStart, typeEnd))) return unchanged
  let rawTag = -1
  let rawStart = 0
  let rawEnd = 0
  const x = new FieldReader(frame, extStart, extEnd)
  while (x.next()) {
    if (x.field !== 1) continue
    x.expect(WIRE_LEN)
    rawTag = x.tagStart
    rawStart = x.start
    rawEnd = x.end
  }
  if (rawTag < 0) return unchanged

  const edit = new Edit()
  edit.copy(4, extTag)
  const hExt = edit.open(2)
  edit.copy(extStart, rawTag)
  const hRaw = edit.open(1)
  const outcome = planBody(frame, rawStart, rawEnd, input, edit)
  edit.close(hRaw)
  edit.copy(rawEnd, extEnd)
  edit.close(hExt)
  edit.copy(extEnd, frame.length)
  if (!outcome.changed) return unchanged
  const out = edit.build(frame, 4)
  out.writeUInt32BE(edit.size, 0)
  return { frame: out, changed: true, dropped: outcome.dropped }
}
