// The cache's in-memory index: per component and resource, the objects the apiserver sent, with
// what offline answers need (labels, vouched-for field values, the highest resourceVersion).
// Every change is handed to the disk layer; callers await durability before they acknowledge.
import type { Logger } from 'pino'
import type { CachedObject, ResourceKey } from './types.ts'
import { resourceDirName } from './types.ts'
import type { DiskCache, LoadReport } from './disk.ts'
import { matchesLabels, parseFieldSelector, parseLabelSelector, fieldValue } from '../selectors.ts'
import type { FieldSelector, LabelSelector } from '../selectors.ts'
import { objectMeta } from '../codec/protobuf.ts'

/** One list or watch scope: what a request selects within a resource. */
export interface Scope {
  namespace: string
  labelSelector: string
  fieldSelector: string
}

export interface ParsedScope extends Scope {
  labels: LabelSelector
  fields: FieldSelector
}

/** Throws the selector parser's Error on bad syntax (the caller answers 400). */
export function parseScope(scope: Scope): ParsedScope {
  return { ...scope, labels: parseLabelSelector(scope.labelSelector), fields: parseFieldSelector(scope.fieldSelector) }
}

/** The equality terms of a field selector: values every object of that scope is known to have. */
export function vouchedFields(scope: ParsedScope): Record<string, string> | undefined {
  const terms = scope.fields.requirements.filter(r => r.operator !== '!=')
  if (terms.length === 0) return undefined
  return Object.fromEntries(terms.map(r => [r.field, r.value]))
}

interface Entry {
  object: CachedObject
  labels: Record<string, string>
  /** the decoded object for JSON entries, so field selectors can be evaluated on any path */
  document?: unknown
}

export type Origin = 'cloud' | 'disk'

export class Collection {
  readonly entries = new Map<string, Entry>()
  /** true once a whole list arrived; a collection that only has objects from gets is known too */
  known = false
  origin: Origin = 'cloud'
  lastUpdate = 0
  /** kind of the items, learned from a list or an object, to name an empty list */
  kind = ''
  apiVersion = ''
  /** the resourceVersion of the newest whole list, which may be above every item's */
  listResourceVersion = 0n

  constructor(readonly key: ResourceKey) {}

  /** The highest resourceVersion seen: an offline list's version, as the apiserver's would be. */
  maxResourceVersion(): string {
    let max = this.listResourceVersion
    for (const { object } of this.entries.values()) {
      const rv = numericVersion(object.resourceVersion)
      if (rv > max) max = rv
    }
    return max.toString()
  }
}

function numericVersion(rv: string): bigint {
  return /^\d+$/.test(rv) ? BigInt(rv) : 0n
}

/** Whether `incoming` may replace `current`: never go back in time (an old list page, a replayed event). */
function isNewer(incoming: string, current: string): boolean {
  const a = numericVersion(incoming)
  const b = numericVersion(current)
  return a === 0n || b === 0n || a >= b
}

function objectKey(namespace: string, name: string): string {
  return `${namespace}/${name}`
}

function toEntry(object: CachedObject): Entry {
  if (object.format === 'protobuf') return { object, labels: objectMeta(object.body).labels }
  const document = JSON.parse(object.body.toString()) as { metadata?: { labels?: Record<string, string> } }
  return { object, labels: document.metadata?.labels ?? {}, document }
}

function fieldOf(entry: Entry, path: string): string | undefined {
  if (path === 'metadata.name') return entry.object.name
  if (path === 'metadata.namespace') return entry.object.namespace
  if (entry.document !== undefined) return fieldValue(entry.document, path)
  return entry.object.fields?.[path]
}

export function matchesScope(entry: Entry, scope: ParsedScope): boolean {
  if (scope.namespace && entry.object.namespace !== scope.namespace) return false
  if (!matchesLabels(scope.labels, entry.labels)) return false
  for (const r of scope.fields.requirements) {
    const value = fieldOf(entry, r.field)
    // A field the hub cannot see (a protobuf object outside any scope that vouched for it) never matches.
    if (value === undefined) return false
    if (r.operator === '!=' ? value === r.value : value !== r.value) return false
  }
  return true
}

export class CacheStore {
  private readonly collections = new Map<string, Collection>()

  constructor(
    private readonly disk: DiskCache | undefined,
    private readonly log: Logger,
  ) {}

  static collectionId(key: ResourceKey): string {
    return `${key.component}/${resourceDirName(key)}`
  }

