// A reflector of the hub's own, for what the filters read: list, then watch from the list's
// version, for ever; only object metadata is asked for (`as=PartialObjectMetadata`, protobuf
// where the apiserver offers it), since names, labels and annotations are all a filter reads: a
// Node's status heartbeat then costs a few hundred bytes, not the whole Node. Retries back off as
// client-go's do; a watch silent past the apiserver's BOOKMARK period is a dead link and is ended.
import { pipeline } from 'node:stream'
import type { Logger } from 'pino'
import { hubUserAgent } from './config.ts'
import type { Upstream } from './upstream.ts'
import type { LiveStreams } from './streams.ts'
import { WatchFrameSplitter, framingOf } from './frames.ts'
import { SilenceGuard } from './watch-pipeline.ts'
import { readAll } from './body.ts'
import { Backoff } from './backoff.ts'
import { decodeUnknown, decodeWatchEvent, objectMeta, splitList } from './codec/protobuf.ts'

export interface Metadata {
  name: string
  namespace: string
  resourceVersion: string
  labels: Record<string, string>
  annotations: Record<string, string>
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED'

export interface ReflectorTarget {
  /** e.g. /api/v1/nodes */
  path: string
  /** what the resource is called in messages */
  resource: string
  /** the whole state, after a list */
  replace(items: Metadata[], resourceVersion: string): void
  apply(type: EventType, item: Metadata): void
  /** the stream has reached this version (an event or a BOOKMARK) */
  progress?(resourceVersion: string): void
}

export interface ReflectorOptions {
  upstream: Upstream
  streams: LiveStreams
  isOnline: () => boolean
  log: Logger
  silenceMs?: number
  backoff?: Backoff
}

const listAccept =
  'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json'
const watchAccept = 'application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json'

class Relist extends Error {}

function fromJson(resource: string, metadata: unknown): Metadata {
  const m = metadata as Partial<Metadata> | undefined
  if (!m || typeof m.name !== 'string' || m.name === '') throw new Error(`${resource}: an item without metadata.name`)
  return { name: m.name, namespace: m.namespace ?? '', resourceVersion: m.resourceVersion ?? '', labels: m.labels ?? {}, annotations: m.annotations ?? {} }
}

function fromProtobuf(resource: string, raw: Buffer): Metadata {
  const m = objectMeta(raw)
  if (m.name === '') throw new Error(`${resource}: an item without metadata.name`)
  return { name: m.name, namespace: m.namespace, resourceVersion: m.resourceVersion, labels: m.labels, annotations: m.annotations }
}

export class MetadataReflector {
  private stopped = false
  private stop = () => {}

  constructor(
    private readonly target: ReflectorTarget,
    private readonly options: ReflectorOptions,
  ) {}

  /** Runs until stop(); `onListed` is called after each successful list. */
  async run(onListed: () => void = () => {}): Promise<void> {
    const backoff = this.options.backoff ?? new Backoff()
    let resourceVersion = ''
    while (!this.stopped) {
      if (!this.options.isOnline()) {
        resourceVersion = '' // relist once the cloud is back: it may have changed meanwhile
        await sleep(1_000)
        continue
      }
      try {
        if (!resourceVersion) {
          resourceVersion = await this.list()
          onListed()
        }
        resourceVersion = await this.watch(resourceVersion)
      } catch (error) {
        resourceVersion = ''
        if (this.stopped) break
        const wait = backoff.next()
        const message = error instanceof Relist ? error.message : (error as Error).message
        this.options.log.warn({ resource: this.target.resource, err: message, retryInMs: wait }, `${this.target.resource}: list/watch failed, retrying in ${wait} ms`)
        await sleep(wait)
      }
    }
  }

  halt(): void {
    this.stopped = true
    this.stop()
  }

  private request(path: string, accept: string, longRunning: boolean) {
    return this.options.upstream.request({ method: 'GET', path, headers: { accept, 'user-agent': hubUserAgent }, longRunning })
  }

