// The shape every object filter of YurtHub's family has here (masterservice, serviceenvupdater,
// forwardkubesvctraffic, discardcloudservice, nodeportisolation, inclusterconfig): a pure function of
// one object and a context, once over decoded JSON and once over the raw protobuf object message.
// Neither ever mutates its input: JSON results share every untouched part with the input, protobuf
// results copy the bytes of every untouched field.

import { isObjectAt, memberRanges, stringAt } from '../lib/codec/json-scan.ts'

export interface HubAddress {
  /** the hub's HTTPS address that pods should use */
  host: string
  port: number
}

export interface FilterContext {
  hub: HubAddress
  /** this node's pool, '' when unknown */
  nodePool: string
  /**
   * Told why an object a filter targets was left as it is (forwardkubesvctraffic: the slice's address
   * family is not the hub's; any filter: the hub address is unusable). The caller logs each reason once.
   */
  warn?(filter: string, reason: string): void
}

export interface ObjectFilter {
  name: string
  /** the kinds it reads: apiVersion + kind */
  kinds: { apiVersion: string; kind: string }[]
  /**
   * A decoded JSON object (list items carry no kind: the caller passes it): the same reference when
   * unchanged, a new object when changed (the input is never mutated), null when dropped. Any shape
   * the filter does not understand passes unchanged; it never throws.
   */
  json(object: unknown, kind: string, context: FilterContext): unknown | null
  /**
   * The raw protobuf object message (runtime.Unknown.raw): the same Buffer when unchanged, a new
   * Buffer when changed (every byte of untouched fields kept, lengths rebuilt), null when dropped.
   * Malformed bytes on the filter's path throw ProtobufError (lib/codec/wire.ts), which the caller
   * catches (passing the object unfiltered); it throws nothing else.
   */
  protobuf(raw: Buffer, kind: string, context: FilterContext): Buffer | null
  /** whether it ever drops an object (json or protobuf returns null): a watch's re-filter may then not assume its client has an object it has not filtered yet */
  drops: boolean
  /** the one object (namespace/name) the filter can change, when there is one: every other passes as it is, unread */
  only?: { namespace: string; name: string }
}

export type Json = Record<string, unknown>

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

/** A string field, or '' when absent or not a string (Go's zero value). */
export const str = (v: unknown): string => (typeof v === 'string' ? v : '')

/**
 * Whether a decoded object is of one of the filter's kinds: its own kind and apiVersion when it
 * carries them, else the kind the caller names (list items carry none).
 */
export function isKindOf(object: Json, kind: string, kinds: ObjectFilter['kinds']): boolean {
  const own = typeof object.kind === 'string' && object.kind !== '' ? object.kind : kind
  const apiVersion = typeof object.apiVersion === 'string' && object.apiVersion !== '' ? object.apiVersion : undefined
  return kinds.some(k => k.kind === own && (apiVersion === undefined || k.apiVersion === apiVersion))
}

/** Whether the protobuf kind the caller names is one of the filter's. */
export const hasKind = (kind: string, kinds: ObjectFilter['kinds']): boolean => kinds.some(k => k.kind === kind)

/** namespace/name of a decoded object ('' for what is missing or not a string). */
export function namespacedName(object: Json): { namespace: string; name: string } {
  const metadata = isObject(object.metadata) ? object.metadata : {}
  return { namespace: str(metadata.namespace), name: str(metadata.name) }
}

/** An annotation of a decoded object; undefined when absent (or not a string: a shape the filters ignore). */
export function annotationOf(object: Json, key: string): string | undefined {
  const metadata = isObject(object.metadata) ? object.metadata : undefined
  const annotations = metadata && isObject(metadata.annotations) ? metadata.annotations : undefined
  const value = annotations && Object.hasOwn(annotations, key) ? annotations[key] : undefined
  return typeof value === 'string' ? value : undefined
}

/**
 * Whether the hub address can be written into objects (a non-empty host, a TCP port 1..65535); when
 * it cannot, the filters that write it leave objects as they are and say so through context.warn
 * (the same reason each time: the caller logs it once).
 */
export function usableHub(filter: string, context: FilterContext): boolean {
  const hub = isObject(context.hub) ? context.hub : undefined
  const ok = hub !== undefined && typeof hub.host === 'string' && hub.host !== '' && Number.isInteger(hub.port) && hub.port >= 1 && hub.port <= 65535
  if (!ok) context.warn?.(filter, `hub address ${JSON.stringify(context.hub)} is not usable: objects left unchanged`)
  return ok
}

/** `ports` with the first port named `name` set to `port`; undefined when there is none or it already has it. */
export function withNamedPort(ports: unknown, name: string, port: number): unknown[] | undefined {
  if (!Array.isArray(ports)) return undefined
  const i = ports.findIndex(p => isObject(p) && p.name === name)
  if (i === -1 || (ports[i] as Json).port === port) return undefined
  const copy = [...ports]
  copy[i] = { ...(ports[i] as Json), port }
  return copy
}

const metadataMember = ['metadata']
const nameMembers = ['namespace', 'name']

/** Whether an object's JSON bytes name namespace/name (read without a parse; malformed JSON throws). */
export function isNamed(raw: Buffer, want: { namespace: string; name: string }): boolean {
  const meta = memberRanges(raw, metadataMember).get('metadata')
  if (!isObjectAt(raw, meta)) return want.namespace === '' && want.name === ''
  const names = memberRanges(raw, nameMembers, meta.start, meta.end)
  return (stringAt(raw, names.get('namespace')) ?? '') === want.namespace && (stringAt(raw, names.get('name')) ?? '') === want.name
}
