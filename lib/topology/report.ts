// What /debug/topology says per annotated Service: for each key of its annotation, which endpoints
// (from the EndpointSlices in the cache) that key alone would keep, and which key the filter applies.
// Pure, over the same decision the filters use, so what it shows is what kube-proxy gets.
import { decideTopology, parseTopologyKeys } from '../../filters/topology.ts'
import type { EndpointPlace, TopologyContext } from '../../filters/topology.ts'
import { serviceNameLabel, slicePlaces } from '../../filters/servicetopology.ts'
import { slicePlacesRaw } from '../../filters/servicetopology-protobuf.ts'
import { objectMeta } from '../codec/protobuf.ts'
import type { CachedObject } from '../cache/types.ts'

export interface ServiceSlices {
  /** namespace/name of the Service */
  service: string
  /** every endpoint of every cached slice of the Service */
  places: EndpointPlace[]
}

export interface KeyReport {
  key: string
  /** where the endpoints this key keeps are, each once: a node name, `zone <z>`, or `unknown node` */
  keeps: string[]
}

export interface ServiceReport {
  annotation: string
  /** why the annotation is ignored (the Service's endpoints pass unfiltered) */
  invalid?: string
  /** endpoints in the cached slices */
  endpoints: number
  /** the key the filter applies: the first that keeps any endpoint (or the last) */
  applied?: string
  keys: KeyReport[]
}

function where(place: EndpointPlace): string {
  return place.nodeName ?? (place.zone ? `zone ${place.zone}` : 'unknown node')
}

export function topologyReport(annotations: Record<string, string>, slices: ServiceSlices[], context: TopologyContext): Record<string, ServiceReport> {
  const placesOf = new Map<string, EndpointPlace[]>()
  for (const s of slices) placesOf.set(s.service, [...(placesOf.get(s.service) ?? []), ...s.places])
  const report: Record<string, ServiceReport> = {}
  for (const [service, annotation] of Object.entries(annotations)) {
    const places = placesOf.get(service) ?? []
    const keys = parseTopologyKeys(annotation)
    if (!Array.isArray(keys)) {
      report[service] = { annotation, invalid: keys.invalid, endpoints: places.length, keys: [] }
      continue
    }
    const decision = decideTopology(annotation, places, context)
    report[service] = {
      annotation,
      endpoints: places.length,
      applied: decision.kind === 'filter' ? decision.key : undefined,
      keys: keys.map(key => {
        const single = decideTopology(key, places, context)
        const keep = single.kind === 'filter' ? single.keep : places.map(() => true)
        // where they are, once each: a node with ten endpoints is one place kept, not ten lines
        return { key, keeps: [...new Set(places.filter((_, i) => keep[i]).map(where))] }
      }),
    }
  }
  return report
}

/** The Service and endpoint places of one cached EndpointSlice, in either wire format. */
export function sliceOf(object: CachedObject): ServiceSlices | undefined {
  let labels: Record<string, string> | undefined
  let places: EndpointPlace[] | undefined
  if (object.format === 'json') {
    const document = JSON.parse(object.body.toString()) as { metadata?: { labels?: Record<string, string> } }
    labels = document.metadata?.labels
    places = slicePlaces(document)
  } else {
    labels = objectMeta(object.body).labels
    places = slicePlacesRaw(object.apiVersion, object.body)
  }
  const service = labels?.[serviceNameLabel]
  return service && places ? { service: `${object.namespace}/${service}`, places } : undefined
}
