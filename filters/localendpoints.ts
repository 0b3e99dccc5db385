// The localendpoints filter over decoded JSON (and a byte check that spares the parse): the node's own
// endpoints shown as the EndpointSlice and Endpoints controllers would have written them had they
// seen the pods' status kubelet wrote while the cloud was away (lib/overlay/types.ts). Endpoints of
// other nodes, and of pods the overlay does not know, are left as the cloud last said. Pure: the
// input is never mutated; untouched parts are shared, and an object with no change is the input.
//
// The decisions (which endpoint is whose, what becomes of it) are exported for the protobuf form
// (./localendpoints-protobuf.ts), so both wire formats decide alike.

import { isIP } from 'node:net'
import type { LocalEndpointsInput, LocalPod } from './local-pod.ts'
import { kindOf } from './servicetopology.ts'
import type { EndpointsKind } from './servicetopology.ts'
import { hostnameKey } from './topology.ts'

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** An endpoint's targetRef, as far as telling its pod goes ('' or undefined: absent). */
export interface TargetRef {
  kind?: string
  namespace?: string
  name?: string
  uid?: string
}

/**
 * The overlaid pod an endpoint stands for: its targetRef names a Pod (or no kind) of the overlay by
 * namespace/name, with the same uid when it names one (another uid is an older pod of that name),
 * on this node or on no node. Anything else is not the hub's to correct.
 */
export function podOf(ref: TargetRef | undefined, node: string | undefined, input: LocalEndpointsInput): LocalPod | undefined {
  if (!ref || !ref.name || !ref.namespace || (ref.kind && ref.kind !== 'Pod')) return undefined
  const pod = input.pods.get(`${ref.namespace}/${ref.name}`)
  if (!pod) return undefined
  if (ref.uid && ref.uid !== pod.uid) return undefined
  if (node && node !== input.nodeName) return undefined
  return pod
}

/** The pod's address of an IP family (4 or 6), if it has one. */
export function ipOfFamily(pod: LocalPod, family: number): string | undefined {
  return pod.ips.find(ip => isIP(ip) === family)
}

const familyOfType = (addressType: string): number => (addressType === 'IPv4' ? 4 : addressType === 'IPv6' ? 6 : 0)

/**
 * What becomes of a slice endpoint of an overlaid pod: null removed (the pod is gone, or has no
 * address of the slice's family, which the controller would not have listed), undefined left alone
 * (FQDN slices name no pod address), else the one address it shows. The overlay is told what the
 * endpoint said first.
 */
export function decideSliceEndpoint(pod: LocalPod, addressType: string, addresses: readonly string[], input: LocalEndpointsInput): string | null | undefined {
  if (addressType !== 'IPv4' && addressType !== 'IPv6' && addressType !== 'FQDN') return undefined
  input.observed?.(pod, addressType, addresses)
  if (pod.gone) return null
  if (addressType === 'FQDN') return undefined
  return ipOfFamily(pod, familyOfType(addressType)) ?? null
}

/**
 * What becomes of a core Endpoints address of an overlaid pod: null removed, undefined left alone
 * (an ip that is no IP), else its ip and whether it is ready. A terminating pod is removed, as the
 * Endpoints controller leaves out pods being deleted (endpointutil.ShouldPodBeInEndpoints; only a
 * Service with publishNotReadyAddresses keeps them, which the hub cannot see from here).
 */
export function decideAddress(pod: LocalPod, ip: string, input: LocalEndpointsInput): { ip: string; ready: boolean } | null | undefined {
  const family = isIP(ip)
  if (family === 0) return undefined
  input.observed?.(pod, family === 4 ? 'IPv4' : 'IPv6', [ip])
  if (pod.gone || pod.terminating) return null
  const now = ipOfFamily(pod, family)
  return now === undefined ? null : { ip: now, ready: pod.ready }
}

function refOf(v: unknown): TargetRef | undefined {
  if (!isObject(v)) return undefined
  return { kind: str(v.kind), namespace: str(v.namespace), name: str(v.name), uid: str(v.uid) }
}

/** v1: nodeName; v1beta1: nodeName, or topology's hostname for objects written before nodeName existed. */
function sliceNode(endpoint: Json): string | undefined {
  return str(endpoint.nodeName) ?? (isObject(endpoint.topology) ? str(endpoint.topology[hostnameKey]) : undefined)
}

