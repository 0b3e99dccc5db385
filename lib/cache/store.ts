// The cache's in-memory index: per component and resource, the objects the apiserver sent, with
// what offline answers need (labels, vouched-for field values, the scopes each object arrived
// through, the scopes listed whole and the newest list's resourceVersion). Every change is handed
// to the disk layer; callers await durability before they acknowledge. A write the disk refuses is
// kept in memory, counted, and tried again until it lands, so memory and disk tell one story.
import type { Logger } from 'pino'
import type { CachedObject, ResourceKey } from './types.ts'
import { objectKey, resourceDirName } from './types.ts'
import type { CollectionMeta, DiskCache, LoadReport } from './disk.ts'
import { fieldValue } from '../api/selectors.ts'
import { objectMeta } from '../codec/protobuf.ts'
import { LRUCache } from 'lru-cache'
import { covers, describeScope, inScope, needsBodies, parseScope } from './scope.ts'
import type { ParsedScope } from './scope.ts'
import { storageKey } from '../api/continue-token.ts'

export { describeScope, parseScope, vouchedFields } from './scope.ts'
export type { ParsedScope, Scope } from './scope.ts'

/** What the index keeps of an object in memory; the body lives in the LRU and on disk. */
export type StoredMeta = Omit<CachedObject, 'body'>

interface Entry {
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
  resourceVersion: string
}

export class Collection {
  readonly entries = new Map<string, Entry>()
  origin: Origin = 'cloud'
  lastUpdate = 0
  /** kind of the items, learned from a list or an object, to name an empty list */
  kind = ''
  apiVersion = ''
  /** the resourceVersion of the newest whole list, which may be above every item's */
  listResourceVersion = 0n
  /** the scopes listed whole (kept on disk): offline lists answer for these and narrower ones */
  readonly listed = new Map<string, ListedScope>()

  constructor(readonly key: ResourceKey) {}

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
      listed: [...this.listed.values()].map(({ scope, resourceVersion }) => ({
        namespace: scope.namespace,
        labelSelector: scope.labelSelector,
        fieldSelector: scope.fieldSelector,
        resourceVersion,
      })),
    }
  }
}

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

/** Whether `incoming` may replace `current`: never go back in time (an old list page, a replayed event). */
function isNewer(incoming: string, current: string): boolean {
  const a = numericVersion(incoming)
  const b = numericVersion(current)
  return a === 0n || b === 0n || a >= b
}

function labelsOf(object: CachedObject): Record<string, string> {
  if (object.labels) return object.labels
  if (object.format === 'protobuf') return objectMeta(object.body).labels
  const document = JSON.parse(object.body.toString()) as { metadata?: { labels?: Record<string, string> } }
  return document.metadata?.labels ?? {}
}

const same = (a: readonly string[] | undefined, b: readonly string[] | undefined) => (a ?? []).length === (b ?? []).length && (a ?? []).every((x, i) => b![i] === x)
const sameFields = (a: Record<string, string> | undefined, b: Record<string, string> | undefined) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})

export interface StoreOptions {
  /** bytes of object bodies kept in memory; the rest is read back from disk when asked for */
  maxBodyBytes?: number
  /** first wait before a failed disk write is tried again (doubling up to a minute) */
  retryMs?: number
}

/** What a scope holds, and whether that is known to be all of it. */
export interface Selection {
  items: CachedObject[]
  resourceVersion: string
  collection: Collection
  /** a scope listed whole answers for this one: the items are everything the apiserver had */
  complete: boolean
  /** objects that belong here (or may) but whose body is gone: `namespace/name: why` */
  lost: string[]
}

export class CacheStore {
  private readonly collections = new Map<string, Collection>()
  private readonly bodies: LRUCache<string, Buffer>
  /** objects whose disk state lags memory (a write or removal failed), with their bodies pinned */
  private readonly unsaved = new Map<string, { key: ResourceKey; namespace: string; name: string; body?: Buffer }>()
  private retryTimer: NodeJS.Timeout | undefined
  private retryDelay: number
  /** interned scope lists: thousands of objects share a handful */
  private readonly scopeLists = new Map<string, readonly string[]>()
  readonly stats = { writeFailures: 0, lostObjects: 0 }

