// The localendpoints filter on protobuf object messages (Unknown.raw): the same decisions as the JSON
// form (./localendpoints.ts), made on the few fields they need (targetRef, node, addresses), and
// written as wire edits: every byte of what does not change is copied, only the length headers on the
// path to a change are rebuilt (./protobuf-edit.ts), and a changed endpoint's addresses and conditions
// are written in field-number order, as the apiserver (gogo-protobuf) writes them.
//
// Field numbers (as in ./servicetopology-protobuf.ts, checked against a real kube-apiserver v1.24):
//   EndpointSlice: 1 metadata, 2 repeated Endpoint, 3 ports, 4 addressType
//   Endpoint (v1 and v1beta1): 1 addresses (repeated string), 2 conditions, 4 targetRef, 6 nodeName;
//     v1beta1: 5 topology (map entries {1 key, 2 value})
//   EndpointConditions: 1 ready, 2 serving, 3 terminating (optional bools)
//   core v1 Endpoints: 1 metadata, 2 repeated EndpointSubset
//   EndpointSubset: 1 addresses, 2 notReadyAddresses, 3 ports; EndpointAddress: 1 ip, 2 targetRef, 3 hostname, 4 nodeName
//   ObjectReference: 1 kind, 2 namespace, 3 name, 4 uid
import type { LocalEndpointsInput, LocalPod } from './local-pod.ts'
import { FieldReader, WIRE_LEN } from '../lib/codec/wire.ts'
import { type Emit, Patches, type Span, applyPatches, expectLen, messageField, spansOf, stringField, varintField } from './protobuf-edit.ts'
import { type TargetRef, decideAddress, decideSliceEndpoint, mayNameOverlaidPod, podOf } from './localendpoints.ts'
import { hostnameKey } from './topology.ts'

export { ProtobufError } from '../lib/codec/wire.ts'

const sliceV1 = 'discovery.k8s.io/v1'
const sliceV1beta1 = 'discovery.k8s.io/v1beta1'
const hostnameKeyBytes = Buffer.from(hostnameKey)

/** An ObjectReference's kind, namespace, name and uid (a repeated field: the last, as protobuf merges). */
function readRef(src: Buffer, start: number, end: number): TargetRef {
  const ref: TargetRef = {}
  const r = new FieldReader(src, start, end)
  while (r.next()) {
    if (r.field === 1) ref.kind = r.string()
    else if (r.field === 2) ref.namespace = r.string()
    else if (r.field === 3) ref.name = r.string()
    else if (r.field === 4) ref.uid = r.string()
  }
  return ref
}

/** Merges every occurrence of an embedded message field, as a decoder would. */
function mergeRef(into: TargetRef | undefined, src: Buffer, r: FieldReader): TargetRef {
  r.expect(WIRE_LEN)
  return { ...into, ...readRef(src, r.start, r.end) }
}

/** The pod a slice endpoint stands for, if it is an overlaid one. */
function slicePod(beta: boolean, src: Buffer, span: Span, input: LocalEndpointsInput): LocalPod | undefined {
  let ref: TargetRef | undefined
  let nodeName = ''
  let topologyNode = ''
  const e = new FieldReader(src, span.start, span.end)
  while (e.next()) {
    if (e.field === 4) ref = mergeRef(ref, src, e)
    else if (e.field === 6) nodeName = e.string()
    else if (e.field === 5 && beta) {
      e.expect(WIRE_LEN)
      const m = new FieldReader(src, e.start, e.end)
      let isHost = false
      let value = ''
      while (m.next()) {
        if (m.field === 1) isHost = m.bytes().equals(hostnameKeyBytes)
        else if (m.field === 2) value = m.string()
      }
      if (isHost) topologyNode = value
    }
  }
  return podOf(ref, nodeName || topologyNode || undefined, input)
}

function addressesOf(src: Buffer, span: Span): string[] {
  const out: string[] = []
  const e = new FieldReader(src, span.start, span.end)
  while (e.next()) if (e.field === 1) out.push(e.string())
  return out
}

function conditionsField(pod: LocalPod): Buffer {
  return messageField(2, varintField(1, pod.ready ? 1 : 0), varintField(2, pod.serving ? 1 : 0), varintField(3, pod.terminating ? 1 : 0))
}

