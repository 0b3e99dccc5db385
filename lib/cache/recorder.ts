// Records what the apiserver answered into the store: gets, the answers to the node's own writes,
// whole lists (pages joined), watch events. Decides what is cacheable at all, and records only the
// present: a list read at a past resourceVersion is relayed, never kept as the scope. A recording
// failure is logged and never fails the client's request: the cache is a copy, the answer is the
// apiserver's.
import { objectKey, resourceKeyOf } from './types.ts'
import { scopeOf } from './scope.ts'
import { listStatesPresent } from '../api/requestinfo.ts'
import type { Logger } from 'pino'
import type { RequestInfo } from '../api/requestinfo.ts'
import { queryFlag } from '../api/requestinfo.ts'
import type { ResourceKey, CachedObject } from './types.ts'
import { CacheStore, RejectedError } from './store.ts'
import { decodeEvent, decodeList, decodeObject } from './decode.ts'
import type { DecodedEvent } from './decode.ts'
import { documentFor, documentsKey } from './documents.ts'
import { vouchedFields } from './scope.ts'
import type { ParsedScope } from './scope.ts'
import type { WireFormat } from '../api/wire-format.ts'

export const defaultCachedComponents = ['kubelet', 'kube-proxy', 'coredns', 'flanneld', 'outpost']

// Never cached: secrets of the moment (tokens), one-shot requests (reviews, CSRs), streams.
const uncachedResources = new Set([
  'certificatesigningrequests',
  'tokenreviews',
  'subjectaccessreviews',
  'selfsubjectaccessreviews',
  'localsubjectaccessreviews',
  'selfsubjectrulesreviews',
  'events',
])

const writeVerbs = new Set(['create', 'update', 'patch'])

/**
 * With --cache-components=*, how many components get a cache of their own: each has a directory
 * and its own copy of what it reads, so the User-Agents a local client makes up must not multiply
 * them. The first ones seen keep theirs; later ones are relayed, not cached.
 */
export const maxCachedComponents = 32

export class CachePolicy {
  private readonly all: boolean
  private readonly components: Set<string>
  /** with '*': the components that got a cache so far */
  private readonly seen = new Set<string>()

  constructor(components: string[]) {
    this.all = components.includes('*')
    this.components = new Set(components)
  }

  cachesComponent(component: string): boolean {
    if (component === '') return false
    if (this.components.has(component) || !this.all) return this.components.has(component)
    if (this.seen.has(component)) return true
    if (this.seen.size >= maxCachedComponents) return false
    this.seen.add(component)
    return true
  }

  /** A read whose answer the cache records and can give back offline. */
  isCacheable(info: RequestInfo): boolean {
    return this.cachesComponent(info.component) && isCachedKind(info)
  }

  /**
   * A write whose answer the cache records like a read: what the node wrote, it reads back (kubelet
   * creates its Lease and CSINode once, then only renews the Lease from the last answer).
   */
  recordsWrite(info: RequestInfo): boolean {
    return this.cachesComponent(info.component) && isRecordedWrite(info)
  }
}

function isCachedResource(info: RequestInfo): boolean {
  if (!info.isResourceRequest) return false
  if (info.subresource !== '' && info.subresource !== 'status') return false
  return !uncachedResources.has(info.resource)
}

/**
 * A read of something the cache may hold, whichever component reads it: offline, a client acting as
 * the node (kubectl on the node, say) is answered from what any component cached.
 */
export function isCachedKind(info: RequestInfo): boolean {
  return (info.verb === 'get' || info.verb === 'list' || info.verb === 'watch') && isCachedResource(info)
}

/** A create, update or patch of a cached resource that really writes (not a dry run). */
export function isRecordedWrite(info: RequestInfo): boolean {
  return writeVerbs.has(info.verb) && isCachedResource(info) && !info.query.has('dryRun')
}

interface PendingPages {
  key: ResourceKey
  scope: ParsedScope
  /** the version every page must be at: one list, one snapshot */
  resourceVersion: string
  kind: string
  apiVersion: string
  items: CachedObject[]
  bytes: number
  expires: number
}

const pageTimeoutMs = 5 * 60_000
/** lists whose later pages may still come: a client that never finishes one costs this much at most */
const maxPendingLists = 32
const maxPendingBytes = 128 * 1024 * 1024

