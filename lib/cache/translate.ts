// A cached object in the other wire format, for the kinds the hub knows field by field
// (lib/codec/typed.ts): the JSON the apiserver would have sent for a protobuf object kube-proxy
// cached, or the protobuf for a JSON one. Anything else cannot be translated, and neither can an
// object holding a field the schema does not know (one from a newer apiserver): the translation
// would be the object with that field missing, which the hub never sends. The caller says why.
import type { CachedObject } from './types.ts'
import { decodeObject, encodeObject, isTypedKind } from '../codec/typed.ts'
import type { WireFormat } from '../api/wire-format.ts'

/** Why an object cannot be given in the other format; offline answers turn it into a 503 that says so. */
export class UntranslatableError extends Error {}

/** unknown fields named in the error, at most */
const namedUnknown = 8

export function canTranslate(object: Pick<CachedObject, 'apiVersion' | 'kind'>): boolean {
  return isTypedKind(object.apiVersion, object.kind)
}

const nameOf = (object: CachedObject) => `${object.kind} ${object.namespace ? `${object.namespace}/` : ''}${object.name}`

/** The object's body in `format` (JSON text, or the raw protobuf object message); throws UntranslatableError when it cannot be whole. */
export function bodyIn(object: CachedObject, format: WireFormat): Buffer {
  if (object.format === format) return object.body
  if (!canTranslate(object))
    throw new UntranslatableError(`${object.kind} (${object.apiVersion}) is cached as ${object.format} and the hub does not know it field by field`)
  if (format === 'json') {
    const unknown: string[] = []
    const json = decodeObject(object.body, object.apiVersion, object.kind, {
      onUnknownField: (message, field) => void (unknown.length < namedUnknown && unknown.push(`${message} field ${field}`)),
    })
    if (unknown.length > 0)
      throw new UntranslatableError(
        `${nameOf(object)} is cached as protobuf with fields the hub's schema does not know (${unknown.join(', ')}): the apiserver is newer than the hub's schema, and the hub never gives an object with fields missing`,
      )
    return Buffer.from(JSON.stringify(json))
  }
  try {
    return encodeObject(JSON.parse(object.body.toString()), object.apiVersion, object.kind)
  } catch (error) {
    throw new UntranslatableError(`${nameOf(object)} is cached as JSON the hub cannot give as protobuf whole: ${(error as Error).message}`)
  }
}

/**
 * The object as JSON for the hub's own reading (field-selector values, kubelet's pod for the overlay,
 * Table columns, /debug/cache): fields the schema does not know are left out, which is why this
 * is never what a client is sent whole (bodyIn is). undefined when it cannot be decoded.
 */
export function asJson(object: CachedObject): Record<string, unknown> | undefined {
  try {
    if (object.format === 'protobuf' && canTranslate(object)) return decodeObject(object.body, object.apiVersion, object.kind)
    return JSON.parse(bodyIn(object, 'json').toString()) as Record<string, unknown>
  } catch {
    return undefined
  }
}
