// Protobuf on the wire, as kube-apiserver v1.24 writes and reads it, for the kinds the typed codec
// (lib/codec/typed.ts) knows: response bodies (`k8s\0` + runtime.Unknown), watch frames (4-byte
// big-endian length + WatchEvent), error Statuses for clients that asked for protobuf, and protobuf
// request bodies. Which answers are protobuf is decided by negotiate() in render.ts; the handlers
// and WatchStream call in here only to write (or read) the bytes.
//
// A stored object may hold a field the codec's schema does not know (the simulator keeps whatever
// JSON it was given; a real apiserver drops unknown fields when it decodes a write). Protobuf
// answers leave such fields out, as the real one would never have stored them; JSON answers keep them.

import type { IncomingMessage, ServerResponse } from 'node:http'
import { decodeUnknown, encodeWatchEvent } from '../../lib/codec/protobuf.ts'
import { ProtobufError, SchemaError, decodeBody, encodeBody } from '../../lib/codec/typed.ts'
import { failure, type Status } from '../../lib/api/status.ts'
import { ApiError, badRequest } from './errors.ts'
import { sendBytes, sendJSON } from './handlers.ts'
import { decodeCsr } from './csr-protobuf.ts'
import { servesProtobuf, statusFormat, type Output } from './render.ts'
import type { ResourceEntry } from './resources.ts'

export const protobufType = 'application/vnd.kubernetes.protobuf'
export const protobufWatchType = 'application/vnd.kubernetes.protobuf;stream=watch'

export function isProtobufOutput(output: Output): boolean {
  return output.kind !== 'table' && output.protobuf === true
}

type PathStep = string | number

/** A SchemaError path (`spec.ports[0].foo`, `metadata.labels["a.b"]`, `items[3].x`) as steps; undefined if unreadable. */
function parsePath(path: string): PathStep[] | undefined {
  const step = /\.?([^.[\]"]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y
  const out: PathStep[] = []
  while (step.lastIndex < path.length) {
    const m = step.exec(path)
    if (!m) return undefined
    out.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : (JSON.parse(m[3]) as string)))
  }
  return out
}

/** Removes the value at `path` (an array element becomes null: the zero value); false when it is not there. */
function removeAt(root: any, path: PathStep[]): boolean {
  let parent = root
  for (const s of path.slice(0, -1)) {
    parent = parent?.[s]
    if (parent === null || typeof parent !== 'object') return false
  }
  const last = path[path.length - 1]
  if (typeof last === 'number') {
    if (!Array.isArray(parent) || last >= parent.length) return false
    parent[last] = null
  } else {
    if (Array.isArray(parent) || !Object.hasOwn(parent, last)) return false
    delete parent[last]
  }
  return true
}

/**
 * The protobuf body for a JSON object or list (encodeBody), leaving out the fields the schema
 * refuses (their paths are in `dropped`). Throws SchemaError when the object as a whole cannot be
 * encoded (no apiVersion or kind, a kind the codec does not know).
 */
export function encodeLenient(obj: unknown): { body: Buffer; dropped: string[] } {
  const dropped: string[] = []
  let copy: unknown
  for (;;) {
    try {
      return { body: encodeBody(copy ?? obj), dropped }
    } catch (err) {
      if (!(err instanceof SchemaError) || dropped.length >= 1000) throw err
      const path = parsePath(err.path)
      copy ??= structuredClone(obj)
      if (!path || path.length === 0 || !removeAt(copy, path)) throw err
      dropped.push(err.path)
    }
  }
}

/** Writes a protobuf body as SerializeObject does. */
export function sendProtobuf(req: IncomingMessage, res: ServerResponse, code: number, body: Buffer): void {
  sendBytes(req, res, code, protobufType, body)
}

/** A response body (an object or list as render.ts made it) in the negotiated format. */
export function sendOutput(req: IncomingMessage, res: ServerResponse, code: number, body: unknown, output: Output): void {
  if (isProtobufOutput(output)) sendProtobuf(req, res, code, encodeLenient(body).body)
  else sendJSON(req, res, code, body)
}

/** An error Status, in protobuf when the client's Accept negotiates it (ErrorNegotiated); false when it was not sent. */
export function sendProtobufStatus(req: IncomingMessage, res: ServerResponse, status: Status): boolean {
  if (statusFormat(req.headers.accept) !== 'protobuf') return false
  sendProtobuf(req, res, status.code, encodeLenient(status).body)
  return true
}

/** The Content-Type of a watch response in this format. */
export function watchContentType(output: Output): string {
  return isProtobufOutput(output) ? protobufWatchType : 'application/json'
}

/**
 * One watch event `{type, object}` as written on the stream: a protobuf frame, or a line of JSON.
 * An object that cannot be encoded at all becomes an ERROR event with a 500 Status (never a throw:
 * events are written from inside the store's writes).
 */
export function watchEventBytes(event: unknown, output: Output): Buffer | string {
  if (!isProtobufOutput(output)) return JSON.stringify(event) + '\n'
  const { type, object } = event as { type: string; object: unknown }
  try {
    return encodeWatchEvent(type, encodeLenient(object).body)
  } catch (err) {
    return encodeWatchEvent(
      'ERROR',
      encodeBody(failure(500, `Internal error occurred: unable to encode watch object: ${(err as Error).message}`, 'InternalError')),
    )
  }
}

const unsupported = () =>
  ApiError.of(
    415,
    'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml',
    'UnsupportedMediaType',
  )

/** Go's summarizeData: the first bytes of a body, hex, for a decode error. */
function summary(body: Buffer): string {
  return body.length <= 30 ? body.toString('hex') : `${body.subarray(0, 30).toString('hex')} ...`
}

/**
 * A create/update body sent as protobuf (`kubectl create configmap`, kubelet's Lease renewals): the
 * JSON the apiserver would have decoded. 415 for resources the codec does not know, 400 when the
 * bytes are not an object of the endpoint's kind.
 */
export function decodeProtobufBody(entry: ResourceEntry, body: Buffer): any {
  if (!servesProtobuf(entry)) throw unsupported()
  let apiVersion: string
  let kind: string
  try {
    ;({ apiVersion, kind } = decodeUnknown(body))
  } catch (err) {
    throw badRequest(`the object provided is unrecognized (must be of type ${entry.kind}): ${(err as Error).message} (${summary(body)})`)
  }
  const version = apiVersion.slice(apiVersion.indexOf('/') + 1)
  const refuse = (why: string) => badRequest(`${kind} in version "${version}" cannot be handled as a ${entry.kind}: ${why}`)
  if (apiVersion !== entry.apiVersion || kind !== entry.kind) throw refuse(`expected ${entry.apiVersion} ${entry.kind}`)
  try {
    return decodeBody(body)
  } catch (err) {
    if (err instanceof ProtobufError || err instanceof SchemaError) throw refuse(err.message)
    throw err
  }
}

/** A CSR's approval as `kubectl certificate approve|deny` sends it (protobuf; the typed codec has no CSR). */
export function decodeCsrApprovalBody(entry: ResourceEntry, body: Buffer): any {
  try {
    const csr = decodeCsr(body)
    if (csr.apiVersion !== entry.apiVersion || csr.kind !== entry.kind) throw new ProtobufError(`expected ${entry.apiVersion} ${entry.kind}`)
    return csr
  } catch (err) {
    if (err instanceof ProtobufError) throw badRequest(`the object provided is unrecognized (must be of type ${entry.kind}): ${err.message} (${summary(body)})`)
    throw err
  }
}
