// What the service topology filter needs to know, kept fresh by the hub itself: every Node's labels
// (this node's pool and the pool's members follow from them) and every Service's topology
// annotation. Two small reflectors (list, then watch from the list's version, relist on 410) run
// with the hub's own credentials; what they read is recorded in the cache as component "outpost",
// so the context is known again after a restart while the cloud is away.
import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import { classify } from './requestinfo.ts'
import type { RequestInfo } from './requestinfo.ts'
import { hubUserAgent } from './config.ts'
import type { Upstream } from './upstream.ts'
import type { Recorder } from './cache/recorder.ts'
import { resourceKeyOf, scopeOf } from './cache/recorder.ts'
import type { LiveStreams } from './streams.ts'
import { WatchFrameSplitter } from './frames.ts'
import { SilenceGuard } from './watch-pipeline.ts'
import { readAll } from './body.ts'
import { pipeline } from 'node:stream'
import { nodePoolLabel, topologyAnnotation } from '../filters/topology.ts'
import type { TopologyContext } from '../filters/topology.ts'

interface Metadata {
  name: string
  namespace?: string
  resourceVersion?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

interface Watched {
  path: string
  /** applies one object to the state; returns whether anything the filter reads changed */
  apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', metadata: Metadata): boolean
  /** replaces the whole state after a list; returns whether anything changed */
  replace(items: Metadata[]): boolean
}

export interface TopologySourceOptions {
  upstream: Upstream
  recorder: Recorder
  streams: LiveStreams
  nodeName: string
  /** --nodepool: wins over the node's label */
  nodePool?: string
  isOnline: () => boolean
  log: Logger
  retryMs?: number
  /** a watch silent this long (BOOKMARKs come about every minute) is a dead link */
  silenceMs?: number
}

const sameLabels = (a: Record<string, string> | undefined, b: Record<string, string> | undefined) =>
  JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})

/** Emits 'change' (coalesced, at most once per tick) when anything the topology filter reads changed. */
export class TopologySource extends EventEmitter {
  private readonly nodeLabels = new Map<string, Record<string, string>>()
  private readonly annotations = new Map<string, string>()
  private stopped = false
  /** the newest cluster resourceVersion the reflectors have seen */
  private latest = 0n
  private changePending = false
  private readonly retryMs: number

  constructor(private readonly options: TopologySourceOptions) {
    super()
    this.retryMs = options.retryMs ?? 1_000
  }

  /** Whether this node has been seen (online or from the cache): the filter cannot work without it. */
  get known(): boolean {
    return this.nodeLabels.has(this.options.nodeName)
  }

  get nodePool(): string {
    return this.options.nodePool ?? this.nodeLabels.get(this.options.nodeName)?.[nodePoolLabel] ?? ''
  }

  context(): TopologyContext {
    const pool = this.nodePool
    const poolNodes = new Set<string>()
    if (pool) for (const [name, labels] of this.nodeLabels) if (labels[nodePoolLabel] === pool) poolNodes.add(name)
    if (pool) poolNodes.add(this.options.nodeName)
    return {
      nodeName: this.options.nodeName,
      nodeLabels: this.nodeLabels.get(this.options.nodeName) ?? {},
      poolNodes,
      nodeLabelsByName: this.nodeLabels,
    }
  }

  /** The newest resourceVersion seen on Nodes and Services: the version of the latest topology change. */
  get resourceVersion(): string {
    return this.latest.toString()
  }

  private saw(resourceVersion: string | undefined): void {
    if (resourceVersion && /^\d+$/.test(resourceVersion) && BigInt(resourceVersion) > this.latest) this.latest = BigInt(resourceVersion)
  }

  /** Every Service with a topology annotation: namespace/name → annotation. */
  annotatedServices(): Record<string, string> {
    return Object.fromEntries([...this.annotations].sort(([a], [b]) => (a < b ? -1 : 1)))
  }

  annotationOf(namespace: string, service: string): string | undefined {
    return this.annotations.get(`${namespace}/${service}`)
  }

  private changed(): void {
    if (this.changePending) return
    this.changePending = true
    setImmediate(() => {
      this.changePending = false
      this.emit('change')
    })
  }

  private readonly nodes: Watched = {
    path: '/api/v1/nodes',
    apply: (type, meta) => {
      if (type === 'DELETED') return this.nodeLabels.delete(meta.name)
      const before = this.nodeLabels.get(meta.name)
      this.nodeLabels.set(meta.name, meta.labels ?? {})
      return before === undefined || !sameLabels(before, meta.labels)
    },
    replace: items => {
      const before = new Map(this.nodeLabels)
      this.nodeLabels.clear()
      for (const meta of items) this.nodeLabels.set(meta.name, meta.labels ?? {})
      return before.size !== this.nodeLabels.size || [...before].some(([name, labels]) => !sameLabels(labels, this.nodeLabels.get(name)))
    },
  }

