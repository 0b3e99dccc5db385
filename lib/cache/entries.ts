// How an object sits in the index: its metadata without the body, the labels the index matches
// selectors on, the scopes it arrived through and the field values they vouched for. Pure helpers
// of the store (store.ts).
import type { CachedObject } from './types.ts'
import type { Entry, StoredMeta } from './collection.ts'
import { objectMeta } from '../codec/protobuf.ts'

export function labelsOf(object: CachedObject): Record<string, string> {
  if (object.labels) return object.labels
  if (object.format === 'protobuf') return objectMeta(object.body).labels
  const document = JSON.parse(object.body.toString()) as { metadata?: { labels?: Record<string, string> } }
  return document.metadata?.labels ?? {}
}

export const same = (a: readonly string[] | undefined, b: readonly string[] | undefined) =>
  (a ?? []).length === (b ?? []).length && (a ?? []).every((x, i) => b![i] === x)
export const sameFields = (a: Record<string, string> | undefined, b: Record<string, string> | undefined) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})

/** What the index keeps: the object without its body and labels (built field by field: a rest spread is slow, and this runs per list item). */
export function stripBody(object: CachedObject): StoredMeta {
  const meta: StoredMeta = {
    apiVersion: object.apiVersion,
    kind: object.kind,
    namespace: object.namespace,
    name: object.name,
    resourceVersion: object.resourceVersion,
    format: object.format,
  }
  if (object.fields) meta.fields = object.fields
  if (object.scopes) meta.scopes = object.scopes
  return meta
}

/** The object as it is stored: with the scopes and field values it is known by, and its labels. */
export function withIndex(
  object: CachedObject,
  scopes: readonly string[] | undefined,
  fields: Record<string, string> | undefined,
  labels: Record<string, string>,
): CachedObject {
  const stored: CachedObject = {
    apiVersion: object.apiVersion,
    kind: object.kind,
    namespace: object.namespace,
    name: object.name,
    resourceVersion: object.resourceVersion,
    format: object.format,
    body: object.body,
    labels,
  }
  if (fields) stored.fields = fields
  if (scopes) stored.scopes = scopes
  return stored
}

export function indexed(entry: Entry) {
  return { namespace: entry.meta.namespace, name: entry.meta.name, labels: entry.labels, fields: entry.meta.fields }
}

export function union(scopes: readonly string[] | undefined, add: string | undefined): readonly string[] | undefined {
  if (add === undefined || scopes?.includes(add)) return scopes
  return [...(scopes ?? []), add].sort()
}
