// A cached object in the other wire format, for the kinds the hub knows field by field
// (lib/codec/typed.ts): the JSON the apiserver would have sent for a protobuf object kube-proxy
// cached, or the protobuf for a JSON one. Anything else cannot be translated: the caller says so.
import type { CachedObject } from './types.ts'
import { decodeObject, encodeObject, isTypedKind } from '../codec/typed.ts'
import type { WireFormat } from '../api/wire-format.ts'

export function canTranslate(object: Pick<CachedObject, 'apiVersion' | 'kind'>): boolean {
  return isTypedKind(object.apiVersion, object.kind)
}

/** The object's body in `format` (JSON text, or the raw protobuf object message); throws when it cannot be. */
export function bodyIn(object: CachedObject, format: WireFormat): Buffer {
  if (object.format === format) return object.body
  if (!canTranslate(object)) throw new Error(`${object.kind} (${object.apiVersion}) is cached as ${object.format} and the hub does not know it field by field`)
  if (format === 'json') return Buffer.from(JSON.stringify(decodeObject(object.body, object.apiVersion, object.kind)))
  return encodeObject(JSON.parse(object.body.toString()), object.apiVersion, object.kind)
}

/** The object decoded as JSON (for Tables and /debug/cache); undefined when it cannot be. */
export function asJson(object: CachedObject): Record<string, unknown> | undefined {
  try {
    return JSON.parse(bodyIn(object, 'json').toString()) as Record<string, unknown>
  } catch {
    return undefined
  }
}
