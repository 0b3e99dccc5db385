// The last filtered list of each component and scope that the disk cache does not keep
// (nginx-ingress-controller's): the watch that follows it starts from it, as cached components'
// watches start from the cache, so a re-filter knows what the client holds.
import type { RequestInfo } from '../api/requestinfo.ts'
import type { CachedObject } from '../cache/types.ts'

/** Lists kept for their watch to start from, at most this many (one per component and scope in practice). */
const maxRememberedLists = 32

export class RememberedLists {
  private readonly lists = new Map<string, CachedObject[]>()

  private static listKey(info: RequestInfo): string {
    return JSON.stringify([info.component, info.apiGroup, info.apiVersion, info.resource, info.namespace, info.labelSelector, info.fieldSelector])
  }

  /** One page of a filtered list; later pages (a continue token) add to the first. */
  remember(info: RequestInfo, items: CachedObject[]): void {
    const key = RememberedLists.listKey(info)
    const earlier = info.query.get('continue') ? (this.lists.get(key) ?? []) : []
    this.lists.delete(key)
    this.lists.set(key, earlier.concat(items))
    if (this.lists.size > maxRememberedLists) this.lists.delete(this.lists.keys().next().value!)
  }

  /** The list a watch follows, given up to it (a later list of the same scope replaces it anyway). */
  take(info: RequestInfo): CachedObject[] {
    const key = RememberedLists.listKey(info)
    const items = this.lists.get(key) ?? []
    this.lists.delete(key)
    return items
  }
}
