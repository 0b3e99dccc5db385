// What the service topology filter needs to know, kept fresh by the hub itself: every Node's labels
// (this node's pool and the pool's members follow from them) and every Service's topology
// annotation. Two metadata-only reflectors (the watch caches' own, lib/watch/reflector.ts) run with the hub's own
// credentials. Only a change of what the filter reads counts: a Node heartbeat that changes no
// label is read and dropped, nothing is written. What the filter reads is kept on disk (one small
// state file, written when it changes), so the context is known again after a restart while the
// cloud is away.
import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import { SourceSwitch } from '../upstream/source-switch.ts'
import type { RequestSource } from '../upstream/source-switch.ts'
import type { LiveStreams } from '../watch/streams.ts'
import { Reflector } from '../watch/reflector.ts'
import type { EventType, ReflectorSink } from '../watch/reflector.ts'
import type { CachedObject } from '../cache/types.ts'
import { objectMeta } from '../codec/protobuf.ts'
import { memberRanges } from '../codec/json-scan.ts'
import { nodePoolLabel, topologyAnnotation } from '../../filters/topology.ts'
import type { TopologyContext } from '../../filters/topology.ts'
import { numericVersion } from '../cache/versions.ts'

/** Where the context is kept between runs (DiskCache.writeState / readState). */
export interface StateStore {
  readState(name: string): Promise<unknown>
  writeState(name: string, value: unknown): Promise<void>
}

export interface TopologySourceOptions {
  /** where Nodes and Services are listed and watched: the cloud, or a switch (a pool's leader, or the cloud) */
  upstream: RequestSource | SourceSwitch
  streams: LiveStreams
  state?: StateStore
  nodeName: string
  /** --nodepool: wins over the node's label */
  nodePool?: string
  isOnline: () => boolean
  log: Logger
  /** a watch silent this long (BOOKMARKs come about every minute) is a dead link */
  silenceMs?: number
}

interface SavedState {
  v: 1
  nodes: Record<string, Record<string, string>>
  annotations: Record<string, string>
}

const stateName = 'topology'

/** Metadata-only requests (`as=PartialObjectMetadata`, protobuf where the apiserver offers it). */
export const metadataAccept = {
  list: 'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json',
  watch:
    'application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json',
}

interface Metadata {
  name: string
  namespace: string
  labels: Record<string, string>
  annotations: Record<string, string>
}

/** What the filter reads of an object: its labels and annotations, from either wire format. */
function metadataOf(object: CachedObject): Metadata {
  if (object.format === 'protobuf') {
    const meta = objectMeta(object.body)
    return { name: object.name, namespace: object.namespace, labels: meta.labels, annotations: meta.annotations }
  }
  const range = memberRanges(object.body, ['metadata']).get('metadata')
  const meta = (range ? JSON.parse(object.body.toString('utf8', range.start, range.end)) : {}) as Partial<Metadata>
  return { name: object.name, namespace: object.namespace, labels: meta.labels ?? {}, annotations: meta.annotations ?? {} }
}

const sameLabels = (a: Record<string, string> | undefined, b: Record<string, string> | undefined) => {
  const ka = Object.keys(a ?? {})
  const kb = Object.keys(b ?? {})
  return ka.length === kb.length && ka.every(k => a![k] === b?.[k])
}

/** Emits 'change' (coalesced, at most once per tick) when anything the topology filter reads changed, and 'beforechange' just before each such change. */
export class TopologySource extends EventEmitter {
  private readonly nodeLabels = new Map<string, Record<string, string>>()
  private readonly annotations = new Map<string, string>()
  private readonly reflectors: Reflector[] = []
  /** the newest version each reflector's stream has reached */
  private readonly reached = new Map<string, bigint>()
  private changePending = false
  private saving: Promise<void> = Promise.resolve()
  /** events read, and those that changed what the filter reads (for the bench and /debug) */
  readonly stats = { events: 0, changes: 0 }

  constructor(private readonly options: TopologySourceOptions) {
    super()
    // a follower moved to another source: both watches resume there from where they were
    if (options.upstream instanceof SourceSwitch) options.upstream.on('switch', () => this.reflectors.forEach(r => r.interrupt()))
  }

  /** Whether this node has been seen (online or from disk): the filter cannot work without it. */
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

  /** The newest resourceVersion both reflectors' streams have reached. */
  get resourceVersion(): string {
    const versions = [...this.reached.values()]
    return (versions.length > 0 ? versions.reduce((a, b) => (a > b ? a : b)) : 0n).toString()
  }

  /** Every Service with a topology annotation: namespace/name → annotation. */
  annotatedServices(): Record<string, string> {
    return Object.fromEntries([...this.annotations].sort(([a], [b]) => (a < b ? -1 : 1)))
  }

