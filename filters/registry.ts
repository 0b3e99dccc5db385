// Which response filter runs for which request, and the wire-format plumbing around the pure
// filters: JSON bodies and frames are decoded, filtered and re-encoded only when something
// changed; protobuf goes through the wire-level filter. Today there is one filter, service
// topology, for the configured components' EndpointSlices (v1, v1beta1) and core Endpoints.
import type { Logger } from 'pino'
import type { RequestInfo } from '../lib/api/requestinfo.ts'
import type { WireFormat } from '../lib/cache/types.ts'
import { filterEndpointsObject } from './servicetopology.ts'
import type { EndpointsKind, ServiceTopologyInput } from './servicetopology.ts'
import { filterEndpointsRaw, filterProtobufBody, filterProtobufWatchFrame } from './servicetopology-protobuf.ts'
import type { TopologyContext } from './topology.ts'

/** What the filter reads, provided by the hub (lib/topology.ts). */
export interface TopologyProvider {
  readonly known: boolean
  context(): TopologyContext
  annotationOf(namespace: string, service: string): string | undefined
}

export interface FilterStats {
  /** each body, watch frame or object the filter ran on */
  onInvoked?(kind: EndpointsKind): void
  /** objects the filter changed, endpoints it dropped */
  onFiltered?(changed: number, dropped: number): void
}

/** A filter bound to one request's resource: bodies, frames and single objects in either format. */
export interface EndpointsFilter {
  kind: EndpointsKind
  body(format: WireFormat, body: Buffer): Buffer
  frame(format: WireFormat, frame: Buffer): Buffer
  /** one object as the cache stores it (JSON text, or a raw protobuf object message); the same Buffer when unchanged */
  object(format: WireFormat, apiVersion: string, object: Buffer): Buffer
  /** one decoded JSON object; the same reference when unchanged */
  jsonObject(object: unknown): unknown
}

function kindOf(info: RequestInfo): EndpointsKind | undefined {
  if (info.apiGroup === 'discovery.k8s.io' && info.resource === 'endpointslices') return 'EndpointSlice'
  if (info.apiGroup === '' && info.resource === 'endpoints') return 'Endpoints'
  return undefined
}

export class FilterRegistry {
  private readonly components: Set<string>
  private readonly reported = new Set<string>()
  private input: ServiceTopologyInput | undefined

  constructor(
    private readonly provider: TopologyProvider,
    components: string[],
    private readonly log: Logger,
    private readonly stats: FilterStats = {},
  ) {
    this.components = new Set(components)
  }

  /** The context changed: the next filtering reads it afresh. */
  invalidate(): void {
    this.input = undefined
  }

  private currentInput(): ServiceTopologyInput {
    this.input ??= {
      topology: this.provider.context(),
      annotationOf: (namespace, service) => this.provider.annotationOf(namespace, service),
      onInvalid: (namespace, service, reason) => {
        const key = `${namespace}/${service}: ${reason}`
        if (this.reported.has(key)) return
        this.reported.add(key)
        this.log.warn({ service: `${namespace}/${service}`, reason }, `service topology: annotation of ${namespace}/${service} ignored: ${reason}`)
      },
    }
    return this.input
  }

  appliesTo(info: RequestInfo): boolean {
    return (
      this.components.has(info.component) &&
      (info.verb === 'get' || info.verb === 'list' || info.verb === 'watch') &&
      info.subresource === '' &&
      kindOf(info) !== undefined
    )
  }

  /** The filter for a request, or undefined when none applies (or this node is not known yet: pass through). */
  forRequest(info: RequestInfo): EndpointsFilter | undefined {
    const kind = this.appliesTo(info) ? kindOf(info) : undefined
    if (!kind || !this.provider.known) return undefined
    const counted = <T extends { changed: boolean; dropped: number }>(result: T): T => {
      if (result.changed) this.stats.onFiltered?.(1, result.dropped)
      return result
    }
    const guard = <T>(original: T, run: () => T): T => {
      this.stats.onInvoked?.(kind)
      try {
        return run()
      } catch (error) {
        this.log.warn({ err: (error as Error).message, kind }, 'service topology: object passed unfiltered')
        return original
      }
    }
    return {
      kind,
      body: (format, body) =>
        guard(body, () => {
          if (format === 'protobuf') return counted(filterProtobufBody(body, this.currentInput())).body
          const document = JSON.parse(body.toString()) as { items?: unknown[] }
          if (Array.isArray(document.items)) {
            let changed = false
            const items = document.items.map(item => {
              const result = counted(filterEndpointsObject(item, this.currentInput(), kind))
              changed ||= result.changed
              return result.object
            })
            return changed ? Buffer.from(JSON.stringify({ ...document, items })) : body
          }
          const result = counted(filterEndpointsObject(document, this.currentInput(), kind))
          return result.changed ? Buffer.from(JSON.stringify(result.object)) : body
        }),
      frame: (format, frame) =>
        guard(frame, () => {
          if (format === 'protobuf') return counted(filterProtobufWatchFrame(frame, this.currentInput())).frame
          const event = JSON.parse(frame.toString()) as { type: string; object: unknown }
          if (event.type === 'BOOKMARK' || event.type === 'ERROR') return frame
          const result = counted(filterEndpointsObject(event.object, this.currentInput(), kind))
          return result.changed ? Buffer.from(JSON.stringify({ type: event.type, object: result.object }) + '\n') : frame
        }),
      jsonObject: object => guard(object, () => counted(filterEndpointsObject(object, this.currentInput(), kind)).object),
      object: (format, apiVersion, object) =>
        guard(object, () => {
          if (format === 'protobuf') return filterEndpointsRaw(apiVersion, kind, object, this.currentInput()).raw
          const result = filterEndpointsObject(JSON.parse(object.toString()), this.currentInput(), kind)
          return result.changed ? Buffer.from(JSON.stringify(result.object)) : object
        }),
    }
  }
}
