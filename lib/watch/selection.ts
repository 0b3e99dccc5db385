// A client's selection within a shared watch cache: the cache holds the widest scope the node
// reads, and each list and watch is narrowed locally, as kube-apiserver's cacher narrows its one
// cache per resource. For a watch, an object that starts matching is ADDED to that watcher, one
// that stops matching is DELETED (the object as the watcher last saw it, at the event's version),
// as cacheWatcher.convertToWatchEvent does.
import type { CachedObject } from '../cache/types.ts'
import type { ParsedScope } from '../cache/scope.ts'
import { inScope } from '../cache/scope.ts'
import { labelsOf } from '../cache/entries.ts'
import { stampedBody } from './stamp.ts'
import type { CacheEvent } from './cache.ts'

/** Whether a cached object is in a selection: namespace, labels, and the field values kept with it. */
export function selects(scope: ParsedScope, object: CachedObject): boolean {
  return inScope({ namespace: object.namespace, name: object.name, labels: labelsOf(object), fields: object.fields }, scope)
}

/** What a watcher of `scope` is told of an event of the cache; undefined: nothing. */
export function eventInSelection(scope: ParsedScope, event: CacheEvent): { type: string; object: CachedObject } | undefined {
  const now = event.type !== 'DELETED' && selects(scope, event.object)
  const before = event.previous !== undefined && selects(scope, event.previous)
  if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: event.object }
  if (!before) return undefined
  if (event.type === 'DELETED') return { type: 'DELETED', object: event.object }
  // it left the selection: the watcher is told it is gone, with what it was last shown
  const previous = event.previous!
  return {
    type: 'DELETED',
    object: { ...previous, resourceVersion: event.object.resourceVersion, body: stampedBody(previous.format, previous.body, event.object.resourceVersion) },
  }
}
