// The values of an object's selectable fields (spec.nodeName, spec.type, …), worked out once when
// the object enters a cache and kept with it (CachedObject.fields, written in its disk record), so
// every field selector is answered without reading bodies, online and offline alike, as the
// apiserver's cacher keeps each object's fields.Set.
import { fieldsOf, selectableFields } from '../api/field-selectors.ts'
import type { CachedObject } from './types.ts'
import { asJson } from './translate.ts'

/** undefined when the resource has no selectable field beyond metadata.name and metadata.namespace. */
export function selectableFieldValues(group: string, resource: string, object: CachedObject): Record<string, string> | undefined {
  if (selectableFields(group, resource).every(label => label === 'metadata.name' || label === 'metadata.namespace')) return undefined
  const parsed = asJson(object)
  return parsed ? fieldsOf(group, resource, parsed) : undefined
}