export class Recorder {
  /** lists whose later pages are still to come, by who asked, what, where, and the token of the next page */
  private readonly pending = new Map<string, PendingPages>()
  private pendingBytes = 0

  constructor(
    readonly store: CacheStore,
    private readonly log: Logger,
  ) {}

  private warn(info: RequestInfo, error: unknown, what: string): void {
    if (error instanceof RejectedError) return // the store has said it, once
    this.log.warn({ component: info.component, resource: info.resource, err: (error as Error).message }, `cache: ${what} not recorded`)
  }

  /** A get's answer, or the answer to the node's own create, update or patch. */
  async recordObject(info: RequestInfo, format: WireFormat, body: Buffer): Promise<void> {
    // a get answered with the bytes the cache holds (the usual case): nothing to parse or write
    if (info.verb === 'get' && info.name && this.store.confirms(resourceKeyOf(info), info.namespace, info.name, body)) return
    try {
      const object = decodeObject(format, body)
      if (object.kind !== 'Status') await this.store.put(resourceKeyOf(info), object)
    } catch (error) {
      this.warn(info, error, 'object')
    }
  }

  async recordDocument(info: RequestInfo, contentType: string, body: Buffer): Promise<void> {
    try {
      JSON.parse(body.toString()) // only a whole JSON document is worth keeping
      const document = documentFor(info, contentType, body)
      if (document) await this.store.put(documentsKey, document)
    } catch (error) {
      this.warn(info, error, 'discovery document')
    }
  }

  private static pageKey(info: RequestInfo, scope: ParsedScope, token: string): string {
    return [info.component, info.apiGroup, info.apiVersion, info.resource, scope.id, token].join('\0')
  }

  /** One page of a list; the scope is replaced once the last page has arrived. */
  async recordListPage(info: RequestInfo, format: WireFormat, body: Buffer): Promise<void> {
    try {
      const requested = info.query.get('continue')
      if (!requested && !listStatesPresent(info)) return
      const list = decodeList(format, body)
      const key = resourceKeyOf(info)
      const scope = scopeOf(info)
      const fields = vouchedFields(scope)
      if (fields) for (const item of list.items) item.fields = fields
      this.expirePages()
      let items = list.items
      let bytes = items.reduce((sum, o) => sum + o.body.length, 0)
      if (requested) {
        const pageKey = Recorder.pageKey(info, scope, requested)
        const earlier = this.pending.get(pageKey)
        if (!earlier) return // the first pages were not seen (or not the present): this page alone is not the scope
        this.forgetPages(pageKey, earlier)
        // the pages of one list are one snapshot; a token the apiserver renewed after a compaction (a 410) continues at another version
        if (earlier.resourceVersion !== list.resourceVersion || earlier.kind !== list.kind) return
        items = earlier.items.concat(items)
        bytes += earlier.bytes
      }
      if (list.continue) {
        this.keepPages(Recorder.pageKey(info, scope, list.continue), {
          key,
          scope,
          resourceVersion: list.resourceVersion,
          kind: list.kind,
          apiVersion: list.apiVersion,
          items,
          bytes,
          expires: Date.now() + pageTimeoutMs,
        })
        return
      }
      await this.store.replaceScope(key, scope, { items, kind: list.kind, apiVersion: list.apiVersion, resourceVersion: list.resourceVersion })
    } catch (error) {
      this.warn(info, error, 'list')
    }
  }

  private keepPages(pageKey: string, pages: PendingPages): void {
    this.pending.set(pageKey, pages)
    this.pendingBytes += pages.bytes
    // the oldest unfinished lists go first: a client paging for ever cannot hold the hub's memory
    for (const [oldest, held] of this.pending) {
      if (this.pending.size <= maxPendingLists && this.pendingBytes <= maxPendingBytes) break
      this.forgetPages(oldest, held)
    }
  }

  private forgetPages(pageKey: string, pages: PendingPages): void {
    if (this.pending.delete(pageKey)) this.pendingBytes -= pages.bytes
  }

  /** How one watch is recorded, event by event; its scope is parsed once. */
  watch(info: RequestInfo, format: WireFormat): WatchRecording {
    return new WatchRecording(this, info, format, scopeOf(info))
  }

