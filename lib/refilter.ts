// Live re-filtering of one open watch: it remembers, per object, what the apiserver last said
// (unfiltered) and what this client was last sent (filtered). When the topology changes (a
// Service's annotation, a node's pool, this node's labels) every object is filtered again, and a
// MODIFIED event goes out for each one whose filtered form changed, and for nothing else.
import type { WireFormat } from './cache/types.ts'
import type { CachedObject } from './cache/types.ts'
import type { EndpointsFilter } from '../filters/registry.ts'
import { decodeUnknown, decodeWatchEvent, encodeUnknown, encodeWatchEvent, objectMeta, withResourceVersion } from './codec/protobuf.ts'

interface Tracked {
  apiVersion: string
  kind: string
  /** JSON text of the object, or its raw protobuf message */
  unfiltered: Buffer
  /** the same, filtered, as last sent */
  sent: Buffer
}

const tracked = new Set(['ADDED', 'MODIFIED', 'DELETED'])

interface Meta {
  namespace?: string
  name?: string
}

export class FilteredWatch {
  private readonly objects = new Map<string, Tracked>()

  constructor(
    private readonly format: WireFormat,
    private readonly filter: EndpointsFilter,
    /** writes a frame into the client's stream, in order with the upstream's frames */
    private readonly inject: (frame: Buffer) => void,
  ) {}

  /** The objects the client already has (from its list, recorded in the cache). */
  seed(objects: CachedObject[]): void {
    for (const object of objects) {
      if (object.format !== this.format) continue
      const sent = this.filter.object(this.format, object.apiVersion, object.body)
      this.objects.set(`${object.namespace}/${object.name}`, { apiVersion: object.apiVersion, kind: object.kind, unfiltered: object.body, sent })
    }
  }

  /**
   * One upstream frame: decoded once, filtered once, tracked, and returned for the client (the
   * upstream's own bytes when the filter changed nothing).
   */
  onFrame(frame: Buffer): Buffer {
    let event: { type: string; key: string; apiVersion: string; kind: string; unfiltered: Buffer; filtered: Buffer }
    try {
      event = this.format === 'protobuf' ? this.decodeProtobuf(frame) : this.decodeJson(frame)
    } catch {
      return this.filter.frame(this.format, frame) // BOOKMARK, ERROR, or unreadable: the filter decides
    }
    if (event.type === 'DELETED') this.objects.delete(event.key)
    else this.objects.set(event.key, { apiVersion: event.apiVersion, kind: event.kind, unfiltered: event.unfiltered, sent: event.filtered })
    if (event.filtered === event.unfiltered) return frame
    return this.format === 'protobuf'
      ? encodeWatchEvent(event.type, encodeUnknown({ apiVersion: event.apiVersion, kind: event.kind, raw: event.filtered }))
      : Buffer.concat([Buffer.from(`{"type":${JSON.stringify(event.type)},"object":`), event.filtered, Buffer.from('}\n')])
  }

  private decodeJson(frame: Buffer) {
    const event = JSON.parse(frame.toString()) as { type: string; object: { apiVersion: string; kind: string; metadata?: Meta } }
    if (!tracked.has(event.type)) throw new Error('not an object event')
    const meta = event.object.metadata ?? {}
    const unfiltered = Buffer.from(JSON.stringify(event.object))
    const filtered = this.filter.jsonObject(event.object)
    return {
      type: event.type,
      key: `${meta.namespace ?? ''}/${meta.name}`,
      apiVersion: event.object.apiVersion,
      kind: event.object.kind,
      unfiltered,
      filtered: filtered === event.object ? unfiltered : Buffer.from(JSON.stringify(filtered)),
    }
  }

  private decodeProtobuf(frame: Buffer) {
    const event = decodeWatchEvent(frame)
    if (!tracked.has(event.type)) throw new Error('not an object event')
    const unknown = decodeUnknown(event.object)
    const raw = Buffer.from(unknown.raw)
    const { namespace, name } = metaOf(raw)
    return {
      type: event.type,
      key: `${namespace}/${name}`,
      apiVersion: unknown.apiVersion,
      kind: unknown.kind,
      unfiltered: raw,
      filtered: this.filter.object('protobuf', unknown.apiVersion, raw),
    }
  }

  /**
   * The topology changed: send what now filters differently. Returns how many events went out.
   * `resourceVersion` is the cluster's version of the change (the Service or Node event that caused
   * it): a re-filtered object carries it, because informers (client-node's, for one) drop a MODIFIED
   * whose version they already have. It is a real etcd revision, so a client resuming its watch from
   * it resumes at a point the apiserver knows.
   */
  refilter(resourceVersion: string): number {
    let sent = 0
    for (const tracked of this.objects.values()) {
      const filtered = this.filter.object(this.format, tracked.apiVersion, tracked.unfiltered)
      if (filtered.equals(tracked.sent)) continue
      tracked.sent = filtered
      this.inject(this.modifiedFrame(tracked, filtered, resourceVersion))
      sent++
    }
    return sent
  }

  private modifiedFrame(tracked: Tracked, filtered: Buffer, resourceVersion: string): Buffer {
    if (this.format === 'protobuf') {
      const current = objectMeta(filtered).resourceVersion
      const raw = isNewer(resourceVersion, current) ? withResourceVersion(filtered, resourceVersion) : filtered
      return encodeWatchEvent('MODIFIED', encodeUnknown({ apiVersion: tracked.apiVersion, kind: tracked.kind, raw }))
    }
    const object = JSON.parse(filtered.toString()) as { metadata?: { resourceVersion?: string } }
    if (object.metadata && isNewer(resourceVersion, object.metadata.resourceVersion ?? '')) object.metadata.resourceVersion = resourceVersion
    return Buffer.from(JSON.stringify({ type: 'MODIFIED', object }) + '\n')
  }
}

function isNewer(candidate: string, current: string): boolean {
  return /^\d+$/.test(candidate) && (!/^\d+$/.test(current) || BigInt(candidate) > BigInt(current))
}

function metaOf(raw: Buffer): { namespace: string; name: string } {
  const meta = objectMeta(raw)
  return { namespace: meta.namespace, name: meta.name }
}

/** Every open filtered watch, told when the topology changes. */
export class FilteredWatches {
  private readonly watches = new Set<FilteredWatch>()

  add(watch: FilteredWatch): () => void {
    this.watches.add(watch)
    return () => this.watches.delete(watch)
  }

  refilterAll(resourceVersion: string): number {
    let sent = 0
    for (const watch of this.watches) sent += watch.refilter(resourceVersion)
    return sent
  }
}
