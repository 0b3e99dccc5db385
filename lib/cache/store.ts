// The cache's in-memory index: per component and resource (a Collection), the objects the apiserver
// sent, with what offline answers need (labels, vouched-for field values, the scopes each object
// arrived through, the scopes listed whole, the kind). One rule everywhere: the newest version wins;
// a list older than what its scope has seen is a new history (etcd restored from a backup) and
// replaces the scope. Every change goes to the disk as one atomic batch (lib/cache/persist.ts);
// callers await it before they acknowledge.
import type { Logger } from 'pino'
import { LRUCache } from 'lru-cache'
import type { CachedObject, ResourceKey } from './types.ts'
import { objectKey, resourceDirName } from './types.ts'
import type { DiskCache, DiskOp, LoadFailure, LoadReport } from './disk.ts'
import { fieldsOf } from '../api/field-selectors.ts'
import { indexed, labelsOf, same, sameFields, stripBody, union, withIndex } from './entries.ts'
import { covers, describeScope, inScope, needsBodies, parseScope } from './scope.ts'
import type { ParsedScope } from './scope.ts'
import { storageKey } from '../api/continue-token.ts'
import { Collection, wholeCollection } from './collection.ts'
import type { Entry } from './collection.ts'
import { isNotOlder, newestOf, numericVersion } from './versions.ts'
import { Persister } from './persist.ts'
import { LoadGate } from './load-gate.ts'

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

/** A whole list of one scope, as the apiserver answered it. */
export interface ListState {
  items: CachedObject[]
  /** the kind of the items (the list's kind without "List") */
  kind: string
  apiVersion: string
  resourceVersion: string
}

/** An answer the cache will not keep: of another kind than its resource's, or larger than the disk takes. */
export class RejectedError extends Error {
  constructor(
    message: string,
    readonly reason: 'kind' | 'too-large',
  ) {
    super(message)
    this.name = 'RejectedError'
  }
}

/** Log lines that could repeat for every request (an oversized ConfigMap fetched each minute) are said once per object. */
const maxRemembered = 1_000
/** reasons kept per collection for scopes that are not whole */
const maxIncompleteScopes = 256