  annotationOf(namespace: string, service: string): string | undefined {
    return this.annotations.get(`${namespace}/${service}`)
  }

  /**
   * Emits 'beforechange' synchronously, just before each change of what the filter reads (then
   * 'change', coalesced, after them): open filtered watches work out what their clients were
   * shown while it still reads as it did (FilteredWatch.settle).
   */
  private beforeChange(): void {
    this.emit('beforechange')
  }

  private changed(): void {
    this.stats.changes++
    if (this.changePending) return
    this.changePending = true
    setImmediate(() => {
      this.changePending = false
      this.save()
      this.emit('change')
    })
  }

  private save(): void {
    const state: SavedState = { v: 1, nodes: Object.fromEntries(this.nodeLabels), annotations: Object.fromEntries(this.annotations) }
    const store = this.options.state
    if (!store) return
    this.saving = this.saving
      .then(() => store.writeState(stateName, state))
      .catch(error => this.options.log.warn({ err: (error as Error).message }, 'topology: context not saved'))
  }

  private target(resource: string, replace: (items: Metadata[]) => boolean, apply: (type: EventType, item: Metadata) => boolean): ReflectorSink {
    return {
      replace: items => {
        if (replace(items.map(metadataOf))) this.changed()
      },
      event: (type, item) => {
        this.stats.events++
        if (apply(type, metadataOf(item))) this.changed()
      },
      progress: rv => this.reached.set(resource, numericVersion(rv)),
    }
  }

  private readonly nodes = this.target(
    'nodes',
    items => {
      const after = new Map(items.map(item => [item.name, item.labels]))
      const differs = after.size !== this.nodeLabels.size || [...after].some(([name, labels]) => !sameLabels(labels, this.nodeLabels.get(name)))
      if (differs) this.beforeChange()
      this.nodeLabels.clear()
      for (const [name, labels] of after) this.nodeLabels.set(name, labels)
      return differs
    },
    (type, item) => {
      if (type === 'DELETED') {
        if (!this.nodeLabels.has(item.name)) return false
        this.beforeChange()
        return this.nodeLabels.delete(item.name)
      }
      const before = this.nodeLabels.get(item.name)
      if (before !== undefined && sameLabels(before, item.labels)) return false // a heartbeat: nothing the filter reads
      this.beforeChange()
      this.nodeLabels.set(item.name, item.labels)
      return true
    },
  )

  private readonly services = this.target(
    'services',
    items => {
      const after = new Map<string, string>()
      for (const item of items) {
        const value = item.annotations[topologyAnnotation]
        if (value !== undefined) after.set(`${item.namespace}/${item.name}`, value)
      }
      const differs = after.size !== this.annotations.size || [...after].some(([k, v]) => this.annotations.get(k) !== v)
      if (differs) this.beforeChange()
      this.annotations.clear()
      for (const [k, v] of after) this.annotations.set(k, v)
      return differs
    },
    (type, item) => {
      const key = `${item.namespace}/${item.name}`
      const before = this.annotations.get(key)
      const after = type === 'DELETED' ? undefined : item.annotations[topologyAnnotation]
      if (before === after) return false
      this.beforeChange()
      if (after === undefined) this.annotations.delete(key)
      else this.annotations.set(key, after)
      return true
    },
  )

  /**
   * Seeds from disk, then keeps both reflectors running until stop(). Resolves once both have
   * listed (or after `waitMs`), so the first kube-proxy request after start is already filtered.
   */
  async start(waitMs = 5_000): Promise<void> {
    const saved = (await this.options.state?.readState(stateName)) as SavedState | undefined
    if (saved?.v === 1 && saved.nodes && saved.annotations) {
      for (const [name, labels] of Object.entries(saved.nodes)) this.nodeLabels.set(name, labels)
      for (const [key, value] of Object.entries(saved.annotations)) this.annotations.set(key, value)
      if (this.known) setImmediate(() => this.emit('change'))
    }
    const targets: [string, string, ReflectorSink][] = [
      ['/api/v1/nodes', 'nodes', this.nodes],
      ['/api/v1/services', 'services', this.services],
    ]
    const listed = targets.map(([path, resource, sink]) => {
      const reflector = new Reflector(path, resource, sink, { ...this.options, accept: metadataAccept })
      this.reflectors.push(reflector)
      return new Promise<void>(resolve => void reflector.run(resolve))
    })
    if (this.options.isOnline()) await Promise.race([Promise.all(listed), sleep(waitMs)])
  }

  /** The cloud is back: list/watch again now, not after a backoff. */
  resume(): void {
    for (const reflector of this.reflectors) reflector.resume()
  }

  async stop(): Promise<void> {
    for (const reflector of this.reflectors) reflector.halt()
    await this.saving
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms).unref())
}