  constructor(
    private readonly disk: DiskCache | undefined,
    private readonly log: Logger,
    private readonly options: StoreOptions = {},
  ) {
    // Without a disk there is nowhere to read an evicted body back from: keep them all.
    this.bodies = new LRUCache<string, Buffer>({
      maxSize: disk ? (options.maxBodyBytes ?? 256 * 1024 * 1024) : Number.MAX_SAFE_INTEGER,
      sizeCalculation: body => Math.max(1, body.length),
    })
    this.retryDelay = options.retryMs ?? 1_000
  }

  /** flat, as objectKey: the LRU keeps one per body */
  private static bodyKey(key: ResourceKey, namespace: string, name: string): string {
    return [CacheStore.collectionId(key), namespace, name].join('\0')
  }

  /** Objects whose latest state is not on disk yet (failed writes being retried). */
  get unsavedCount(): number {
    return this.unsaved.size
  }

  /** The object with its body: from memory, or read back from disk after eviction; undefined when lost. */
  private async withBody(key: ResourceKey, entry: Entry): Promise<CachedObject | undefined> {
    const { meta } = entry
    const id = CacheStore.bodyKey(key, meta.namespace, meta.name)
    let body = this.bodies.get(id) ?? this.unsaved.get(id)?.body
    if (!body && this.disk && !entry.lost) {
      try {
        body = await this.disk.readBody(key, meta.namespace, meta.name)
        if (!body) this.markLost(key, entry, 'its cache file is gone')
      } catch (error) {
        this.markLost(key, entry, (error as Error).message)
      }
      if (body) this.bodies.set(id, body)
    }
    return body ? { ...meta, body } : undefined
  }

