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
import { LRUCache } from 'lru-cache'

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

/** What the index keeps of an object in memory; the body lives in the LRU and on disk. */
export type StoredMeta = Omit<CachedObject, 'body'>

interface Entry {
  meta: StoredMeta
  labels: Record<string, string>
  /** bytes of the body, for /debug/cache and the cache size metrics */
  size: number
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
  /** the scopes listed whole since the hub started (`namespace=… labelSelector=… fieldSelector=…`) */
  readonly scopes = new Set<string>()

  constructor(readonly key: ResourceKey) {}

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
}

/** A resourceVersion as a number to compare; 0 for one that is not (the apiserver's are opaque strings). */
export function numericVersion(rv: string): bigint {
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
  const { body, ...meta } = object
  if (object.format === 'protobuf') return { meta, labels: objectMeta(body).labels, size: body.length }
  const document = JSON.parse(body.toString()) as { metadata?: { labels?: Record<string, string> } }
  return { meta, labels: document.metadata?.labels ?? {}, size: body.length }
}

/** Field values known without the body: the object's name and namespace, and what a scope vouched for. */
function knownField(meta: StoredMeta, path: string): string | undefined {
  if (path === 'metadata.name') return meta.name
  if (path === 'metadata.namespace') return meta.namespace
  return meta.fields?.[path]
}

/**
 * Whether an entry is in a scope. Field selectors on other paths need the JSON body (`document`);
 * a protobuf object outside any scope that vouched for the field never matches: the hub does not
 * decode it beyond ObjectMeta.
 */
function matchesScope(entry: Entry, scope: ParsedScope, document?: () => unknown): boolean {
  if (scope.namespace && entry.meta.namespace !== scope.namespace) return false
  if (!matchesLabels(scope.labels, entry.labels)) return false
  for (const r of scope.fields.requirements) {
    let value = knownField(entry.meta, r.field)
    if (value === undefined && entry.meta.format === 'json' && document) value = fieldValue(document(), r.field)
    if (value === undefined) return false
    if (r.operator === '!=' ? value === r.value : value !== r.value) return false
  }
  return true
}

/** Whether a scope can be decided from the index alone, without reading bodies. */
function needsBodies(scope: ParsedScope): boolean {
  return scope.fields.requirements.some(r => r.field !== 'metadata.name' && r.field !== 'metadata.namespace')
}

export interface StoreOptions {
  /** bytes of object bodies kept in memory; the rest is read back from disk when asked for */
  maxBodyBytes?: number
}

export class CacheStore {
  private readonly collections = new Map<string, Collection>()
  private readonly bodies: LRUCache<string, Buffer>

  constructor(
    private readonly disk: DiskCache | undefined,
    private readonly log: Logger,
    options: StoreOptions = {},
  ) {
    // Without a disk there is nowhere to read an evicted body back from: keep them all.
    this.bodies = new LRUCache<string, Buffer>({
      maxSize: disk ? (options.maxBodyBytes ?? 256 * 1024 * 1024) : Number.MAX_SAFE_INTEGER,
      sizeCalculation: body => Math.max(1, body.length),
    })
  }

  private static bodyKey(key: ResourceKey, namespace: string, name: string): string {
    return `${CacheStore.collectionId(key)}\0${namespace}/${name}`
  }

  private remember(key: ResourceKey, object: CachedObject): void {
    this.bodies.set(CacheStore.bodyKey(key, object.namespace, object.name), object.body)
  }

  /** The object with its body: from memory, or read back from disk after eviction. */
  private async withBody(key: ResourceKey, meta: StoredMeta): Promise<CachedObject | undefined> {
    const id = CacheStore.bodyKey(key, meta.namespace, meta.name)
    let body = this.bodies.get(id)
    if (!body && this.disk) {
      body = await this.disk.readBody(key, meta.namespace, meta.name)
      if (body) this.bodies.set(id, body)
    }
    return body ? { ...meta, body } : undefined
  }

