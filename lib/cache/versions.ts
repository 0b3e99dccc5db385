// resourceVersions as the hub compares them. They are comparable integers (GA in Kubernetes 1.35)
// and may pass 2^53, so they are read as BigInt; one that is not decimal digits is 0, "unknown".
import type { CachedObject } from './types.ts'
import { objectKey } from './types.ts'

let lastVersionText = ''
let lastVersion = 0n

/** A resourceVersion as a number to compare; 0 for one that is not (the apiserver's are opaque strings). */
export function numericVersion(rv: string): bigint {
  // one event's version is read several times in a row (the store, the watch cache, each watcher)
  if (rv === lastVersionText) return lastVersion
  let value = 0n
  if (rv.length > 0 && rv.length <= 15) {
    // digits only, short enough to be exact as a double: no regular expression, no string parse
    let n = 0
    for (let i = 0; i < rv.length; i++) {
      const digit = rv.charCodeAt(i) - 48
      if (digit < 0 || digit > 9) {
        n = -1
        break
      }
      n = n * 10 + digit
    }
    if (n >= 0) value = BigInt(n)
  } else if (/^\d+$/.test(rv)) value = BigInt(rv)
  lastVersionText = rv
  lastVersion = value
  return value
}

/**
 * Whether a copy at `incoming` may replace one at `current`: never one older (an old list page, a
 * replayed or reordered event). A version that is not a number cannot be compared, and is taken.
 */
export function isNotOlder(incoming: string, current: string): boolean {
  const a = numericVersion(incoming)
  const b = numericVersion(current)
  return a === 0n || b === 0n || a >= b
}

/** A list's items, each object once at its newest copy (a list that names one twice keeps the later version). */
export function newestOf(items: CachedObject[]): CachedObject[] {
  const byKey = new Map<string, CachedObject>()
  for (const object of items) {
    const id = objectKey(object.namespace, object.name)
    const held = byKey.get(id)
    if (!held || isNotOlder(object.resourceVersion, held.resourceVersion)) byKey.set(id, object)
  }
  return byKey.size === items.length ? items : [...byKey.values()]
}
