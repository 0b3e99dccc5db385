// Reads of the past from a watch cache, as kube-apiserver serves them from etcd's MVCC: a paged list
// at its continue token's version, an `Exact` list (or a legacy resourceVersion=N with limit) at N.
// The state at N is rebuilt from the cache's objects and its event window by undoing the events
// after N, newest first; when the window no longer reaches N, the apiserver is asked (online) or
// the answer is its 410 Expired (offline). A rebuilt state copies the Map of references, never an object.
import type { RequestInfo } from '../api/requestinfo.ts'
import type { Status } from '../api/status.ts'
import { tooLargeResourceVersion } from '../api/status.ts'
import { storageKey } from '../api/continue-token.ts'
import type { CachedObject } from '../cache/types.ts'
import type { ListVersion } from '../cache/list-version.ts'
import { pastExpired } from '../cache/list-version.ts'

/** what undoing an event needs of it: the object it changed and the object as held before (none: it was not held) */
export interface UndoableEvent {
  object: CachedObject
  previous?: CachedObject
}

/** The objects as they were before `events` (oldest first, all applied to `objects`), by storage key. */
export function stateBefore(objects: ReadonlyMap<string, CachedObject>, events: readonly UndoableEvent[]): Map<string, CachedObject> {
  const state = new Map(objects)
  for (let i = events.length - 1; i >= 0; i--) {
    const { object, previous } = events[i]
    const key = storageKey(object.namespace, object.name)
    if (previous) state.set(key, previous)
    else state.delete(key)
  }
  return state
}

/** A state's objects in the apiserver's order (storage keys). */
export function inListOrder(state: ReadonlyMap<string, CachedObject>): CachedObject[] {
  // the default sort compares UTF-16 code units, as `<` does (and the cache's snapshot)
  return [...state.keys()].sort().map(key => state.get(key)!)
}

/** What a watch cache offers to rebuild its past. */
export interface PastSource {
  readonly objects: ReadonlyMap<string, CachedObject>
  readonly resourceVersion: bigint
  /** the oldest version whose state the cache knows exactly (before it, relists or a window that no longer reaches) */
  readonly exactSince: bigint
  eventsAfter(version: bigint): UndoableEvent[] | 'expired'
}

/** The cache's objects at `version`, in list order; undefined when it cannot know them (too old, or not reached yet). */
export function itemsAt(cache: PastSource, version: bigint): CachedObject[] | undefined {
  if (version > cache.resourceVersion || version < cache.exactSince) return undefined
  const events = cache.eventsAfter(version)
  if (events === 'expired') return undefined
  return inListOrder(stateBefore(cache.objects, events))
}

/** A list's objects at the version it reads, or what to answer instead (declined: the apiserver is asked). */
export type PastList =
  { kind: 'items'; items: CachedObject[]; resourceVersion: bigint } | { kind: 'declined'; why: string } | { kind: 'status'; status: Status }

/**
 * The objects of a list that reads the past (or the latest, for a 410's token), from a watch cache.
 * A version the cache has not reached came from the apiserver (a page it answered, a version of
 * another resource): online it is asked at once, as waiting could last until the next BOOKMARK.
 */
export function pastList(cache: PastSource, info: RequestInfo, at: Exclude<ListVersion, { kind: 'state' }>, online: boolean): PastList {
  if (at.kind === 'latest') {
    // online the latest is the apiserver's to say (a consistent read); offline it is what the cache holds
    if (online) return { kind: 'declined', why: 'a continue token for the latest version' }
    return { kind: 'items', items: inListOrder(cache.objects), resourceVersion: cache.resourceVersion }
  }
  if (at.version > cache.resourceVersion) {
    if (online) return { kind: 'declined', why: `a read at ${at.version}, which the watch cache (at ${cache.resourceVersion}) has not reached` }
    if (at.from === 'continue') return { kind: 'status', status: pastExpired(info, at) }
    return { kind: 'status', status: tooLargeResourceVersion(at.version, cache.resourceVersion) }
  }
  const items = itemsAt(cache, at.version)
  if (items) return { kind: 'items', items, resourceVersion: at.version }
  if (online) return { kind: 'declined', why: `a read of the past at ${at.version}, which the watch cache's window no longer reaches` }
  return { kind: 'status', status: pastExpired(info, at) }
}