  collection(key: ResourceKey): Collection {
    const id = CacheStore.collectionId(key)
    let collection = this.collections.get(id)
    if (!collection) {
      collection = new Collection(key)
      this.collections.set(id, collection)
    }
    return collection
  }

  /** The collection if it exists, without creating one. */
  find(key: ResourceKey): Collection | undefined {
    return this.collections.get(CacheStore.collectionId(key))
  }

  all(): Collection[] {
    return [...this.collections.values()]
  }

  async load(): Promise<LoadReport | undefined> {
    if (!this.disk) return undefined
    const report = await this.disk.load(({ key, object }) => {
      const collection = this.collection(key)
      try {
        collection.entries.set(objectKey(object.namespace, object.name), toEntry(object))
      } catch (error) {
        this.log.warn({ component: key.component, resource: key.resource, name: object.name, err: (error as Error).message }, 'cached object unreadable, skipped')
        return
      }
      collection.known = true
      collection.origin = 'disk'
      collection.kind ||= object.kind
      collection.apiVersion ||= object.apiVersion
    })
    this.log.info({ objects: report.loaded, failed: report.failed.length, collections: this.collections.size }, 'cache loaded')
    return report
  }

  get(key: ResourceKey, namespace: string, name: string): CachedObject | undefined {
    return this.find(key)?.entries.get(objectKey(namespace, name))?.object
  }

  /** The objects of a scope, or undefined when the hub never saw this resource listed for this component. */
  list(key: ResourceKey, scope: ParsedScope): { items: CachedObject[]; resourceVersion: string; collection: Collection } | undefined {
    const collection = this.find(key)
    if (!collection || (!collection.known && collection.entries.size === 0)) return undefined
    const items: CachedObject[] = []
    for (const entry of collection.entries.values()) if (matchesScope(entry, scope)) items.push(entry.object)
    items.sort((a, b) => (a.namespace === b.namespace ? cmp(a.name, b.name) : cmp(a.namespace, b.namespace)))
    return { items, resourceVersion: collection.maxResourceVersion(), collection }
  }

  /** A get response, or a watch ADDED/MODIFIED: stored unless the cache already holds something newer. */
  async put(key: ResourceKey, object: CachedObject): Promise<void> {
    const collection = this.collection(key)
    this.learnKind(collection, object)
    const id = objectKey(object.namespace, object.name)
    const current = collection.entries.get(id)
    if (current && !isNewer(object.resourceVersion, current.object.resourceVersion)) return
    collection.entries.set(id, toEntry(object))
    collection.lastUpdate = Date.now()
    collection.origin = 'cloud'
    await this.disk?.put(key, object)
  }

  async remove(key: ResourceKey, namespace: string, name: string): Promise<void> {
    const collection = this.find(key)
    if (!collection?.entries.delete(objectKey(namespace, name))) return
    collection.lastUpdate = Date.now()
    await this.disk?.remove(key, namespace, name)
  }

  /**
   * A whole list of one scope (all pages): its items replace what the scope held, and cached objects
   * of that scope the list no longer has are gone from the cloud. Other scopes are untouched.
   */
  async replaceScope(
    key: ResourceKey,
    scope: ParsedScope,
    list: { items: CachedObject[]; kind: string; apiVersion: string; resourceVersion: string },
  ): Promise<void> {
    const { items, kind, apiVersion } = list
    const collection = this.collection(key)
    const listVersion = numericVersion(list.resourceVersion)
    if (listVersion > collection.listResourceVersion) collection.listResourceVersion = listVersion
    collection.kind ||= kind
    collection.apiVersion ||= apiVersion
    const listed = new Set(items.map(o => objectKey(o.namespace, o.name)))
    const writes: Promise<void>[] = []
    for (const [id, entry] of collection.entries) {
      if (!listed.has(id) && matchesScope(entry, scope)) {
        collection.entries.delete(id)
        writes.push(this.disk?.remove(key, entry.object.namespace, entry.object.name) ?? Promise.resolve())
      }
    }
    for (const object of items) writes.push(this.put(key, object))
    collection.known = true
    collection.origin = 'cloud'
    collection.lastUpdate = Date.now()
    await Promise.all(writes)
  }

  private learnKind(collection: Collection, object: CachedObject): void {
    collection.kind ||= object.kind
    collection.apiVersion ||= object.apiVersion
  }

  async flush(): Promise<void> {
    await this.disk?.flush()
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