  private async list(): Promise<string> {
    const res = await this.request(this.target.path, listAccept, false)
    const body = await readAll(res.body)
    if (res.statusCode !== 200) throw new Error(`list ${this.target.path}: ${res.statusCode} ${body.toString().slice(0, 200)}`)
    const framing = framingOf(res.headers['content-type'] as string | undefined)
    let items: Metadata[]
    let resourceVersion: string
    try {
      if (framing === 'protobuf') {
        const list = splitList(decodeUnknown(body).raw)
        items = list.items.map(item => fromProtobuf(this.target.resource, Buffer.from(item)))
        resourceVersion = list.resourceVersion
      } else {
        const list = JSON.parse(body.toString()) as { metadata?: { resourceVersion?: string }; items?: { metadata?: unknown }[] }
        if (!Array.isArray(list.items)) throw new Error(`${this.target.resource}: the answer is not a list`)
        items = list.items.map(item => fromJson(this.target.resource, item.metadata))
        resourceVersion = list.metadata?.resourceVersion ?? ''
      }
    } catch (error) {
      throw new Error(`list ${this.target.path}: ${(error as Error).message}`)
    }
    if (!resourceVersion) throw new Error(`list ${this.target.path}: no resourceVersion`)
    this.target.replace(items, resourceVersion)
    this.target.progress?.(resourceVersion)
    return resourceVersion
  }

  /** Watches until the stream ends; returns the version to go on from. */
  private async watch(from: string): Promise<string> {
    const path = `${this.target.path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${from}`
    const res = await this.request(path, watchAccept, true)
    if (res.statusCode !== 200) {
      res.body.destroy()
      throw new Relist(`watch ${this.target.path}: ${res.statusCode}`)
    }
    const framing = framingOf(res.headers['content-type'] as string | undefined) ?? 'json'
    this.stop = () => res.body.destroy()
    this.options.streams.addUpstreamWatch(this.stop)
    const silence = new SilenceGuard(this.options.silenceMs ?? 150_000, this.stop)
    let resourceVersion = from
    try {
      for await (const frame of pipeline(res.body, new WatchFrameSplitter(framing), () => {})) {
        silence.heard()
        const event = this.decode(framing, frame as Buffer)
        if (event.type === 'ERROR') throw new Relist(`watch ${this.target.path}: ${event.message}`) // 410 Expired or worse
        resourceVersion = event.item.resourceVersion || resourceVersion
        if (event.type !== 'BOOKMARK') this.target.apply(event.type as EventType, event.item)
        this.target.progress?.(resourceVersion)
      }
    } finally {
      silence.stop()
      this.options.streams.removeUpstreamWatch(this.stop)
      res.body.destroy()
    }
    return resourceVersion
  }

  private decode(framing: 'json' | 'protobuf', frame: Buffer): { type: string; item: Metadata; message?: string } {
    if (framing === 'protobuf') {
      const event = decodeWatchEvent(frame)
      if (event.type === 'ERROR') return { type: 'ERROR', item: fromJson('', { name: '-' }), message: 'ERROR event' }
      const raw = Buffer.from(decodeUnknown(event.object).raw)
      return { type: event.type, item: event.type === 'BOOKMARK' ? { ...fromJson('', { name: '-' }), resourceVersion: objectMeta(raw).resourceVersion } : fromProtobuf(this.target.resource, raw) }
    }
    const event = JSON.parse(frame.toString()) as { type: string; object?: { metadata?: { resourceVersion?: string }; message?: string } }
    if (event.type === 'ERROR') return { type: 'ERROR', item: fromJson('', { name: '-' }), message: event.object?.message ?? 'ERROR event' }
    if (event.type === 'BOOKMARK') return { type: 'BOOKMARK', item: { ...fromJson('', { name: '-' }), resourceVersion: event.object?.metadata?.resourceVersion ?? '' } }
    return { type: event.type, item: fromJson(this.target.resource, event.object?.metadata) }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms).unref())
}
