// What a response body looks like for the representation the client asked for in Accept:
// plain JSON, a Table (kubectl), or PartialObjectMetadata(List) (metadata informers).
// The simulator speaks JSON only: a protobuf-only Accept gets 406.

import { sortKeys } from './objects.ts'
import type { ResourceEntry } from './resources.ts'
import { toTable, type IncludeObject } from './table.ts'
import type { ListResult } from './cluster.ts'

export type Output = { kind: 'json' } | { kind: 'partial' } | { kind: 'table'; include: IncludeObject }

interface MediaRange {
  type: string
  params: Record<string, string>
}

function parseAccept(accept: string): MediaRange[] {
  const out: MediaRange[] = []
  for (const part of accept.split(',')) {
    const [type, ...params] = part.split(';').map(s => s.trim())
    if (!type) continue
    const p: Record<string, string> = {}
    for (const kv of params) {
      const eq = kv.indexOf('=')
      if (eq > 0) p[kv.slice(0, eq).trim().toLowerCase()] = kv.slice(eq + 1).trim().replace(/^"|"$/g, '')
    }
    if (p.q !== undefined && Number(p.q) === 0) continue
    out.push({ type: type.toLowerCase(), params: p })
  }
  return out
}

/**
 * The representation to answer with, or undefined for 406. `target` is what the request returns:
 * one object (get, create, …, and each watch event) or a list.
 */
export function negotiate(accept: string | undefined, target: 'object' | 'list' | 'watch', includeObject?: string | null): Output | undefined {
  if (!accept || accept.trim() === '') return { kind: 'json' }
  for (const range of parseAccept(accept)) {
    if (range.type !== 'application/json' && range.type !== 'application/*' && range.type !== '*/*') continue
    const as = range.params.as
    if (!as) return { kind: 'json' }
    if (range.params.g !== 'meta.k8s.io' || (range.params.v !== 'v1' && range.params.v !== 'v1beta1')) continue
    if (as === 'Table') {
      const include = includeObject === 'None' || includeObject === 'Object' ? includeObject : 'Metadata'
      return { kind: 'table', include }
    }
    if (as === 'PartialObjectMetadata' && target !== 'list') return { kind: 'partial' }
    if (as === 'PartialObjectMetadataList' && target !== 'object') return { kind: 'partial' }
  }
  return undefined
}

export const notAcceptableMessage = 'only the following media types are accepted: application/json'

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
  if (output.kind === 'partial') return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: rv, creationTimestamp: null } }
  if (output.kind === 'table') return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: rv }, columnDefinitions: [], rows: [] }
  if (entry.custom) return { apiVersion: entry.apiVersion, kind: entry.kind, metadata: { resourceVersion: rv } }
  return { kind: entry.kind, apiVersion: entry.apiVersion, metadata: { resourceVersion: rv, creationTimestamp: null }, ...structuredClone(entry.bookmarkZero) }
}