function showsExactly(endpoint: Json, address: string, pod: LocalPod): boolean {
  const a = endpoint.addresses
  const c = endpoint.conditions
  if (!Array.isArray(a) || a.length !== 1 || a[0] !== address || !isObject(c) || Object.keys(c).length !== 3) return false
  return c.ready === pod.ready && c.serving === pod.serving && c.terminating === pod.terminating
}

/** The endpoint with its addresses and conditions set, in the apiserver's key order (addresses, conditions, the rest). */
function withAddress(endpoint: Json, address: string, pod: LocalPod): Json {
  const addresses = [address]
  const conditions = { ready: pod.ready, serving: pod.serving, terminating: pod.terminating }
  const out: Json = {}
  if (!('addresses' in endpoint)) out.addresses = addresses
  if (!('addresses' in endpoint) && !('conditions' in endpoint)) out.conditions = conditions
  for (const key of Object.keys(endpoint)) {
    if (key === 'addresses') {
      out.addresses = addresses
      if (!('conditions' in endpoint)) out.conditions = conditions
    } else if (key === 'conditions') out.conditions = conditions
    else out[key] = endpoint[key]
  }
  return out
}

function filterSlice(object: Json, input: LocalEndpointsInput): Json | undefined {
  if (!Array.isArray(object.endpoints)) return undefined
  const addressType = typeof object.addressType === 'string' ? object.addressType : ''
  let changed = false
  const out: unknown[] = []
  for (const endpoint of object.endpoints as unknown[]) {
    const pod = isObject(endpoint) ? podOf(refOf(endpoint.targetRef), sliceNode(endpoint), input) : undefined
    if (!pod) {
      out.push(endpoint)
      continue
    }
    const e = endpoint as Json
    const addresses = list(e.addresses).filter((a): a is string => typeof a === 'string')
    const address = decideSliceEndpoint(pod, addressType, addresses, input)
    if (address === undefined || (address !== null && showsExactly(e, address, pod))) out.push(endpoint)
    else {
      changed = true
      if (address !== null) out.push(withAddress(e, address, pod))
    }
  }
  return changed ? { ...object, endpoints: out } : undefined
}

/** One subset: undefined unchanged, null emptied (dropped), else the new subset. */
function filterSubset(subset: unknown, input: LocalEndpointsInput): Json | null | undefined {
  if (!isObject(subset)) return undefined
  let changed = false
  const lists: [unknown[], unknown[]] = [[], []] // ready, not ready
  const moved: [unknown[], unknown[]] = [[], []]
  const walk = (addresses: unknown, wasReady: boolean): void => {
    for (const address of list(addresses)) {
      const pod = isObject(address) ? podOf(refOf(address.targetRef), str(address.nodeName), input) : undefined
      const ip = pod && typeof (address as Json).ip === 'string' ? ((address as Json).ip as string) : undefined
      const d = pod && ip !== undefined ? decideAddress(pod, ip, input) : undefined
      if (d === undefined) {
        lists[wasReady ? 0 : 1].push(address)
        continue
      }
      if (d === null) {
        changed = true
        continue
      }
      const next = d.ip === ip ? address : { ...(address as Json), ip: d.ip }
      if (next !== address) changed = true
      if (d.ready === wasReady) lists[wasReady ? 0 : 1].push(next)
      else {
        changed = true
        moved[d.ready ? 0 : 1].push(next) // to the end of the other list
      }
    }
  }
  walk(subset.addresses, true)
  walk(subset.notReadyAddresses, false)
  if (!changed) return undefined
  const ready = [...lists[0], ...moved[0]]
  const notReady = [...lists[1], ...moved[1]]
  if (ready.length === 0 && notReady.length === 0) return null
  const out: Json = {}
  // the apiserver's key order: addresses, notReadyAddresses, ports (a list that appears is put in its place)
  if (ready.length > 0) out.addresses = ready
  if (notReady.length > 0) out.notReadyAddresses = notReady
  for (const key of Object.keys(subset)) if (key !== 'addresses' && key !== 'notReadyAddresses') out[key] = subset[key]
  return out
}

function filterEndpoints(object: Json, input: LocalEndpointsInput): Json | undefined {
  if (!Array.isArray(object.subsets)) return undefined
  let changed = false
  const out: unknown[] = []
  for (const subset of object.subsets as unknown[]) {
    const next = filterSubset(subset, input)
    if (next === undefined) out.push(subset)
    else {
      changed = true
      if (next !== null) out.push(next)
    }
  }
  if (!changed) return undefined
  const result: Json = { ...object }
  if (out.length > 0) result.subsets = out
  else delete result.subsets
  return result
}

