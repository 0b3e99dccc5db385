// The values of an object's selectable fields (spec.nodeName, spec.type, …), worked out once when
// the object enters a cache and kept with it (CachedObject.fields, written in its disk record), so
// every field selector is answered without reading bodies, online and offline alike, as the
// apiserver's cacher keeps each object's fields.Set.
import { fieldsOf, selectableFields } from '../api/field-selectors.ts'
import type { CachedObject } from './types.ts'
import { asJson } from './translate.ts'

const beyondMetadata = new Map<string, readonly string[]>()

/** The resource's selectable fields other than metadata.name and metadata.namespace. */
function labelsBeyondMetadata(group: string, resource: string): readonly string[] {
  const key = `${group}/${resource}`
  let labels = beyondMetadata.get(key)
  if (!labels) {
    labels = selectableFields(group, resource).filter(label => label !== 'metadata.name' && label !== 'metadata.namespace')
    if (beyondMetadata.size < 256) beyondMetadata.set(key, labels)
  }
  return labels
}

/**
 * undefined when there is nothing to add: the resource has no selectable field beyond
 * metadata.name and metadata.namespace, or the object carries them all already (read back from disk).
 */
export function selectableFieldValues(group: string, resource: string, object: CachedObject): Record<string, string> | undefined {
  const labels = labelsBeyondMetadata(group, resource)
  if (labels.length === 0) return undefined
  const known = object.fields
  if (known && labels.every(label => Object.hasOwn(known, label))) return undefined
  const parsed = asJson(object)
  return parsed ? fieldsOf(group, resource, parsed) : undefined
}
