// What a response body looks like for the representation the client asked for in Accept:
// the object itself (JSON, or protobuf for the kinds the typed codec knows), a Table (kubectl, JSON
// only), or PartialObjectMetadata(List) (metadata informers; JSON or protobuf). Negotiation follows
// the apiserver's (k8s.io/apiserver endpoints/handlers/negotiation): Accept clauses in goautoneg's
// order, each tried against the serializers JSON, YAML, protobuf in that order. YAML is never chosen
// (the simulator does not write it); protobuf is what protobuf.ts encodes.

import { isTypedKind } from '../../lib/codec/typed.ts'
import { sortKeys } from './objects.ts'
import type { ResourceEntry } from './resources.ts'
import { toTable, type IncludeObject } from './table.ts'
import type { ListResult } from './cluster.ts'

/** `protobuf`: encode the body with the typed codec (protobuf.ts) instead of JSON. */
export type Output = { kind: 'json'; protobuf?: boolean } | { kind: 'partial'; protobuf?: boolean } | { kind: 'table'; include: IncludeObject }

interface Clause {
  type: string
  subtype: string
  params: Record<string, string>
  q: number
}

/** goautoneg.ParseAccept: clauses sorted by q, then specific types before wildcards (Go 1.18's sort.Sort, unstable as it is). */
function parseAccept(accept: string): Clause[] {
  const out: Clause[] = []
  for (const part of accept.split(',')) {
    const [range, ...params] = part.split(';').map(s => s.trim())
    const slash = range.split('/').map(s => s.trim().toLowerCase())
    let clause: Clause
    if (slash.length === 1 && slash[0] === '*') clause = { type: '*', subtype: '*', params: {}, q: 1 }
    else if (slash.length === 2) clause = { type: slash[0], subtype: slash[1], params: {}, q: 1 }
    else continue
    for (const kv of params) {
      const eq = kv.indexOf('=')
      if (eq <= 0) continue
      const key = kv.slice(0, eq).trim()
      const value = kv
        .slice(eq + 1)
        .trim()
        .replace(/^"|"$/g, '')
      if (key === 'q') clause.q = Number.parseFloat(value) || 0
      else clause.params[key] = value
    }
    if (clause.q <= 0) continue // q=0: not acceptable (goautoneg keeps it; no client sends it)
    out.push(clause)
  }
  const less = (a: Clause, b: Clause) => a.q > b.q || (a.type !== '*' && b.type === '*') || (a.subtype !== '*' && b.subtype === '*')
  const swap = (i: number, j: number) => ([out[i], out[j]] = [out[j], out[i]])
  // sort.Sort on fewer than 13 elements: one shell pass with gap 6, then insertion sort
  for (let i = 6; i < out.length; i++) if (less(out[i], out[i - 6])) swap(i, i - 6)
  for (let i = 1; i < out.length; i++) for (let j = i; j > 0 && less(out[j], out[j - 1]); j--) swap(j, j - 1)
  return out
}

const serializers = [
  ['application', 'json'],
  ['application', 'yaml'],
  ['application', 'vnd.kubernetes.protobuf'],
] as const

/** The apiserver answers this resource's own objects in protobuf: a built-in kind the typed codec knows. */
export function servesProtobuf(entry: ResourceEntry | undefined): boolean {
  return entry !== undefined && !entry.custom && isTypedKind(entry.apiVersion, entry.kind)
}

/** acceptMediaTypeOptions + the resource scope's AllowsMediaTypeTransform, for one clause and serializer. */
function accepted(
  params: Record<string, string>,
  subtype: (typeof serializers)[number][1],
  target: 'object' | 'list' | 'watch',
  includeObject: string | null | undefined,
  entry: ResourceEntry | undefined,
): Output | undefined {
  if (subtype === 'yaml') return undefined // the simulator writes no YAML
  if (params.stream !== undefined && params.stream !== '' && params.stream !== 'watch') return undefined
  const protobuf = subtype === 'vnd.kubernetes.protobuf'
  const as = params.as
  if (as === undefined && params.g === undefined && params.v === undefined) {
    if (!protobuf) return { kind: 'json' }
    return servesProtobuf(entry) ? { kind: 'json', protobuf: true } : undefined
  }
  if (params.g !== 'meta.k8s.io' || (params.v !== 'v1' && params.v !== 'v1beta1')) return undefined
  if (as === 'Table') {
    if (protobuf) return undefined // Tables are served in JSON and YAML only
    const include = includeObject === 'None' || includeObject === 'Object' ? includeObject : 'Metadata'
    return { kind: 'table', include }
  }
  // the apiserver accepts either for any request and fails in the transform; here the other is skipped
  const partial: Output = protobuf ? { kind: 'partial', protobuf: true } : { kind: 'partial' }
  if (as === 'PartialObjectMetadata' && target !== 'list') return partial
  if (as === 'PartialObjectMetadataList' && target !== 'object') return partial
  return undefined
}