export class CacheStore {
  private readonly collections = new Map<string, Collection>()
  private readonly bodies: LRUCache<string, Buffer>
  private readonly persister: Persister | undefined
  /** interned scope lists: thousands of objects share a handful */
  private readonly scopeLists = new Map<string, readonly string[]>()
  private readonly said = new Set<string>()
  /** while the disk cache loads: the collections not read yet */
  private gate: LoadGate | undefined
  readonly stats = { lostObjects: 0, rejectedKind: 0, tooLarge: 0, newHistories: 0, olderIgnored: 0 }

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
    if (disk) {
      this.persister = new Persister(
        disk,
        {
          object: (key, namespace, name) => {
            const entry = this.find(key)?.entries.get(objectKey(namespace, name))
            const body = entry && this.memoryBody(key, namespace, name)
            return entry && body ? { ...entry.meta, body, labels: entry.labels } : undefined
          },
          meta: key => this.find(key)?.meta(),
        },
        log,
        options.retryMs,
      )
    }
  }

  /** flat, as objectKey: the LRU keeps one per body */
  private static bodyKey(key: ResourceKey, namespace: string, name: string): string {
    return [CacheStore.collectionId(key), namespace, name].join('\0')
  }

  static collectionId(key: ResourceKey): string {
    return `${key.component}/${resourceDirName(key)}`
  }

  /** Objects whose latest state is not on disk yet (failed writes being retried). */
  get unsavedCount(): number {
    return this.persister?.unsavedCount ?? 0
  }

  get writeFailures(): number {
    return this.persister?.stats.writeFailures ?? 0
  }

  /** Whether what memory holds is on disk (so survives a restart), and if not, why. */
  durability(): { durable: boolean; why?: string } {
    const disk = this.disk?.health()
    const lag = this.persister?.lagReason()
    if (!lag && (!disk || disk.durable)) return { durable: true }
    const space = disk?.neededBytes === undefined ? '' : ` (needed ${disk.neededBytes} bytes, ${disk.availableBytes ?? 'unknown'} free)`
    return { durable: false, why: [disk?.error && `${disk.error}${space}`, lag].filter(Boolean).join('; ') }
  }

  get memory(): { bodies: number; bytes: number } {
    return { bodies: this.bodies.size, bytes: this.bodies.calculatedSize }
  }

  private memoryBody(key: ResourceKey, namespace: string, name: string): Buffer | undefined {
    return this.bodies.get(CacheStore.bodyKey(key, namespace, name)) ?? this.persister?.pinned(key, namespace, name)
  }

  /** The object with its body: from memory, or read back from disk after eviction; undefined when lost. */
  private async withBody(key: ResourceKey, entry: Entry): Promise<CachedObject | undefined> {
    const { meta } = entry
    let body = this.memoryBody(key, meta.namespace, meta.name)
    if (!body && this.disk && !entry.lost) {
      try {
        body = await this.disk.readBody(key, meta.namespace, meta.name)
        if (!body) this.markLost(key, entry, 'its cache file is gone')
      } catch (error) {
        this.markLost(key, entry, (error as Error).message)
      }
      if (body) this.bodies.set(CacheStore.bodyKey(key, meta.namespace, meta.name), body)
    }
    return body ? { ...meta, body, labels: entry.labels } : undefined
  }

  private markLost(key: ResourceKey, entry: Entry, why: string): void {
    if (entry.lost) return
    entry.lost = why
    this.stats.lostObjects++
    this.log.error(
      { component: key.component, resource: resourceDirName(key), object: objectKey(entry.meta.namespace, entry.meta.name), why },
      'cache: object body lost; lists that include it answer 503 until the cloud relists them',
    )
  }

  /** Says something once per subject (bounded), so a repeated request does not repeat the log line. */
  private once(subject: string, say: () => void): void {
    if (this.said.has(subject)) return
    if (this.said.size >= maxRemembered) this.said.clear()
    this.said.add(subject)
    say()
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

  /** Resolves once `key`'s collection is read from disk; undefined once the cache is loaded (no await on the hot path). */
  private whenLoaded(key: ResourceKey): Promise<void> | undefined {
    return this.gate?.until(k => k.component === key.component && sameResource(k, key))
  }

  /** Whether the cache is still being read from disk (it serves what it has read meanwhile). */
  get loading(): boolean {
    return this.gate !== undefined
  }

  /**
   * Every component's collection of `key`'s resource (same group and version): `key`'s own component
   * first, then the others, freshest first. Offline, a node's client is answered from whichever
   * holds what it asks for (each read from disk first).
   */
  async candidates(key: ResourceKey): Promise<Collection[]> {
    await this.gate?.until(k => sameResource(k, key))
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

  /**
   * Reads the disk cache, smallest collections first; each can be read and written as soon as it is
   * in (until then its readers and writers wait), so a hub may serve while it loads.
   */
  async load(): Promise<LoadReport | undefined> {
    if (!this.disk) return undefined
    const gate = new LoadGate()
    this.gate = gate
    try {
      return await this.loadFrom(this.disk, gate)
    } finally {
      gate.finish()
      this.gate = undefined
    }
  }

  private async loadFrom(disk: DiskCache, gate: LoadGate): Promise<LoadReport> {
    const report = await disk.load(
      ({ key, object }) => {
        const collection = this.collection(key)
        try {
          object.scopes = this.interned(object.scopes)
          collection.entries.set(objectKey(object.namespace, object.name), { meta: stripBody(object), labels: labelsOf(object), size: object.body.length })
          this.bodies.set(CacheStore.bodyKey(key, object.namespace, object.name), object.body)
        } catch (error) {
          this.log.warn(
            { component: key.component, resource: key.resource, name: object.name, err: (error as Error).message },
            'cached object unreadable, skipped',
          )
          return
        }
        collection.origin = 'disk'
        collection.kind ||= object.kind
      },
      (key, meta) => {
        const collection = this.collection(key)
        collection.origin = 'disk'
        collection.listResourceVersion = numericVersion(meta.listResourceVersion)
        if (meta.kind && meta.apiVersion === collection.apiVersion) collection.kind ||= meta.kind
        for (const l of meta.listed) {
          try {
            const scope = parseScope(l)
            collection.listed.set(scope.id, { scope, resourceVersion: l.resourceVersion, reached: numericVersion(l.resourceVersion) })
          } catch {
            // a selector this version cannot parse: that scope answers as never listed
          }
        }
      },
      {
        planned: keys => gate.plan(keys),
        loaded: (key, failed) => {
          this.settleLoaded(this.collection(key), failed)
          gate.loaded(key)
        },
      },
    )
    this.log.info({ objects: report.loaded, failed: report.failed.length, collections: this.collections.size }, 'cache loaded')
    return report
  }

  /** A collection just read: what damage it had, and how far each listed scope was followed (at least as far as the objects it holds). */
  private settleLoaded(collection: Collection, failed: readonly LoadFailure[]): void {
    for (const failure of failed)
      collection.incomplete.set(wholeCollection, { why: `its cache file was damaged (${failure.path}: ${failure.reason})`, since: Date.now() })
    if (collection.listed.size === 0) return
    for (const { meta } of collection.entries.values()) {
      const rv = numericVersion(meta.resourceVersion)
      for (const id of meta.scopes ?? []) {
        const listed = collection.listed.get(id)
        if (listed && rv > listed.reached) listed.reached = rv
      }
    }
  }

  /**
   * Whether the cache holds exactly these bytes for the object: the apiserver answered a get with
   * what the cache has, which is then confirmed fresh with nothing to decode or write.
   */
  confirms(key: ResourceKey, namespace: string, name: string, body: Buffer): boolean {
    const collection = this.find(key)
    const entry = collection?.entries.get(objectKey(namespace, name))
    if (!collection || !entry || entry.lost || this.whenLoaded(key)) return false
    if (!this.memoryBody(key, namespace, name)?.equals(body)) return false
    collection.lastUpdate = Date.now()
    return true
  }

  /** The object, undefined when not cached; throws LostObjectError when cached but its body is gone. */
  async get(key: ResourceKey, namespace: string, name: string): Promise<CachedObject | undefined> {
    const loading = this.whenLoaded(key)
    if (loading) await loading
    const entry = this.find(key)?.entries.get(objectKey(namespace, name))
    if (!entry) return undefined
    const object = await this.withBody(key, entry)
    if (!object) throw new LostObjectError([`${objectKey(namespace, name)}: ${entry.lost}`])
    return object
  }

  /** The objects of a scope, or undefined when the hub holds nothing of this resource for this component. */
  async list(key: ResourceKey, scope: ParsedScope): Promise<Selection | undefined> {
    const loading = this.whenLoaded(key)
    if (loading) await loading
    const collection = this.find(key)
    if (!collection || !collection.known) return undefined
    const resourceVersion = collection.maxResourceVersion()
    const items: CachedObject[] = []
    const lost: string[] = []
    for (const entry of [...collection.entries.values()]) {
      if (entry.lost) {
        // a lost object's labels may be unknown (an unreadable file): any list of its namespace may hold it
        const unknown = entry.meta.resourceVersion === ''
        if (unknown ? !scope.namespace || scope.namespace === entry.meta.namespace : inScope(indexed(entry), scope))
          lost.push(`${objectKey(entry.meta.namespace, entry.meta.name)}: ${entry.lost}`)
        continue
      }
      const body = this.memoryBody(key, entry.meta.namespace, entry.meta.name)
      if (needsBodies(scope, entry.meta)) {
        // a field selector on other paths: the JSON body decides
        const object = await this.withBody(key, entry)
        if (!object) {
          lost.push(`${objectKey(entry.meta.namespace, entry.meta.name)}: ${entry.lost}`)
          continue
        }
        // the values the apiserver compares (a missing hostNetwork is "false", …), for the labels it accepts
        let fields: Record<string, string> | undefined
        const fieldOf = (path: string) => {
          if (object.format !== 'json') return undefined
          fields ??= fieldsOf(key.group, key.resource, JSON.parse(object.body.toString()))
          return Object.hasOwn(fields, path) ? fields[path] : undefined
        }
        if (inScope(indexed(entry), scope, fieldOf)) items.push(object)
        continue
      }
      if (!inScope(indexed(entry), scope)) continue
      // the common case, a body still in memory, without a microtask per item
      const object = body ? { ...entry.meta, body, labels: entry.labels } : await this.withBody(key, entry)
      if (object) items.push(object)
      else lost.push(`${objectKey(entry.meta.namespace, entry.meta.name)}: ${entry.lost}`)
    }
    // the apiserver's order: storage keys, bytewise (continue tokens depend on it)
    items.sort((a, b) => cmp(storageKey(a.namespace, a.name), storageKey(b.namespace, b.name)))
    return { items, resourceVersion, collection, complete: collection.coveringScope(scope) !== undefined, lost }
  }

  /**
   * Checks an answer against its collection (kind, size) before anything of it is kept; learns the
   * kind of a resource the hub has no table for. Throws RejectedError.
   */
  private admit(collection: Collection, kind: string, apiVersion: string, what: string): void {
    const problem = collection.kindProblem(kind, apiVersion)
    if (problem) {
      this.stats.rejectedKind++
      const key = collection.key
      this.once(`kind ${CacheStore.collectionId(key)} ${kind} ${apiVersion}`, () =>
        this.log.warn({ component: key.component, resource: resourceDirName(key), kind, apiVersion }, `cache: ${what} not kept: ${problem}`),
      )
      throw new RejectedError(`${what} of ${resourceDirName(key)}: ${problem}`, 'kind')
    }
    collection.kind ||= kind
  }

  /** Whether the disk can take the object; one that cannot is not cached (and any older copy leaves). */
  private fits(key: ResourceKey, object: CachedObject): boolean {
    if (!this.disk || this.disk.fits(object)) return true
    this.stats.tooLarge++
    this.once(`size ${CacheStore.collectionId(key)} ${objectKey(object.namespace, object.name)}`, () =>
      this.log.warn(
        { component: key.component, resource: resourceDirName(key), object: objectKey(object.namespace, object.name), bytes: object.body.length },
        'cache: object too large to cache; relayed, not kept',
      ),
    )
    return false
  }

  /**
   * A get response or a write's answer (no scope), or a watch ADDED/MODIFIED through `via`: stored
   * unless the cache already holds something newer. Field values and scopes already known are kept:
   * a get carries none, and must not make kubelet's offline `spec.nodeName=` list forget its pod.
   */
  async put(key: ResourceKey, object: CachedObject, via?: ParsedScope): Promise<void> {
    const loading = this.whenLoaded(key)
    if (loading) await loading
    const collection = this.collection(key)
    this.admit(collection, object.kind, object.apiVersion, `${object.kind || 'an object'} ${objectKey(object.namespace, object.name)}`)
    this.follow(collection, via, object.resourceVersion)
    if (!this.fits(key, object)) return this.forget(key, collection, object, via)
    const change = await this.index(key, collection, object, via, false)
    if (change) await this.save(key, [{ t: 'put', object: change }])
  }

  /** An object too large to keep: no older copy of it may stand in for it, and a scope it is in is not whole. */
  private async forget(key: ResourceKey, collection: Collection, object: CachedObject, via: ParsedScope | undefined): Promise<void> {
    const why = `${objectKey(object.namespace, object.name)} (${object.body.length} bytes) is too large to cache`
    let unlisted = via ? this.invalidate(collection, via, why) : false
    const entry = collection.entries.get(objectKey(object.namespace, object.name))
    const ops: DiskOp[] = []
    if (entry) {
      for (const id of entry.meta.scopes ?? []) {
        const listed = collection.listed.get(id)
        if (listed) unlisted = this.invalidate(collection, listed.scope, why) || unlisted
      }
      ops.push(...this.drop(key, collection, entry))
    }
    if (unlisted) ops.push({ t: 'meta', meta: collection.meta() })
    await this.save(key, ops)
  }

  /** A BOOKMARK or event through a listed scope: how far that scope has been followed. */
  private follow(collection: Collection, via: ParsedScope | undefined, resourceVersion: string): void {
    const listed = via && collection.listed.get(via.id)
    if (!listed) return
    const rv = numericVersion(resourceVersion)
    if (rv > listed.reached) listed.reached = rv
  }

  /** A BOOKMARK through `via`. */
  progress(key: ResourceKey, via: ParsedScope, resourceVersion: string): void {
    const collection = this.find(key)
    if (collection) this.follow(collection, via, resourceVersion)
  }

  /**
   * The index's part of a write: the object to save, or undefined when the cache already holds
   * exactly this. `authoritative`: a new history's list, which replaces even a "newer" version.
   */
  private index(
    key: ResourceKey,
    collection: Collection,
    object: CachedObject,
    via: ParsedScope | undefined,
    authoritative: boolean,
  ): CachedObject | undefined | Promise<CachedObject | undefined> {
    const id = objectKey(object.namespace, object.name)
    const current = collection.entries.get(id)
    const scopes = this.interned(union(current?.meta.scopes, via?.id))
    const fields = current?.meta.fields || object.fields ? { ...current?.meta.fields, ...object.fields } : undefined
    collection.lastUpdate = Date.now()
    if (current && !current.lost) {
      if (!authoritative && !isNotOlder(object.resourceVersion, current.meta.resourceVersion)) {
        this.stats.olderIgnored++
        return this.updateMembership(key, current, scopes, fields)
      }
      if (current.meta.resourceVersion === object.resourceVersion && same(current.meta.scopes, scopes) && sameFields(current.meta.fields, fields)) {
        const body = this.memoryBody(key, object.namespace, object.name)
        if (body?.equals(object.body)) return undefined // what the cache already holds costs no write
      }
    }
    // labels go to disk with the object, so a cold start need not parse bodies for them
    const stored = withIndex(object, scopes, fields, labelsOf(object))
    collection.entries.set(id, { meta: stripBody(stored), labels: stored.labels!, size: stored.body.length })
    collection.origin = 'cloud'
    this.bodies.set(CacheStore.bodyKey(key, object.namespace, object.name), object.body)
    return stored
  }

  /** A newer or equal version is held: only what it belongs to may change (its body is written again with it). */
  private updateMembership(
    key: ResourceKey,
    entry: Entry,
    scopes: readonly string[] | undefined,
    fields: Record<string, string> | undefined,
  ): undefined | Promise<CachedObject | undefined> {
    if (same(entry.meta.scopes, scopes) && sameFields(entry.meta.fields, fields)) return undefined
    entry.meta = { ...entry.meta, scopes, fields }
    return this.withBody(key, entry).then(object => object && { ...object, labels: entry.labels })
  }

  /**
   * A DELETED seen through `via` (or a removal by name): the object leaves that scope, and the cache
   * when no other scope holds it. A deletion older than the copy held (the object was made again
   * since) changes nothing.
   */
  async remove(key: ResourceKey, namespace: string, name: string, via?: ParsedScope, resourceVersion = ''): Promise<void> {
    const loading = this.whenLoaded(key)
    if (loading) await loading
    const collection = this.find(key)
    if (collection) this.follow(collection, via, resourceVersion)
    const entry = collection?.entries.get(objectKey(namespace, name))
    if (!collection || !entry) return
    if (resourceVersion && !isNotOlder(resourceVersion, entry.meta.resourceVersion)) {
      this.stats.olderIgnored++
      return
    }
    collection.lastUpdate = Date.now()
    const remaining = via && entry.meta.scopes ? entry.meta.scopes.filter(s => s !== via.id) : []
    if (remaining.length > 0) {
      const change = await this.updateMembership(key, entry, this.interned(remaining), entry.meta.fields)
      if (change) await this.save(key, [{ t: 'put', object: change }])
      return
    }
    await this.save(key, this.drop(key, collection, entry))
  }

  private drop(key: ResourceKey, collection: Collection, entry: Entry): DiskOp[] {
    const { namespace, name } = entry.meta
    collection.entries.delete(objectKey(namespace, name))
    this.bodies.delete(CacheStore.bodyKey(key, namespace, name))
    return [{ t: 'remove', namespace, name }]
  }

  /**
   * A whole list of one scope (all pages): its items are that scope, and objects it held that the
   * list no longer has leave it. The newest version of each object wins, unless the list is older
   * than what the scope has already seen: then the apiserver's history went back (etcd restored
   * from a backup), and the list replaces the scope as it stands, newer copies included; every other
   * scope of the collection is from the old history and is no longer whole.
   */
  async replaceScope(key: ResourceKey, scope: ParsedScope, list: ListState): Promise<void> {
    const loading = this.whenLoaded(key)
    if (loading) await loading
    const collection = this.collection(key)
    this.admit(collection, list.kind, list.apiVersion, `a ${list.kind || 'kind-less'} list`)
    const ids = list.items.map(o => objectKey(o.namespace, o.name))
    const listed = new Set(ids)
    const all = listed.size === ids.length ? list.items : newestOf(list.items)
    // what the disk cannot take is not kept (nor any older copy of it), and the scope is not whole without it
    const tooLarge = all.filter(o => !this.fits(key, o))
    const items = tooLarge.length === 0 ? all : all.filter(o => !tooLarge.includes(o))
    const listVersion = numericVersion(list.resourceVersion)
    const prior = collection.listed.get(scope.id)
    const newHistory = prior !== undefined && listVersion > 0n && listVersion < prior.reached
    if (newHistory) {
      this.stats.newHistories++
      this.log.warn(
        { component: key.component, resource: resourceDirName(key), scope: describeScope(scope), listed: list.resourceVersion, seen: prior.reached.toString() },
        "cache: a list older than what its scope has seen: the apiserver's history went back; the scope is replaced",
      )
      for (const other of [...collection.listed.values()])
        if (other !== prior)
          this.invalidate(collection, other.scope, `the apiserver's history went back (a list at ${list.resourceVersion} after ${prior.reached})`)
      collection.listResourceVersion = listVersion
    } else if (listVersion > collection.listResourceVersion) {
      collection.listResourceVersion = listVersion
    }
    const ops: DiskOp[] = []
    const updates: Promise<CachedObject | undefined>[] = []
    for (const object of tooLarge) {
      const entry = collection.entries.get(objectKey(object.namespace, object.name))
      if (entry) ops.push(...this.drop(key, collection, entry))
    }
    for (const [id, entry] of collection.entries) {
      if (listed.has(id)) continue
      const newer = numericVersion(entry.meta.resourceVersion) > listVersion
      // a copy newer than the list came after it (through another scope or a get): the list cannot speak for it, unless it is a new history
      if (newer && !newHistory) continue
      const scopes = entry.meta.scopes
      if (newer || (scopes?.includes(scope.id) && scopes.length === 1)) ops.push(...this.drop(key, collection, entry))
      else if (scopes?.includes(scope.id)) {
        const change = this.updateMembership(key, entry, this.interned(scopes.filter(s => s !== scope.id)), entry.meta.fields)
        if (change) updates.push(change)
      } else if (
        inScope(indexed(entry), scope) &&
        (scopes ?? []).every(s => {
          const other = collection.listed.get(s)
          return other !== undefined && covers(scope, other.scope)
        })
      ) {
        ops.push(...this.drop(key, collection, entry))
      }
    }
    for (const object of items) {
      const change = this.index(key, collection, object, scope, newHistory)
      if (change instanceof Promise) updates.push(change)
      else if (change) ops.push({ t: 'put', object: change })
    }
    for (const change of await Promise.all(updates)) if (change) ops.push({ t: 'put', object: change })
    if (tooLarge.length === 0) {
      collection.listed.set(scope.id, { scope, resourceVersion: list.resourceVersion, reached: listVersion })
      collection.incomplete.delete(scope.id)
    } else {
      const first = tooLarge[0]
      this.invalidate(
        collection,
        scope,
        `${objectKey(first.namespace, first.name)} (${first.body.length} bytes)${tooLarge.length > 1 ? ` and ${tooLarge.length - 1} more are` : ' is'} too large to cache`,
      )
    }
    collection.origin = 'cloud'
    collection.lastUpdate = Date.now()
    ops.push({ t: 'meta', meta: collection.meta() })
    await this.save(key, ops)
  }

  /**
   * What the cache holds of a scope is no longer known to be whole (an event that could not be
   * read, a watch that skipped ahead, an object too large): offline, its lists are refused, with
   * why, until it is listed whole again.
   */
  async invalidateScope(key: ResourceKey, scope: ParsedScope, why: string): Promise<void> {
    const loading = this.whenLoaded(key)
    if (loading) await loading
    const collection = this.find(key)
    if (!collection) return
    if (this.invalidate(collection, scope, why)) await this.save(key, [{ t: 'meta', meta: collection.meta() }])
  }

  /** Returns whether a listed scope was dropped (the meta record must be written again). */
  private invalidate(collection: Collection, scope: ParsedScope, why: string): boolean {
    collection.incomplete.delete(scope.id)
    collection.incomplete.set(scope.id, { scope, why, since: Date.now() })
    // scopes are what clients send: the oldest reasons go first
    for (const id of collection.incomplete.keys()) {
      if (collection.incomplete.size <= maxIncompleteScopes) break
      if (id !== wholeCollection) collection.incomplete.delete(id)
    }
    if (!collection.listed.delete(scope.id)) return false
    const key = collection.key
    this.log.warn(
      { component: key.component, resource: resourceDirName(key), scope: describeScope(scope), why },
      'cache: a scope is no longer whole; offline its lists answer 503 until it is listed again',
    )
    return true
  }

  /** Hands a change to the disk (none without one); its ops are worked out by the caller whether or not there is a disk. */
  private async save(key: ResourceKey, ops: DiskOp[]): Promise<void> {
    await this.persister?.write(key, ops)
  }

  /** Readies the disk for a collection about to be written (a watch cache's first list). */
  prepare(key: ResourceKey): void {
    const disk = this.disk
    if (!disk) return
    const wait = this.whenLoaded(key)
    if (wait) void wait.then(() => disk.prepare(key))
    else disk.prepare(key)
  }

  async flush(): Promise<void> {
    await this.disk?.flush()
  }

  async close(): Promise<void> {
    this.persister?.close()
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

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

function sameResource(a: ResourceKey, b: ResourceKey): boolean {
  return a.group === b.group && a.version === b.version && a.resource === b.resource
}