  get memory(): { bodies: number; bytes: number } {
    return { bodies: this.bodies.size, bytes: this.bodies.calculatedSize }
  }

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
        this.remember(key, object)
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

  async get(key: ResourceKey, namespace: string, name: string): Promise<CachedObject | undefined> {
    const entry = this.find(key)?.entries.get(objectKey(namespace, name))
    return entry ? this.withBody(key, entry.meta) : undefined
  }

  /** The objects of a scope, or undefined when the hub never saw this resource listed for this component. */
  async list(key: ResourceKey, scope: ParsedScope): Promise<{ items: CachedObject[]; resourceVersion: string; collection: Collection } | undefined> {
    const collection = this.find(key)
    if (!collection || (!collection.known && collection.entries.size === 0)) return undefined
    const resourceVersion = collection.maxResourceVersion()
    const items: CachedObject[] = []
    const bodies = needsBodies(scope)
    for (const entry of [...collection.entries.values()]) {
      if (bodies) {
        // a field selector on other paths: the JSON body decides
        const object = await this.withBody(key, entry.meta)
        if (object && matchesScope(entry, scope, () => JSON.parse(object.body.toString()))) items.push(object)
        continue
      }
      if (!matchesScope(entry, scope)) continue
      // the common case, a body still in memory, without a microtask per item
      const body = this.bodies.get(CacheStore.bodyKey(key, entry.meta.namespace, entry.meta.name))
      const object = body ? { ...entry.meta, body } : await this.withBody(key, entry.meta)
      if (object) items.push(object)
    }
    items.sort((a, b) => (a.namespace === b.namespace ? cmp(a.name, b.name) : cmp(a.namespace, b.namespace)))
    return { items, resourceVersion, collection }
  }

  /** A get response, or a watch ADDED/MODIFIED: stored unless the cache already holds something newer. */
  async put(key: ResourceKey, object: CachedObject): Promise<void> {
    const collection = this.collection(key)
    this.learnKind(collection, object)
    const id = objectKey(object.namespace, object.name)
    const current = collection.entries.get(id)
    if (current && !isNewer(object.resourceVersion, current.meta.resourceVersion)) return
    collection.entries.set(id, toEntry(object))
    this.remember(key, object)
    collection.lastUpdate = Date.now()
    collection.origin = 'cloud'
    await this.disk?.put(key, object)
  }

  async remove(key: ResourceKey, namespace: string, name: string): Promise<void> {
    const collection = this.find(key)
    if (!collection?.entries.delete(objectKey(namespace, name))) return
    this.bodies.delete(CacheStore.bodyKey(key, namespace, name))
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
      // Without bodies, a field selector on other paths is decided from vouched-for values only.
      if (!listed.has(id) && matchesScope(entry, scope)) {
        collection.entries.delete(id)
        this.bodies.delete(CacheStore.bodyKey(key, entry.meta.namespace, entry.meta.name))
        writes.push(this.disk?.remove(key, entry.meta.namespace, entry.meta.name) ?? Promise.resolve())
      }
    }
    // A whole list is the apiserver's word on its scope: it replaces even a "newer" cached version
    // (a cluster restored from backup counts from a lower resourceVersion again).
    for (const object of items) {
      collection.entries.set(objectKey(object.namespace, object.name), toEntry(object))
      this.remember(key, object)
      writes.push(this.disk?.put(key, object) ?? Promise.resolve())
    }
    collection.known = true
    collection.origin = 'cloud'
    collection.lastUpdate = Date.now()
    collection.scopes.add(describeScope(scope))
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

/** A scope as operators write it; the empty scope is the whole resource. */
export function describeScope(scope: Scope): string {
  const parts = [
    scope.namespace && `namespace=${scope.namespace}`,
    scope.labelSelector && `labelSelector=${scope.labelSelector}`,
    scope.fieldSelector && `fieldSelector=${scope.fieldSelector}`,
  ].filter(Boolean)
  return parts.length > 0 ? parts.join(' ') : 'all'
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
