// The multiplexer: one watch cache per (resource, scope, wire format) for what node components
// list and watch all day (Services, EndpointSlices v1 and v1beta1, Endpoints, Nodes, and kubelet's
// own pods), each with one upstream list+watch, serving every local client, online and offline.
// Two components asking for the same scope share one upstream watch; a scope nobody has used for a
// grace period is dropped. Disk: each cache writes to one collection per format shared by every
// component (`shared-json`, `shared-protobuf`), so what kube-proxy and coredns share is written once.
import type { Logger } from 'pino'
import type { RequestInfo } from '../api/requestinfo.ts'
import { encodeQuery, resourcePath } from '../api/paths.ts'
import type { Upstream } from '../upstream/upstream.ts'
import type { LiveStreams } from './streams.ts'
import type { CacheStore } from '../cache/store.ts'
import type { ResourceKey } from '../cache/types.ts'
import type { ParsedScope } from '../cache/scope.ts'
import { describeScope } from '../cache/scope.ts'
import { WatchCache } from './cache.ts'
import { Reflector, jsonAccept, protobufAccept } from './reflector.ts'
import { scopeOf } from '../cache/scope.ts'
import type { WireFormat } from '../api/wire-format.ts'

export interface WatchCachesOptions {
  upstream: Upstream
  store?: CacheStore
  streams?: LiveStreams
  isOnline: () => boolean
  log: Logger
  nodeName: string
  silenceMs?: number
  /** a cache nobody has listed or watched for this long is dropped (default 5 min) */
  graceMs?: number
  windowSize?: number
  observer?: WatchCacheObserver
}

/** What the metrics want to know. */
export interface WatchCacheObserver {
  upstreamWatchOpened(resource: string, format: WireFormat): () => void
  relisted(resource: string, format: WireFormat): void
  received(resource: string, format: WireFormat, bytes: number): void
}

const eligible: Record<string, Set<string>> = {
  '/v1': new Set(['services', 'endpoints', 'nodes', 'pods']),
  'discovery.k8s.io/v1': new Set(['endpointslices']),
  'discovery.k8s.io/v1beta1': new Set(['endpointslices']),
}

export function sharedComponent(format: WireFormat): string {
  return `shared-${format}`
}

interface Entry {
  cache: WatchCache
  reflector: Reflector
  resource: string
  /** components that listed or watched through it */
  components: Set<string>
}

export class WatchCaches {
  private readonly caches = new Map<string, Entry>()
  private readonly sweeper: NodeJS.Timeout

  constructor(private readonly options: WatchCachesOptions) {
    const grace = options.graceMs ?? 5 * 60_000
    this.sweeper = setInterval(() => this.sweep(grace), Math.min(grace, 60_000))
    this.sweeper.unref()
  }

  /** Whether a list or watch is one a shared watch cache serves. */
  serves(info: RequestInfo): boolean {
    if (info.verb !== 'list' && info.verb !== 'watch') return false
    if (info.subresource !== '' || !eligible[`${info.apiGroup}/${info.apiVersion}`]?.has(info.resource)) return false
    // a single object (fieldSelector metadata.name=…) is fine; kubelet's pods only for this node
    if (info.resource === 'pods')
      return info.namespace === '' && info.fieldSelector.replace(/\s/g, '') === `spec.nodeName=${this.options.nodeName}` && info.labelSelector === ''
    return true
  }

  private static id(info: RequestInfo, scope: ParsedScope, format: WireFormat): string {
    return `${info.apiGroup}/${info.apiVersion}/${info.resource}\0${scope.id}\0${format}`
  }

  /** The cache for a request's scope and format, created (and its reflector started) on first use. */
  cacheFor(info: RequestInfo, format: WireFormat): WatchCache {
    const scope = scopeOf(info)
    const id = WatchCaches.id(info, scope, format)
    let entry = this.caches.get(id)
    if (!entry) {
      entry = this.create(info, scope, format)
      this.caches.set(id, entry)
    }
    entry.components.add(info.component)
    entry.cache.lastUsed = Date.now()
    return entry.cache
  }