/**
 * The representation to answer with, or undefined for 406. `target` is what the request returns:
 * one object (get, create, …, and each watch event) or a list. `entry` is the resource (its objects
 * may be protobuf); without it only JSON and PartialObjectMetadata are offered.
 */
export function negotiate(
  accept: string | undefined,
  target: 'object' | 'list' | 'watch',
  includeObject?: string | null,
  entry?: ResourceEntry,
): Output | undefined {
  if (!accept || accept.trim() === '') return { kind: 'json' }
  for (const clause of parseAccept(accept)) {
    for (const [type, subtype] of serializers) {
      const matches = (clause.type === type && (clause.subtype === subtype || clause.subtype === '*')) || (clause.type === '*' && clause.subtype === '*')
      if (!matches) continue
      const output = accepted(clause.params, subtype, target, includeObject, entry)
      if (output) return output
    }
  }
  return undefined
}

/**
 * How an error Status is written (responsewriters.ErrorNegotiated): negotiated with no transforms
 * allowed; when nothing is acceptable the apiserver writes it as raw JSON anyway.
 */
export function statusFormat(accept: string | undefined): 'json' | 'protobuf' {
  if (!accept || accept.trim() === '') return 'json'
  for (const clause of parseAccept(accept)) {
    for (const [type, subtype] of serializers) {
      const matches = (clause.type === type && (clause.subtype === subtype || clause.subtype === '*')) || (clause.type === '*' && clause.subtype === '*')
      const p = clause.params
      if (!matches || p.as !== undefined || p.g !== undefined || p.v !== undefined) continue
      if (p.stream !== undefined && p.stream !== '' && p.stream !== 'watch') continue
      return subtype === 'vnd.kubernetes.protobuf' ? 'protobuf' : 'json' // YAML is answered in JSON
    }
  }
  return 'json'
}

/** The NotAcceptable message of every resource, custom ones included (list-nodepools-pb-refused.*). */
export const notAcceptableMessage = 'only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf'

function partial(obj: any): any {
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata }
}

/** One object (in the requested version, with kind and apiVersion) as the client asked for it. */
export function renderObject(entry: ResourceEntry, obj: any, output: Output): any {
  switch (output.kind) {
    case 'json':
      return entry.custom ? sortKeys(obj) : obj
    case 'partial':
      return partial(obj)
    case 'table':
      return toTable(entry, [obj], {}, output.include)
  }
}

function listMeta(result: ListResult): Record<string, unknown> {
  const meta: Record<string, unknown> = { resourceVersion: result.resourceVersion }
  if (result.continue) meta.continue = result.continue
  if (result.remainingItemCount !== undefined) meta.remainingItemCount = result.remainingItemCount
  return meta
}

export function renderList(entry: ResourceEntry, result: ListResult, output: Output): any {
  switch (output.kind) {
    case 'json':
      if (entry.custom) {
        // unstructured lists: sorted keys, continue always present, items keep kind and apiVersion
        return sortKeys({ apiVersion: entry.apiVersion, kind: entry.listKind, metadata: { continue: '', ...listMeta(result) }, items: result.items })
      }
      return {
        kind: entry.listKind,
        apiVersion: entry.apiVersion,
        metadata: listMeta(result),
        items: result.items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
      }
    case 'partial':
      return { kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: listMeta(result), items: result.items.map(partial) }
    case 'table':
      return toTable(entry, result.items, listMeta(result), output.include)
  }
}

/** A BOOKMARK's object: kind, apiVersion, the resourceVersion, and the zero values Go would encode. */
export function bookmarkObject(entry: ResourceEntry, rv: string, output: Output): any {
  if (output.kind === 'partial')
    return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: rv, creationTimestamp: null } }
  if (output.kind === 'table') return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: rv }, columnDefinitions: [], rows: [] }
  if (entry.custom) return { apiVersion: entry.apiVersion, kind: entry.kind, metadata: { resourceVersion: rv } }
  return { kind: entry.kind, apiVersion: entry.apiVersion, metadata: { resourceVersion: rv, creationTimestamp: null }, ...structuredClone(entry.bookmarkZero) }
}