  /** A watch event through `scope`: stored, or taken out of that scope. Errors are logged, never thrown. */
  async recordEvent(info: RequestInfo, format: WireFormat, frame: Buffer, scope: ParsedScope): Promise<DecodedEvent | undefined> {
    const key = resourceKeyOf(info)
    try {
      const event = decodeEvent(format, frame)
      if (event.type === 'BOOKMARK' && event.resourceVersion) this.store.progress(key, scope, event.resourceVersion)
      if (!event.object) return event
      if (event.type === 'DELETED') {
        await this.store.remove(key, event.object.namespace, event.object.name, scope, event.object.resourceVersion)
        return event
      }
      const fields = vouchedFields(scope)
      if (fields) event.object.fields = fields
      await this.store.put(key, event.object, scope)
      return event
    } catch (error) {
      this.warn(info, error, 'watch event')
      // an event the cache did not take: what it holds of the scope is no longer what the apiserver said
      await this.store.invalidateScope(key, scope, `a watch event could not be recorded (${(error as Error).message})`).catch(() => {})
      return undefined
    }
  }

  private expirePages(): void {
    const now = Date.now()
    for (const [token, pages] of this.pending) if (pages.expires < now) this.forgetPages(token, pages)
  }
}

/**
 * One watch's recording. A WatchList watch (`sendInitialEvents=true`, client-go 1.35's default)
 * opens with the scope's whole state as ADDED events, closed by a BOOKMARK annotated
 * k8s.io/initial-events-end: that much is a list, and replaces the scope as one does (objects
 * deleted while nobody watched leave the cache). Only the names of the initial objects are held
 * until then (each object is in the store already): an apiserver without WatchList (before 1.27)
 * sends the state with no end, and 20 such watches of a 12.5 MB scope must not hold 20 copies of
 * it. An event other than ADDED before the end says the end will not come. A watch that starts
 * "from now" (no resourceVersion, or 0) after the scope was listed skips whatever was deleted in
 * between: the scope is no longer known whole until it is listed again.
 */
export class WatchRecording {
  private initial: { namespace: string; name: string }[] | undefined
  private started = false

  constructor(
    private readonly recorder: Recorder,
    private readonly info: RequestInfo,
    private readonly format: WireFormat,
    private readonly scope: ParsedScope,
  ) {
    if (queryFlag(info, 'sendInitialEvents')) this.initial = []
  }

  private async start(): Promise<void> {
    this.started = true
    const rv = this.info.resourceVersion
    if (this.initial || (rv !== '' && rv !== '0')) return
    await this.recorder.store.invalidateScope(
      resourceKeyOf(this.info),
      this.scope,
      `watched from "now" (resourceVersion ${JSON.stringify(rv)}) without a list: deletions before it are unknown`,
    )
  }

  async record(frame: Buffer): Promise<void> {
    if (!this.started) await this.start().catch(() => {})
    const event = await this.recorder.recordEvent(this.info, this.format, frame, this.scope)
    if (!this.initial || !event) return
    if (event.type === 'ADDED' && event.object) this.initial.push({ namespace: event.object.namespace, name: event.object.name })
    else if (event.type === 'MODIFIED' || event.type === 'DELETED') this.initial = undefined
    else if (event.type === 'BOOKMARK' && event.initialEventsEnd) {
      const names = this.initial
      this.initial = undefined
      await this.replaceWith(names, event.resourceVersion ?? '').catch(error =>
        this.recorder.store
          .invalidateScope(resourceKeyOf(this.info), this.scope, `the initial events could not be recorded (${(error as Error).message})`)
          .catch(() => {}),
      )
    }
  }

  /** The scope is what the initial events named, each as the store holds it; not whole if one of them is not held. */
  private async replaceWith(names: { namespace: string; name: string }[], resourceVersion: string): Promise<void> {
    const key = resourceKeyOf(this.info)
    const store = this.recorder.store
    const items: CachedObject[] = []
    for (const { namespace, name } of names) {
      const object = await store.get(key, namespace, name)
      if (!object) return store.invalidateScope(key, this.scope, `${objectKey(namespace, name)} of the initial events is not cached`)
      items.push(object)
    }
    const collection = store.collection(key)
    const first = items[0]
    await store.replaceScope(key, this.scope, {
      items,
      kind: first?.kind ?? collection.kind,
      apiVersion: first?.apiVersion ?? collection.apiVersion,
      resourceVersion,
    })
  }
}