  private markLost(key: ResourceKey, entry: Entry, why: string): void {
    if (entry.lost) return
    entry.lost = why
    this.stats.lostObjects++
    this.log.error({ component: key.component, resource: resourceDirName(key), object: objectKey(entry.meta.namespace, entry.meta.name), why }, 'cache: object body lost; lists that include it answer 503 until the cloud relists them')
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

  /**
   * Every component's collection of `key`'s resource (same group and version): `key`'s own component
   * first, then the others, freshest first. Offline, a node's client is answered from whichever
   * holds what it asks for.
   */
  candidates(key: ResourceKey): Collection[] {
    const own = this.find(key)
    const others = this.all()
      .filter(c => c !== own && c.key.group === key.group && c.key.version === key.version && c.key.resource === key.resource && c.known)
      .map(c => ({ c, rv: numericVersion(c.maxResourceVersion()) }))
      .sort((a, b) => (a.rv === b.rv ? 0 : a.rv > b.rv ? -1 : 1))
      .map(({ c }) => c)
    return own?.known ? [own, ...others] : others
  }

  private interned(scopes: readonly string[] | undefined): readonly string[] | undefined {
    if (!scopes || scopes.length === 0) return undefined
    const id = scopes.join('\n')
    let list = this.scopeLists.get(id)
    if (!list) {
      list = Object.freeze([...scopes])
      this.scopeLists.set(id, list)
    }
    return list
  }

  async load(): Promise<LoadReport | undefined> {
    if (!this.disk) return undefined
    const report = await this.disk.load(
      ({ key, object }) => {
        const collection = this.collection(key)
        try {
          object.scopes = this.interned(object.scopes)
          collection.entries.set(objectKey(object.namespace, object.name), { meta: stripBody(object), labels: labelsOf(object), size: object.body.length })
          this.bodies.set(CacheStore.bodyKey(key, object.namespace, object.name), object.body)
        } catch (error) {
          this.log.warn({ component: key.component, resource: key.resource, name: object.name, err: (error as Error).message }, 'cached object unreadable, skipped')
          return
        }
        collection.origin = 'disk'
        collection.kind ||= object.kind
        collection.apiVersion ||= object.apiVersion
      },
      (key, meta) => {
        const collection = this.collection(key)
        collection.origin = 'disk'
        collection.listResourceVersion = numericVersion(meta.listResourceVersion)
        for (const l of meta.listed) {
          try {
            const scope = parseScope(l)
            collection.listed.set(scope.id, { scope, resourceVersion: l.resourceVersion })
          } catch {
            // a selector this version cannot parse: that scope answers as never listed
          }
        }
      },
    )
    this.log.info({ objects: report.loaded, failed: report.failed.length, collections: this.collections.size }, 'cache loaded')
    return report
  }

  /** The object, undefined when not cached; throws LostObjectError when cached but its body is gone. */
  async get(key: ResourceKey, namespace: string, name: string): Promise<CachedObject | undefined> {
    const entry = this.find(key)?.entries.get(objectKey(namespace, name))
    if (!entry) return undefined
    const object = await this.withBody(key, entry)
    if (!object) throw new LostObjectError([`${objectKey(namespace, name)}: ${entry.lost}`])
    return object
  }

  /** The objects of a scope, or undefined when the hub holds nothing of this resource for this component. */
  async list(key: ResourceKey, scope: ParsedScope): Promise<Selection | undefined> {
    const collection = this.find(key)
    if (!collection || !collection.known) return undefined
    const resourceVersion = collection.maxResourceVersion()
    const items: CachedObject[] = []
    const lost: string[] = []
    for (const entry of [...collection.entries.values()]) {
      if (entry.lost) {
        // a lost object's labels may be unknown (an unreadable file): any list of its namespace may hold it
        const unknown = entry.meta.resourceVersion === ''
        if (unknown ? !scope.namespace || scope.namespace === entry.meta.namespace : inScope(indexed(entry), scope)) lost.push(`${objectKey(entry.meta.namespace, entry.meta.name)}: ${entry.lost}`)
        continue
      }
      const body = this.bodies.get(CacheStore.bodyKey(key, entry.meta.namespace, entry.meta.name))
      if (needsBodies(scope, entry.meta)) {
        // a field selector on other paths: the JSON body decides
        const object = await this.withBody(key, entry)
        if (!object) {
          lost.push(`${objectKey(entry.meta.namespace, entry.meta.name)}: ${entry.lost}`)
          continue
        }
        let document: unknown
        const fieldOf = (path: string) => (object.format === 'json' ? fieldValue((document ??= JSON.parse(object.body.toString())), path) : undefined)
        if (inScope(indexed(entry), scope, fieldOf)) items.push(object)
        continue
      }
      if (!inScope(indexed(entry), scope)) continue
      // the common case, a body still in memory, without a microtask per item
      const object = body ? { ...entry.meta, body } : await this.withBody(key, entry)
      if (object) items.push(object)
      else lost.push(`${objectKey(entry.meta.namespace, entry.meta.name)}: ${entry.lost}`)
    }
    // the apiserver's order: storage keys, bytewise (continue tokens depend on it)
    items.sort((a, b) => cmp(storageKey(a.namespace, a.name), storageKey(b.namespace, b.name)))
    return { items, resourceVersion, collection, complete: collection.coveringScope(scope) !== undefined, lost }
  }

  /**
   * A get response (no scope), or a watch ADDED/MODIFIED through `via`: stored unless the cache
   * already holds something newer. Field values and scopes already known are kept: a get carries
   * none, and must not make kubelet's offline `spec.nodeName=` list forget its pod.
   */
  async put(key: ResourceKey, object: CachedObject, via?: ParsedScope): Promise<void> {
    const change = this.index(key, object, via, false)
    if (change instanceof Promise) return change
    if (change) await this.saveAll(key, [change])
  }

  /**
   * The index's part of a write, done at once: the object to save, a membership update under way
   * (a newer or equal version is held), or undefined when the cache already holds exactly this.
   * `authoritative`: a whole list's item, which replaces even a "newer" version.
   */
  private index(key: ResourceKey, object: CachedObject, via: ParsedScope | undefined, authoritative: boolean): CachedObject | Promise<void> | undefined {
    const collection = this.collection(key)
    collection.kind ||= object.kind
    collection.apiVersion ||= object.apiVersion
    const id = objectKey(object.namespace, object.name)
    const current = collection.entries.get(id)
    const scopes = this.interned(union(current?.meta.scopes, via?.id))
    const fields = current?.meta.fields || object.fields ? { ...current?.meta.fields, ...object.fields } : undefined
    if (current && !current.lost) {
      if (!authoritative && !isNewer(object.resourceVersion, current.meta.resourceVersion)) return this.updateMembership(key, current, scopes, fields)
      if (current.meta.resourceVersion === object.resourceVersion && same(current.meta.scopes, scopes) && sameFields(current.meta.fields, fields)) {
        const body = this.bodies.get(CacheStore.bodyKey(key, object.namespace, object.name))
        if (body?.equals(object.body)) return undefined // what the cache already holds costs no write
      }
    }
    // labels go to disk with the object, so a cold start need not parse bodies for them
    const stored = withIndex(object, scopes, fields, labelsOf(object))
    collection.entries.set(id, { meta: stripBody(stored), labels: stored.labels!, size: stored.body.length })
    collection.lastUpdate = Date.now()
    collection.origin = 'cloud'
    return stored
  }

  /** A newer or equal version is held: only what it belongs to may change. */
  private async updateMembership(key: ResourceKey, entry: Entry, scopes: readonly string[] | undefined, fields: Record<string, string> | undefined): Promise<void> {
    if (same(entry.meta.scopes, scopes) && sameFields(entry.meta.fields, fields)) return
    entry.meta = { ...entry.meta, scopes, fields }
    const object = await this.withBody(key, entry)
    if (object) await this.save(key, { ...object, labels: entry.labels })
  }

  /**
   * A DELETED seen through `via` (or a removal by name): the object leaves that scope, and the cache
   * when no other scope holds it.
   */
  async remove(key: ResourceKey, namespace: string, name: string, via?: ParsedScope): Promise<void> {
    const collection = this.find(key)
    const entry = collection?.entries.get(objectKey(namespace, name))
    if (!collection || !entry) return
    collection.lastUpdate = Date.now()
    const remaining = via && entry.meta.scopes ? entry.meta.scopes.filter(s => s !== via.id) : []
    if (remaining.length > 0) return this.updateMembership(key, entry, this.interned(remaining), entry.meta.fields)
    await this.drop(key, collection, entry)
  }

  private async drop(key: ResourceKey, collection: Collection, entry: Entry): Promise<void> {
    const { namespace, name } = entry.meta
    collection.entries.delete(objectKey(namespace, name))
    this.bodies.delete(CacheStore.bodyKey(key, namespace, name))
    await this.save(key, undefined, namespace, name)
  }

  /**
   * A whole list of one scope (all pages): its items are that scope, and objects it held that the
   * list no longer has leave it. An object of the scope's range held only through scopes this one
   * covers is gone from the cloud; one that another, unrelated scope still holds stays there.
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
      if (listed.has(id)) continue
      const scopes = entry.meta.scopes
      if (scopes?.includes(scope.id)) {
        const remaining = scopes.filter(s => s !== scope.id)
        writes.push(remaining.length > 0 ? this.updateMembership(key, entry, this.interned(remaining), entry.meta.fields) : this.drop(key, collection, entry))
      } else if (inScope(indexed(entry), scope) && (scopes ?? []).every(s => { const other = collection.listed.get(s); return other !== undefined && covers(scope, other.scope) })) {
        writes.push(this.drop(key, collection, entry))
      }
    }
    // A whole list is the apiserver's word on its scope: it replaces even a "newer" cached version
    // (a cluster restored from backup counts from a lower resourceVersion again).
    const changed: CachedObject[] = []
    for (const object of items) {
      const change = this.index(key, object, scope, true)
      if (change instanceof Promise) writes.push(change)
      else if (change) changed.push(change)
    }
    writes.push(this.saveAll(key, changed))
    collection.listed.set(scope.id, { scope, resourceVersion: list.resourceVersion })
    collection.origin = 'cloud'
    collection.lastUpdate = Date.now()
    writes.push(this.disk?.putCollectionMeta(key, collection.meta()).catch(error => this.log.error({ err: (error as Error).message }, 'cache: scope list not saved')) ?? Promise.resolve())
    await Promise.all(writes)
  }

  /** Writes one object, or its removal when `object` is undefined. */
  private save(key: ResourceKey, object: CachedObject | undefined, namespace = object!.namespace, name = object!.name): Promise<void> {
    if (object) return this.saveAll(key, [object])
    if (!this.disk) return Promise.resolve()
    return this.disk.remove(key, namespace, name).then(
      () => this.landed(key, [{ namespace, name, body: undefined }]),
      error => this.failed(key, [{ namespace, name, body: undefined }], error),
    )
  }

  /**
   * Writes objects to disk, all in one journal append. A failure is logged and counted, the bodies
   * stay pinned in memory, and the writes are tried again later with whatever memory holds then.
   */
  private async saveAll(key: ResourceKey, objects: CachedObject[]): Promise<void> {
    for (const object of objects) this.bodies.set(CacheStore.bodyKey(key, object.namespace, object.name), object.body)
    if (!this.disk || objects.length === 0) return
    try {
      await this.disk.putAll(key, objects)
      this.landed(key, objects)
    } catch (error) {
      this.failed(key, objects, error)
    }
  }

  /** Written: what memory holds now has nothing left to catch up on. */
  private landed(key: ResourceKey, written: readonly { namespace: string; name: string; body: Buffer | undefined }[]): void {
    if (this.unsaved.size === 0) return
    const collection = this.find(key)
    for (const { namespace, name, body } of written) {
      const id = CacheStore.bodyKey(key, namespace, name)
      const current = collection?.entries.get(objectKey(namespace, name))
      if (body ? current !== undefined && this.currentBody(id) === body : current === undefined) this.unsaved.delete(id)
    }
  }

  private failed(key: ResourceKey, objects: readonly { namespace: string; name: string; body: Buffer | undefined }[], error: unknown): void {
    this.stats.writeFailures += objects.length
    const first = objects.find(o => !this.unsaved.has(CacheStore.bodyKey(key, o.namespace, o.name)))
    if (first) this.log.error({ component: key.component, resource: resourceDirName(key), object: objectKey(first.namespace, first.name), objects: objects.length, err: (error as Error).message }, 'cache: write failed; kept in memory and retried')
    for (const { namespace, name, body } of objects) {
      const id = CacheStore.bodyKey(key, namespace, name)
      this.unsaved.set(id, { key, namespace, name, body: body ?? this.unsaved.get(id)?.body })
    }
    this.scheduleRetry()
  }

  private currentBody(id: string): Buffer | undefined {
    return this.bodies.get(id) ?? this.unsaved.get(id)?.body
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return
    this.retryTimer = setTimeout(() => void this.retryUnsaved(), this.retryDelay)
    this.retryTimer.unref()
  }

  /** Writes memory's current state of every object whose disk state lags behind. */
  private async retryUnsaved(): Promise<void> {
    const failuresBefore = this.stats.writeFailures
    for (const [id, pending] of [...this.unsaved]) {
      const entry = this.find(pending.key)?.entries.get(objectKey(pending.namespace, pending.name))
      const body = this.currentBody(id)
      await this.save(pending.key, entry && body ? { ...entry.meta, body, labels: entry.labels } : undefined, pending.namespace, pending.name)
    }
    this.retryTimer = undefined
    this.retryDelay = this.stats.writeFailures > failuresBefore ? Math.min(this.retryDelay * 2, 60_000) : (this.options.retryMs ?? 1_000)
    if (this.unsaved.size > 0) this.scheduleRetry()
  }

  /** Readies the disk for a collection about to be written (a watch cache's first list). */
  prepare(key: ResourceKey): void {
    this.disk?.prepare(key)
  }

  async flush(): Promise<void> {
    await this.disk?.flush()
  }

  async close(): Promise<void> {
    if (this.retryTimer) clearTimeout(this.retryTimer)
    await this.disk?.close()
  }
}

/** Cached, but not readable: an offline answer that would include it would be incomplete. */
export class LostObjectError extends Error {
  constructor(readonly lost: string[]) {
    super(`${lost.length} cached object(s) cannot be read (${lost.slice(0, 3).join('; ')}${lost.length > 3 ? '; …' : ''})`)
    this.name = 'LostObjectError'
  }
}

/** What the index keeps: the object without its body and labels (built field by field: a rest spread is slow, and this runs per list item). */
function stripBody(object: CachedObject): StoredMeta {
  const meta: StoredMeta = { apiVersion: object.apiVersion, kind: object.kind, namespace: object.namespace, name: object.name, resourceVersion: object.resourceVersion, format: object.format }
  if (object.fields) meta.fields = object.fields
  if (object.scopes) meta.scopes = object.scopes
  return meta
}

/** The object as it is stored: with the scopes and field values it is known by, and its labels. */
function withIndex(object: CachedObject, scopes: readonly string[] | undefined, fields: Record<string, string> | undefined, labels: Record<string, string>): CachedObject {
  const stored: CachedObject = { apiVersion: object.apiVersion, kind: object.kind, namespace: object.namespace, name: object.name, resourceVersion: object.resourceVersion, format: object.format, body: object.body, labels }
  if (fields) stored.fields = fields
  if (scopes) stored.scopes = scopes
  return stored
}

function indexed(entry: Entry) {
  return { namespace: entry.meta.namespace, name: entry.meta.name, labels: entry.labels, fields: entry.meta.fields }
}

function union(scopes: readonly string[] | undefined, add: string | undefined): readonly string[] | undefined {
  if (add === undefined || scopes?.includes(add)) return scopes
  return [...(scopes ?? []), add].sort()
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