function filterSlice(beta: boolean, raw: Buffer, input: LocalEndpointsInput): Buffer {
  const spans = spansOf(raw)
  let addressType = ''
  for (const s of spans) {
    if (s.field !== 4) continue
    expectLen(s)
    addressType = raw.toString('utf8', s.start, s.end)
  }
  const patches = new Patches(spans)
  spans.forEach((s, i) => {
    if (s.field !== 2) return
    expectLen(s)
    const pod = slicePod(beta, raw, s, input)
    if (!pod) return
    const address = decideSliceEndpoint(pod, addressType, addressesOf(raw, s), input)
    if (address === undefined) return
    if (address === null) {
      patches.byIndex[i] = null
      return
    }
    const endpoint = new Patches(spansOf(raw, s.start, s.end))
    endpoint.replaceAll(raw, 1, [stringField(1, address)])
    endpoint.set(raw, 2, conditionsField(pod))
    patches.nest(raw, i, endpoint)
  })
  return applyPatches(raw, patches)
}

/** The pod a core Endpoints address stands for, and its ip. */
function addressPod(src: Buffer, span: Span, input: LocalEndpointsInput): { pod: LocalPod; ip: string } | undefined {
  let ref: TargetRef | undefined
  let nodeName = ''
  let ip = ''
  const a = new FieldReader(src, span.start, span.end)
  while (a.next()) {
    if (a.field === 1) ip = a.string()
    else if (a.field === 2) ref = mergeRef(ref, src, a)
    else if (a.field === 4) nodeName = a.string()
  }
  const pod = podOf(ref, nodeName || undefined, input)
  return pod && { pod, ip }
}

/** One subset: undefined unchanged, null emptied by the filter (dropped), else its patches. */
function filterSubset(raw: Buffer, subset: Span, input: LocalEndpointsInput): Patches | null | undefined {
  expectLen(subset)
  const spans = spansOf(raw, subset.start, subset.end)
  const patches = new Patches(spans)
  const moved: [Emit[], Emit[]] = [[], []] // into addresses (1), into notReadyAddresses (2)
  const last = [-1, -1]
  let left = 0
  let removed = false
  spans.forEach((s, i) => {
    if (s.field !== 1 && s.field !== 2) return
    expectLen(s)
    last[s.field - 1] = i
    left++
    const found = addressPod(raw, s, input)
    const d = found && decideAddress(found.pod, found.ip, input)
    if (!d) {
      if (d === null) {
        patches.byIndex[i] = null
        removed = true
        left--
      }
      return
    }
    const address = new Patches(spansOf(raw, s.start, s.end))
    address.set(raw, 1, stringField(1, d.ip))
    const field = d.ready ? 1 : 2
    if (field === s.field) return patches.nest(raw, i, address)
    patches.byIndex[i] = null
    moved[field - 1].push(edit => {
      const h = edit.open(field)
      address.emit(raw, s.start, s.end)(edit)
      edit.close(h)
    })
  })
  if (removed && left === 0) return null
  // an address that changes list goes to the end of the other one: after its last occurrence, or
  // where it would be in field order when it has none
  for (const field of [1, 2]) {
    const emits = moved[field - 1]
    if (emits.length === 0) continue
    const all: Emit = edit => emits.forEach(emit => emit(edit))
    const at = last[field - 1]
    if (at === -1) {
      patches.inserts.push({ field, emit: all })
      continue
    }
    const own = patches.byIndex[at]
    const span = spans[at]
    patches.byIndex[at] = edit => {
      if (own === undefined) edit.copy(span.tagStart, span.next)
      else if (own !== null) own(edit)
      all(edit)
    }
  }
  return patches.changed ? patches : undefined
}

function filterEndpoints(raw: Buffer, input: LocalEndpointsInput): Buffer {
  const spans = spansOf(raw)
  const patches = new Patches(spans)
  spans.forEach((s, i) => {
    if (s.field !== 2) return
    const subset = filterSubset(raw, s, input)
    if (subset === null) patches.byIndex[i] = null
    else if (subset) patches.nest(raw, i, subset)
  })
  return applyPatches(raw, patches)
}

/**
 * raw = an object message (Unknown.raw, no k8s\0 envelope) of apiVersion/kind: an EndpointSlice
 * (v1, v1beta1) or core v1 Endpoints with the overlaid pods' endpoints as they are now. Anything
 * else, and any object the overlay does not change, is the same Buffer. Malformed bytes on the
 * filter's path throw ProtobufError.
 */
export function localEndpointsProtobuf(raw: Buffer, apiVersion: string, kind: string, input: LocalEndpointsInput): Buffer {
  if (input.pods.size === 0 || !mayNameOverlaidPod(raw, input.pods)) return raw
  if (kind === 'EndpointSlice' && (apiVersion === sliceV1 || apiVersion === sliceV1beta1)) return filterSlice(apiVersion === sliceV1beta1, raw, input)
  if (kind === 'Endpoints' && apiVersion === 'v1') return filterEndpoints(raw, input)
  return raw
}
