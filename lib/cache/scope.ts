// A scope is what one list or watch selects within a resource: a namespace (or all) and label and
// field selectors. The cache answers offline only for scopes it has seen listed whole, or for
// narrower ones (a list of everything answers for one namespace; kubelet's `spec.nodeName=<node>`
// list does not answer for all pods), and remembers through which scopes each object arrived, so
// a DELETED seen through one scope does not take the object from another that still holds it.
import type { RequestInfo } from '../api/requestinfo.ts'
import { matchesLabels, parseFieldSelector, parseLabelSelector } from '../api/selectors.ts'
import type { FieldSelector, LabelRequirement, LabelSelector, FieldRequirement } from '../api/selectors.ts'

export interface Scope {
  namespace: string
  labelSelector: string
  fieldSelector: string
}

export interface ParsedScope extends Scope {
  labels: LabelSelector
  fields: FieldSelector
  /** a canonical name: equal scopes, however written, have equal ids */
  id: string
}

function labelTerm(r: LabelRequirement): string {
  const op = r.operator === '==' ? '=' : r.operator
  return `${r.key}\u0001${op}\u0001${[...r.values].sort().join('\u0002')}`
}

function fieldTerm(r: FieldRequirement): string {
  return `${r.field}\u0001${r.operator === '==' ? '=' : r.operator}\u0001${r.value}`
}

/** Throws the selector parser's Error on bad syntax (the caller answers 400). */
export function parseScope(scope: Scope): ParsedScope {
  const labels = parseLabelSelector(scope.labelSelector)
  const fields = parseFieldSelector(scope.fieldSelector)
  const canonical = [
    scope.namespace,
    [...new Set(labels.requirements.map(labelTerm))].sort().join('\u0003'),
    [...new Set(fields.requirements.map(fieldTerm))].sort().join('\u0003'),
  ]
  return { namespace: scope.namespace, labelSelector: scope.labelSelector, fieldSelector: scope.fieldSelector, labels, fields, id: JSON.stringify(canonical) }
}

export const everything: ParsedScope = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })

/** The scope of a get by name: that one object, which a list of its namespace or of its name answers for. */
export function scopeOfName(namespace: string, name: string): ParsedScope {
  return parseScope({ namespace, labelSelector: '', fieldSelector: `metadata.name=${name.replace(/[\\,=!]/g, c => `\\${c}`)}` })
}

/** The equality terms of a field selector: values every object of that scope is known to have. */
export function vouchedFields(scope: ParsedScope): Record<string, string> | undefined {
  const terms = scope.fields.requirements.filter(r => r.operator !== '!=')
  if (terms.length === 0) return undefined
  return Object.fromEntries(terms.map(r => [r.field, r.value]))
}

/**
 * Whether a whole list of `listed` tells everything about `requested`: every object of `requested`
 * is in `listed`. True when `listed` spans the namespace and each of its terms is also one of
 * `requested`'s (`requested` may add more, which only narrows it). `metadata.namespace=` in a field
 * selector counts as the namespace it names.
 */
export function covers(listed: ParsedScope, requested: ParsedScope): boolean {
  const requestedNamespace = requested.namespace || namespaceFromFields(requested.fields)
  if (listed.namespace !== '' && listed.namespace !== requestedNamespace) return false
  const labelTerms = new Set(requested.labels.requirements.map(labelTerm))
  if (!listed.labels.requirements.every(r => labelTerms.has(labelTerm(r)))) return false
  const fieldTerms = new Set(requested.fields.requirements.map(fieldTerm))
  if (requestedNamespace) fieldTerms.add(fieldTerm({ field: 'metadata.namespace', operator: '=', value: requestedNamespace }))
  return listed.fields.requirements.every(r => fieldTerms.has(fieldTerm(r)))
}

function namespaceFromFields(fields: FieldSelector): string {
  return fields.requirements.find(r => r.field === 'metadata.namespace' && r.operator !== '!=')?.value ?? ''
}

/** What the index knows of an object without reading its body. */
export interface IndexedObject {
  namespace: string
  name: string
  labels: Record<string, string>
  fields?: Record<string, string>
}

/** Field values known without the body: the object's name and namespace, and what a scope vouched for. */
export function knownField(object: IndexedObject, path: string): string | undefined {
  if (path === 'metadata.name') return object.name
  if (path === 'metadata.namespace') return object.namespace
  return object.fields?.[path]
}

/**
 * Whether an object is in a scope. A field selector on other paths needs the body (`fieldOf`); an
 * object whose body cannot tell (protobuf, which the hub does not decode beyond ObjectMeta) and that
 * no scope vouched for never matches.
 */
export function inScope(object: IndexedObject, scope: ParsedScope, fieldOf?: (path: string) => string | undefined): boolean {
  if (scope.namespace && object.namespace !== scope.namespace) return false
  if (!matchesLabels(scope.labels, object.labels)) return false
  for (const r of scope.fields.requirements) {
    const value = knownField(object, r.field) ?? fieldOf?.(r.field)
    if (value === undefined) return false
    if (r.operator === '!=' ? value === r.value : value !== r.value) return false
  }
  return true
}

/** Whether deciding a scope needs object bodies (a field selector on a path the index does not know). */
export function needsBodies(scope: ParsedScope, object?: { fields?: Record<string, string> }): boolean {
  return scope.fields.requirements.some(r => r.field !== 'metadata.name' && r.field !== 'metadata.namespace' && object?.fields?.[r.field] === undefined)
}

/** A scope as operators write it; the empty scope is the whole resource. */
export function describeScope(scope: Scope): string {
  const parts = [
    scope.namespace && `namespace=${scope.namespace}`,
    scope.labelSelector && `labelSelector=${scope.labelSelector}`,
    scope.fieldSelector && `fieldSelector=${scope.fieldSelector}`,
  ].filter(Boolean)
  return parts.length > 0 ? parts.join(' ') : 'all'
}

export function scopeOf(info: RequestInfo): ParsedScope {
  return parseScope({ namespace: info.namespace, labelSelector: info.labelSelector, fieldSelector: info.fieldSelector })
}