  private readonly services: Watched = {
    path: '/api/v1/services',
    apply: (type, meta) => {
      const key = `${meta.namespace ?? ''}/${meta.name}`
      const before = this.annotations.get(key)
      const after = type === 'DELETED' ? undefined : meta.annotations?.[topologyAnnotation]
      if (after === undefined) this.annotations.delete(key)
      else this.annotations.set(key, after)
      return before !== after
    },
    replace: items => {
      const before = new Map(this.annotations)
      this.annotations.clear()
      for (const meta of items) {
        const value = meta.annotations?.[topologyAnnotation]
        if (value !== undefined) this.annotations.set(`${meta.namespace ?? ''}/${meta.name}`, value)
      }
      return before.size !== this.annotations.size || [...before].some(([k, v]) => this.annotations.get(k) !== v)
    },
  }

  /**
   * Seeds from the cache, then keeps both reflectors running until stop(). Resolves once both have
   * listed (or after `waitMs`), so the first kube-proxy request after start is already filtered.
   */
  async start(waitMs = 5_000): Promise<void> {
    const listed: Promise<void>[] = []
    for (const watched of [this.nodes, this.services]) {
      const info = classify('GET', watched.path, hubUserAgent)
      const cached = await this.options.recorder.store.list(resourceKeyOf(info), scopeOf(info))
      if (cached) watched.replace(cached.items.map(o => (JSON.parse(o.body.toString()) as { metadata: Metadata }).metadata))
      listed.push(new Promise(resolve => void this.reflect(watched, resolve)))
    }
    if (this.known) this.changed()
    if (this.options.isOnline()) await Promise.race([Promise.all(listed), sleep(waitMs)])
  }

  stop(): void {
    this.stopped = true
  }

  private async reflect(watched: Watched, onListed: () => void): Promise<void> {
    let resourceVersion = ''
    while (!this.stopped) {
      if (!this.options.isOnline()) {
        resourceVersion = '' // relist once the cloud is back: it may have changed meanwhile
        await sleep(this.retryMs)
        continue
      }
      try {
        if (!resourceVersion) {
          resourceVersion = await this.list(watched)
          onListed()
        }
        resourceVersion = await this.watch(watched, resourceVersion)
      } catch (error) {
        this.options.log.debug({ path: watched.path, err: (error as Error).message }, 'topology: reflector retrying')
        resourceVersion = ''
        await sleep(this.retryMs)
      }
    }
  }

  private async request(path: string, longRunning: boolean) {
    return this.options.upstream.request({
      method: 'GET',
      path,
      headers: { accept: 'application/json', 'user-agent': hubUserAgent },
      longRunning,
    })
  }

  private async list(watched: Watched): Promise<string> {
    const res = await this.request(watched.path, false)
    const body = await readAll(res.body)
    if (res.statusCode !== 200) throw new Error(`list ${watched.path}: ${res.statusCode} ${body.toString().slice(0, 200)}`)
    const list = JSON.parse(body.toString()) as { metadata: { resourceVersion: string }; items: { metadata: Metadata }[] }
    await this.options.recorder.recordListPage(this.info(watched.path), 'json', body)
    this.saw(list.metadata.resourceVersion)
    if (watched.replace(list.items.map(i => i.metadata))) this.changed()
    return list.metadata.resourceVersion
  }

  private info(path: string): RequestInfo {
    return classify('GET', path, hubUserAgent)
  }

  /** Watches until the stream ends; returns the version to go on from ('' to relist). */
  private async watch(watched: Watched, from: string): Promise<string> {
    const path = `${watched.path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${from}`
    const res = await this.request(path, true)
    if (res.statusCode !== 200) {
      res.body.destroy()
      return ''
    }
    const stop = () => res.body.destroy()
    this.options.streams.addUpstreamWatch(stop)
    const silence = new SilenceGuard(this.options.silenceMs ?? 150_000, stop)
    const info = this.info(path)
    const scope = scopeOf(info)
    let resourceVersion = from
    try {
      for await (const frame of pipeline(res.body, new WatchFrameSplitter('json'), () => {})) {
        silence.heard()
        const event = JSON.parse((frame as Buffer).toString()) as { type: string; object: { metadata: Metadata; code?: number } }
        if (event.type === 'ERROR') return '' // 410 Expired or worse: relist
        resourceVersion = event.object.metadata.resourceVersion ?? resourceVersion
        this.saw(resourceVersion)
        if (event.type === 'BOOKMARK') continue
        await this.options.recorder.recordEvent(info, 'json', frame as Buffer, scope)
        if (watched.apply(event.type as 'ADDED', event.object.metadata)) this.changed()
      }
    } finally {
      silence.stop()
      this.options.streams.removeUpstreamWatch(stop)
      res.body.destroy()
    }
    return this.stopped ? '' : resourceVersion
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms).unref())
}
