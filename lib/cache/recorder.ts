// Records what the apiserver answered into the store: gets, whole lists (pages joined), watch
// events. Decides what is cacheable at all. A recording failure is logged and never fails the
// client's request: the cache is a copy, the answer is the apiserver's.
import type { Logger } from 'pino'
import type { RequestInfo } from '../api/requestinfo.ts'
import type { ResourceKey, CachedObject, WireFormat } from './types.ts'
import { CacheStore, parseScope, vouchedFields } from './store.ts'
import type { ParsedScope } from './store.ts'
import { decodeEvent, decodeList, decodeObject } from './decode.ts'
import type { DecodedEvent } from './decode.ts'
import { documentFor, documentsKey } from './documents.ts'

export const defaultCachedComponents = ['kubelet', 'kube-proxy', 'coredns', 'flanneld', 'outpost']

// Never cached: secrets of the moment (tokens), one-shot requests (reviews, CSRs), streams.
const uncachedResources = new Set(['certificatesigningrequests', 'tokenreviews', 'subjectaccessreviews', 'selfsubjectaccessreviews', 'localsubjectaccessreviews', 'selfsubjectrulesreviews', 'events'])

export class CachePolicy {
  private readonly all: boolean
  private readonly components: Set<string>

  constructor(components: string[]) {
    this.all = components.includes('*')
    this.components = new Set(components)
  }

  cachesComponent(component: string): boolean {
    return component !== '' && (this.all || this.components.has(component))
  }

  /** A read whose answer the cache records and can give back offline. */
  isCacheable(info: RequestInfo): boolean {
    return this.cachesComponent(info.component) && isCachedKind(info)
  }
}

/**
 * A read of something the cache may hold, whichever component reads it: offline, a client acting as
 * the node (kubectl on the node, say) is answered from what any component cached.
 */
export function isCachedKind(info: RequestInfo): boolean {
  if (!info.isResourceRequest) return false
  if (info.verb !== 'get' && info.verb !== 'list' && info.verb !== 'watch') return false
  if (info.subresource !== '' && info.subresource !== 'status') return false
  return !uncachedResources.has(info.resource)
}

export function resourceKeyOf(info: RequestInfo): ResourceKey {
  return { component: info.component, group: info.apiGroup, version: info.apiVersion, resource: info.resource }
}

export function scopeOf(info: RequestInfo): ParsedScope {
  return parseScope({ namespace: info.namespace, labelSelector: info.labelSelector, fieldSelector: info.fieldSelector })
}

interface PendingPages {
  key: ResourceKey
  scope: ParsedScope
  items: CachedObject[]
  expires: number
}

const pageTimeoutMs = 5 * 60_000

export class Recorder {
  /** lists whose later pages are still to come, by the continue token that asks for the next page */
  private readonly pending = new Map<string, PendingPages>()

  constructor(
    readonly store: CacheStore,
    private readonly log: Logger,
  ) {}

  private warn(info: RequestInfo, error: unknown, what: string): void {
    this.log.warn({ component: info.component, resource: info.resource, err: (error as Error).message }, `cache: ${what} not recorded`)
  }

  async recordObject(info: RequestInfo, format: WireFormat, body: Buffer): Promise<void> {
    try {
      const object = decodeObject(format, body)
      if (info.subresource === 'status' || object.kind !== 'Status') await this.store.put(resourceKeyOf(info), object)
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

  /** One page of a list; the scope is replaced once the last page has arrived. */
  async recordListPage(info: RequestInfo, format: WireFormat, body: Buffer): Promise<void> {
    try {
      const list = decodeList(format, body)
      const key = resourceKeyOf(info)
      const scope = scopeOf(info)
      const fields = vouchedFields(scope)
      if (fields) for (const item of list.items) item.fields = fields
      this.expirePages()
      const requested = info.query.get('continue')
      let items = list.items
      if (requested) {
        const earlier = this.pending.get(requested)
        if (!earlier) return // the first pages were not seen: this page alone is not the scope
        this.pending.delete(requested)
        items = earlier.items.concat(items)
      }
      if (list.continue) {
        this.pending.set(list.continue, { key, scope, items, expires: Date.now() + pageTimeoutMs })
        return
      }
      await this.store.replaceScope(key, scope, { items, kind: list.kind, apiVersion: list.apiVersion, resourceVersion: list.resourceVersion })
    } catch (error) {
      this.warn(info, error, 'list')
    }
  }

  /** How one watch is recorded, event by event; its scope is parsed once. */
  watch(info: RequestInfo, format: WireFormat): WatchRecording {
    return new WatchRecording(this, info, format, scopeOf(info))
  }

  /** A watch event through `scope`: stored, or taken out of that scope. Errors are logged, never thrown. */
  async recordEvent(info: RequestInfo, format: WireFormat, frame: Buffer, scope: ParsedScope): Promise<DecodedEvent | undefined> {
    try {
      const event = decodeEvent(format, frame)
      if (!event.object) return event
      const key = resourceKeyOf(info)
      if (event.type === 'DELETED') {
        await this.store.remove(key, event.object.namespace, event.object.name, scope)
        return event
      }
      const fields = vouchedFields(scope)
      if (fields) event.object.fields = fields
      await this.store.put(key, event.object, scope)
      return event
    } catch (error) {
      this.warn(info, error, 'watch event')
      return undefined
    }
  }

  private expirePages(): void {
    const now = Date.now()
    for (const [token, pages] of this.pending) if (pages.expires < now) this.pending.delete(token)
  }
}

/**
 * One watch's recording. A WatchList watch (`sendInitialEvents=true`, client-go 1.35's default)
 * opens with the scope's whole state as ADDED events, closed by a BOOKMARK annotated
 * k8s.io/initial-events-end: that much is a list, and replaces the scope as one does (objects
 * deleted while nobody watched leave the cache).
 */
export class WatchRecording {
  private initial: CachedObject[] | undefined

  constructor(
    private readonly recorder: Recorder,
    private readonly info: RequestInfo,
    private readonly format: WireFormat,
    private readonly scope: ParsedScope,
  ) {
    if (info.query.get('sendInitialEvents') === 'true') this.initial = []
  }

  async record(frame: Buffer): Promise<void> {
    const event = await this.recorder.recordEvent(this.info, this.format, frame, this.scope)
    if (!this.initial || !event) return
    if (event.type === 'ADDED' && event.object) this.initial.push(event.object)
    if (event.type === 'BOOKMARK' && event.initialEventsEnd) {
      const items = this.initial
      this.initial = undefined
      const first = items[0]
      await this.recorder.store
        .replaceScope(resourceKeyOf(this.info), this.scope, { items, kind: first?.kind ?? '', apiVersion: first?.apiVersion ?? '', resourceVersion: event.resourceVersion ?? '' })
        .catch(() => {})
    }
  }
}