  private create(info: RequestInfo, scope: ParsedScope, format: WireFormat): Entry {
    const { options } = this
    const storeKey: ResourceKey = { component: sharedComponent(format), group: info.apiGroup, version: info.apiVersion, resource: info.resource }
    const cache = new WatchCache({ store: options.store, storeKey, scope, format, log: options.log, windowSize: options.windowSize })
    const resource = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource
    // every segment and selector escaped: the apiserver must list exactly the scope this cache keeps
    const query = new URLSearchParams()
    if (scope.labelSelector) query.set('labelSelector', scope.labelSelector)
    if (scope.fieldSelector) query.set('fieldSelector', scope.fieldSelector)
    const encodedQuery = encodeQuery(query)
    const path = `${resourcePath({ group: info.apiGroup, version: info.apiVersion, namespace: scope.namespace, resource: info.resource })}${encodedQuery ? `?${encodedQuery}` : ''}`
    const observer = options.observer
    const reflector = new Reflector(
      path,
      resource,
      {
        replace: (items, rv, answered, type) => {
          if (cache.isSynced) observer?.relisted(resource, format)
          return cache.replace(items, rv, answered, type)
        },
        event: (type, object) => cache.event(type, object),
        progress: rv => cache.progress(rv),
      },
      {
        upstream: options.upstream,
        streams: options.streams,
        isOnline: options.isOnline,
        log: options.log,
        silenceMs: options.silenceMs,
        accept: format === 'protobuf' ? protobufAccept : jsonAccept,
        observe: {
          listed: bytes => observer?.received(resource, format, bytes),
          received: bytes => observer?.received(resource, format, bytes),
          watchOpened: () => observer?.upstreamWatchOpened(resource, format) ?? (() => {}),
        },
      },
    )
    void this.seedFromDisk(cache, storeKey, scope)
    void reflector.run()
    options.log.debug({ resource, scope: describeScope(scope), format }, 'watch cache started')
    return { cache, reflector, resource, components: new Set() }
  }

  /** Offline, a new cache starts from what the disk holds for its scope, if a whole list of it is there. */
  private async seedFromDisk(cache: WatchCache, key: ResourceKey, scope: ParsedScope): Promise<void> {
    if (this.options.isOnline() || !this.options.store) return
    const selection = await this.options.store.list(key, scope)
    if (!selection?.complete || selection.lost.length > 0 || cache.isSynced) return
    cache.seed(selection.items, selection.resourceVersion)
  }

  /** Whether `component` has listed or watched `key`'s resource through a cache that keeps its objects under `key.component`. */
  servedFrom(component: string, key: ResourceKey): boolean {
    for (const { cache, components } of this.caches.values()) {
      const k = cache.options.storeKey
      if (components.has(component) && k.component === key.component && k.group === key.group && k.version === key.version && k.resource === key.resource)
        return true
    }
    return false
  }

  private sweep(graceMs: number): void {
    const now = Date.now()
    for (const [id, entry] of this.caches) {
      if (entry.cache.listeners.size > 0 || now - entry.cache.lastUsed < graceMs) continue
      entry.reflector.halt()
      this.caches.delete(id)
      this.options.log.debug({ resource: entry.resource, scope: describeScope(entry.cache.options.scope) }, 'watch cache dropped: nobody used it')
    }
  }

  /** For /debug/cache and the metrics. */
  describe(): {
    resource: string
    scope: string
    format: WireFormat
    resourceVersion: string
    synced: boolean
    objects: number
    window: number
    watchers: number
    components: string[]
    relists: number
    replayed: number
    expired: number
  }[] {
    return [...this.caches.values()].map(({ cache, resource, components }) => ({
      resource,
      scope: describeScope(cache.options.scope),
      format: cache.format,
      resourceVersion: cache.resourceVersion.toString(),
      synced: cache.isSynced,
      objects: cache.objects.size,
      window: cache.windowLength,
      watchers: cache.listeners.size,
      components: [...components].sort(),
      ...cache.stats,
    }))
  }

  close(): void {
    clearInterval(this.sweeper)
    for (const { reflector } of this.caches.values()) reflector.halt()
    this.caches.clear()
  }
}
