// One component's cached view of one resource: its objects' index entries, the scopes listed whole
// (and how far each has been followed since), the scopes known not to be whole (and why), and the
// kind its objects and lists are named by.
import type { CachedObject, ResourceKey } from './types.ts'
import type { CollectionMeta } from './disk.ts'
import { covers, describeScope } from './scope.ts'
import type { ParsedScope } from './scope.ts'
import { numericVersion } from './versions.ts'
import { apiVersionOf, builtinKind, kindProblem } from '../api/kinds.ts'

/** What the index keeps of an object in memory; the body lives in the LRU and on disk. */
export type StoredMeta = Omit<CachedObject, 'body'>

export interface Entry {
  meta: StoredMeta
  labels: Record<string, string>
  /** bytes of the body, for /debug/cache and the cache size metrics */
  size: number
  /** why the body cannot be had (its file vanished or broke): lists that may hold it are not whole */
  lost?: string
}

export type Origin = 'cloud' | 'disk'

export interface ListedScope {
  scope: ParsedScope
  /** the version of the list that recorded it whole */
  resourceVersion: string
  /** the newest version seen through it since (its watch's events and BOOKMARKs), in memory only */
  reached: bigint
}

/** A scope whose objects the cache cannot vouch for: offline, its lists are refused until it is listed whole again. */
export interface IncompleteScope {
  /** undefined: the whole collection (its files were damaged) */
  scope?: ParsedScope
  why: string
  since: number
}

/** The id of the incomplete entry that stands for the whole collection. */
export const wholeCollection = '*'

export class Collection {
  readonly entries = new Map<string, Entry>()
  origin: Origin = 'cloud'
  lastUpdate = 0
  /** kind of the items (as the apiserver names them), to name every list, an empty one too */
  kind: string
  readonly apiVersion: string
  /** the resourceVersion of the newest whole list, which may be above every item's */
  listResourceVersion = 0n
  /** the scopes listed whole (kept on disk): offline lists answer for these and narrower ones */
  readonly listed = new Map<string, ListedScope>()
  readonly incomplete = new Map<string, IncompleteScope>()

  constructor(readonly key: ResourceKey) {
    this.kind = builtinKind(key.group, key.resource) ?? ''
    this.apiVersion = apiVersionOf(key.group, key.version)
  }

  /** Whether anything is known: a scope listed, or objects fetched by name. */
  get known(): boolean {
    return this.listed.size > 0 || this.entries.size > 0
  }

  /** The listed scope that answers for `scope`, if any. */
  coveringScope(scope: ParsedScope): ListedScope | undefined {
    const exact = this.listed.get(scope.id)
    if (exact) return exact
    for (const listed of this.listed.values()) if (covers(listed.scope, scope)) return listed
    return undefined
  }

  /** Why a list of `scope` cannot be answered whole, when the cache knows why: damage, a lost event, an object too large. */
  whyIncomplete(scope: ParsedScope): string | undefined {
    const whole = this.incomplete.get(wholeCollection)
    if (whole) return whole.why
    // a scope that would have answered this one first, then one this one would have included
    const entries = [...this.incomplete.values()]
    const found = entries.find(e => e.scope && covers(e.scope, scope)) ?? entries.find(e => e.scope && covers(scope, e.scope))
    return found?.scope && `${describeScope(found.scope)}: ${found.why}`
  }

  /** Why an object or list of `kind`/`apiVersion` does not belong here ('' when it does). */
  kindProblem(kind: string, apiVersion: string): string {
    return kindProblem(this, kind, apiVersion)
  }

  /** bytes of all bodies, as sent by the apiserver */
  bytes(): number {
    let total = 0
    for (const entry of this.entries.values()) total += entry.size
    return total
  }

  /** The highest resourceVersion seen: an offline list's version, as the apiserver's would be. */
  maxResourceVersion(): string {
    let max = this.listResourceVersion
    for (const { meta } of this.entries.values()) {
      const rv = numericVersion(meta.resourceVersion)
      if (rv > max) max = rv
    }
    return max.toString()
  }

  meta(): CollectionMeta {
    return {
      listResourceVersion: this.listResourceVersion.toString(),
      kind: this.kind,
      apiVersion: this.apiVersion,
      listed: [...this.listed.values()].map(({ scope, resourceVersion }) => ({
        namespace: scope.namespace,
        labelSelector: scope.labelSelector,
        fieldSelector: scope.fieldSelector,
        resourceVersion,
      })),
    }
  }
}