/**
 * An EndpointSlice (discovery.k8s.io v1 or v1beta1) or core v1 Endpoints with the overlaid pods'
 * endpoints as they are now; `kind` names list items, which carry none. Anything else, and any
 * object the overlay does not change, is returned as it is (same reference).
 */
export function localEndpointsObject<T>(object: T, input: LocalEndpointsInput, kind?: EndpointsKind): T {
  if (input.pods.size === 0 || !isObject(object)) return object
  const k = kindOf(object, kind)
  const out = k === 'EndpointSlice' ? filterSlice(object, input) : k === 'Endpoints' ? filterEndpoints(object, input) : undefined
  return out === undefined ? object : (out as T)
}

// ---------------------------------------------------------------------------------------------
// The byte check: an endpoint concerns an overlaid pod only if its targetRef names the pod, so bytes
// in which no "name" member holds an overlaid pod's name pass untouched. Most objects of a cluster
// pass this way, without a parse.

/** The overlaid pods' names as bytes, by length: a candidate is compared only with names of its length, byte by byte. */
type Names = Map<number, Buffer[]>
const namesOf = new WeakMap<ReadonlyMap<string, LocalPod>, Names>()

function podNames(pods: ReadonlyMap<string, LocalPod>): Names {
  let names = namesOf.get(pods)
  if (!names) {
    names = new Map()
    for (const p of pods.values()) {
      const bytes = Buffer.from(p.name)
      const same = names.get(bytes.length)
      if (same) same.push(bytes)
      else names.set(bytes.length, [bytes])
    }
    namesOf.set(pods, names)
  }
  return names
}

function isOneOf(raw: Buffer, start: number, end: number, names: Names): boolean {
  const candidates = names.get(end - start)
  if (!candidates) return false
  for (const name of candidates) {
    let i = 0
    while (i < name.length && raw[start + i] === name[i]) i++
    if (i === name.length) return true
  }
  return false
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

/**
 * Whether some "name" member of the JSON text holds one of `names` (or a string with an escape,
 * which is not decoded here: it may). The pattern cannot match inside a string, where quotes are
 * escaped; the apiserver writes member names without escapes.
 */
/**
 * Whether the bytes hold any overlaid pod's name anywhere (a protobuf object's pre-check: an
 * endpoint names its pod in its targetRef, so an object without any of the names needs no decoding).
 */
export function mayNameOverlaidPod(raw: Buffer, pods: ReadonlyMap<string, LocalPod>): boolean {
  for (const same of podNames(pods).values()) for (const name of same) if (raw.includes(name)) return true
  return false
}

function namesOneOf(raw: Buffer, names: Names): boolean {
  const last = raw.length - 6
  for (let at = 0; at < last; at++) {
    // "name" (a JS loop: cheaper than a native search per member on objects of a few kB)
    if (raw[at] !== 0x22 || raw[at + 1] !== 0x6e || raw[at + 2] !== 0x61 || raw[at + 3] !== 0x6d || raw[at + 4] !== 0x65 || raw[at + 5] !== 0x22) continue
    let p = at + 6
    while (p < raw.length && isSpace(raw[p])) p++
    if (raw[p] === 0x3a) {
      p++
      while (p < raw.length && isSpace(raw[p])) p++
      if (raw[p] === 0x22) {
        const start = p + 1
        let end = start
        while (end < raw.length && raw[end] !== 0x22 && raw[end] !== 0x5c) end++
        if (end >= raw.length || raw[end] === 0x5c) return true
        if (isOneOf(raw, start, end, names)) return true
        p = end
      }
    }
    at = p
  }
  return false
}

/**
 * localEndpointsObject over JSON bytes: the same Buffer when the object cannot concern an overlaid
 * pod (no overlay, or no "name" in it names an overlaid pod: a byte search, no parse), undefined
 * when it must be parsed (the chain then calls localEndpointsObject).
 */
export function localEndpointsJsonBytes(raw: Buffer, input: LocalEndpointsInput, kind?: EndpointsKind): Buffer | undefined {
  void kind // the parse decides the kind; bytes that name no overlaid pod pass whatever it is
  if (input.pods.size === 0) return raw
  return namesOneOf(raw, podNames(input.pods)) ? undefined : raw
}
