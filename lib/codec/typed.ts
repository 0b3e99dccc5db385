// JSON <-> protobuf for the built-in kinds in schema.ts, field by field. The hub stores what the
// apiserver sent; when it must answer in the other format (JSON to a client while it only holds
// protobuf, or a simulator that speaks protobuf) this writes what the apiserver would have written:
// protobuf as gogo-protobuf marshals it (field-number order, non-pointer fields always, pointers when
// set, maps sorted by key) and JSON as Go's encoding/json does (omitempty, null for nil slices, maps
// and zero times, keys in Go struct order — so key order matches the apiserver's too, except that a
// JavaScript object lists integer-like keys such as "80" first).
//
// The encoder refuses (SchemaError, naming the path) any JSON field the schema does not know, so a
// caller can fall back instead of losing data. The decoder skips protobuf fields it does not know
// (as Go does; DecodeOptions.onUnknownField tells of them) and reports malformed bytes as
// ProtobufError. Integers beyond 2^53 lose precision (as in JSON.parse).
// This file is the front door: bodies, lists, watch frames. typed-encode.ts and typed-decode.ts walk
// the schema; typed-values.ts converts times, quantities and bytes.
import { decodeUnknown, decodeWatchEvent, encodeUnknown, encodeWatchEvent } from './protobuf.ts'
import { kindSpec, listItemKind } from './schema.ts'
import { type DecodeOptions, decodeList, decodeObject } from './typed-decode.ts'
import { type JsonObject, SchemaError, encodeList, encodeObject } from './typed-encode.ts'
import { ProtobufError } from './wire.ts'

export { ProtobufError } from './wire.ts'
export { type JsonObject, SchemaError, encodeList, encodeObject } from './typed-encode.ts'
export { type DecodeOptions, decodeList, decodeObject } from './typed-decode.ts'

/** True when the codec knows this kind (or the list of a kind it knows) field by field. */
export function isTypedKind(apiVersion: string, kind: string): boolean {
  return kindSpec(apiVersion, kind) !== undefined || listItemKind(apiVersion, kind) !== undefined
}

/** `k8s\0` + runtime.Unknown for a JSON object or list of a known kind: the apiserver's protobuf body. */
export function encodeBody(obj: unknown): Buffer {
  const { apiVersion, kind } = (typeof obj === 'object' && obj !== null ? obj : {}) as JsonObject
  if (typeof apiVersion !== 'string' || typeof kind !== 'string' || Array.isArray(obj)) {
    throw new SchemaError('', 'a JSON object with apiVersion and kind is needed')
  }
  const raw = kindSpec(apiVersion, kind) ? encodeObject(obj) : encodeList(obj)
  return encodeUnknown({ apiVersion, kind, raw })
}

/** A protobuf watch frame (length prefix included) for a JSON watch event `{type, object}`. */
export function encodeWatchFrame(event: { type: string; object: unknown }): Buffer {
  return encodeWatchEvent(event.type, encodeBody(event.object))
}

/** The JSON for a protobuf body (`k8s\0` + runtime.Unknown) holding an object or list of a known kind. */
export function decodeBody(body: Buffer, options: DecodeOptions = {}): JsonObject {
  const u = decodeUnknown(body)
  if (u.contentEncoding !== '') throw new ProtobufError(`unsupported runtime.Unknown contentEncoding ${u.contentEncoding}`)
  return kindSpec(u.apiVersion, u.kind) ? decodeObject(u.raw, u.apiVersion, u.kind, options) : decodeList(u.raw, u.apiVersion, u.kind, options)
}

/** The JSON watch event `{type, object}` for one protobuf watch frame (length prefix included). */
export function decodeWatchFrame(frame: Buffer, options: DecodeOptions = {}): { type: string; object: JsonObject } {
  const event = decodeWatchEvent(frame)
  return { type: event.type, object: decodeBody(event.object, options) }
}
