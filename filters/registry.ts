// Which response filters run for which request: each filter's name, the components it is for by
// default, the resources it reads, and what it needs (the topology context, the hub's address,
// this node's pool). --filters / --disable-filters turn filters on and off, --filter-components
// (and --topology-components) say for whom. The filters themselves are pure (one file each); the
// chain (filters/chain.ts) carries them over bodies, frames and objects.
import type { Logger } from 'pino'
import type { RequestInfo } from '../lib/api/requestinfo.ts'
import { FilterChain } from './chain.ts'
import type { FilteredObjects, ResponseFilter, Step, StepReport } from './chain.ts'
import { filterEndpointsObject, filterSliceJsonBytes } from './servicetopology.ts'
import type { EndpointsKind, ServiceTopologyInput } from './servicetopology.ts'
import { filterEndpointsRaw } from './servicetopology-protobuf.ts'
import type { TopologyContext } from './topology.ts'
import { isNamed } from './object-filter.ts'
import type { FilterContext, HubAddress, ObjectFilter } from './object-filter.ts'
import { masterServiceFilter } from './masterservice.ts'
import { serviceEnvUpdaterFilter } from './serviceenvupdater.ts'
import { forwardKubeSvcTrafficFilter } from './forwardkubesvctraffic.ts'
import { discardCloudServiceFilter } from './discardcloudservice.ts'
import { nodePortIsolationFilter } from './nodeportisolation.ts'
import { inClusterConfigFilter } from './inclusterconfig.ts'
import { localEndpointsJsonBytes, localEndpointsObject } from './localendpoints.ts'
import { localEndpointsProtobuf } from './localendpoints-protobuf.ts'
import type { LocalEndpointsInput } from './local-pod.ts'

export type { ResponseFilter } from './chain.ts'

/** What the filters read, provided by the hub (lib/topology/source.ts). */
export interface TopologyProvider {
  readonly known: boolean
  readonly nodePool: string
  context(): TopologyContext
  annotationOf(namespace: string, service: string): string | undefined
}

interface Spec {
  name: string
  components: string[]
  /** group/resource pairs it reads */
  resources: string[]
  /** the hub's address is written into objects: off without one pods can reach */
  needsHub: boolean
  /** a filter that only makes sense with another: off when that one is, and why without it */
  needs?: { filter: string; why: string }
  step(registry: FilterRegistry): Step
}

function objectStep(filter: ObjectFilter, context: () => FilterContext): Step {
  const only = filter.only
  return {
    name: filter.name,
    kinds: new Set(filter.kinds.map(k => k.kind)),
    json: (object, kind) => filter.json(object, kind, context()),
    // a filter of one object reads the others' names only: they need no parse
    ...(only ? { jsonBytes: (raw: Buffer) => (isNamed(raw, only) ? undefined : raw) } : {}),
    protobuf: (raw, kind) => filter.protobuf(raw, kind, context()),
    drops: filter.drops,
  }
}

/** The filters of YurtHub's family, with their default components (as YurtHub's). */
const specs: Spec[] = [
  {
    // first: the other filters see the node's own endpoints as they are now
    name: 'localendpoints',
    components: ['*'],
    resources: ['discovery.k8s.io/endpointslices', '/endpoints'],
    needsHub: false,
    step: registry => ({
      name: 'localendpoints',
      kinds: new Set(['EndpointSlice', 'Endpoints']),
      json: (object, kind) => localEndpointsObject(object, registry.localInput(), kind as EndpointsKind),
      jsonBytes: (raw, kind) => localEndpointsJsonBytes(raw, registry.localInput(), kind as EndpointsKind),
      protobuf: (raw, kind, apiVersion) => localEndpointsProtobuf(raw, apiVersion, kind, registry.localInput()),
      drops: false, // it changes or removes endpoints, never the object
    }),
  },
  {
    name: 'servicetopology',
    components: ['kube-proxy', 'coredns', 'nginx-ingress-controller'],
    resources: ['discovery.k8s.io/endpointslices', '/endpoints'],
    needsHub: false,
    step: registry => ({
      name: 'servicetopology',
      kinds: new Set(['EndpointSlice', 'Endpoints']),
      json: (object, kind) => filterEndpointsObject(object, registry.topologyInput(), kind as EndpointsKind).object,
      jsonBytes: (raw, kind) => filterSliceJsonBytes(raw, registry.topologyInput(), kind as EndpointsKind),
      protobuf: (raw, kind, apiVersion) => filterEndpointsRaw(apiVersion, kind, raw, registry.topologyInput()).raw,
      drops: false, // it takes endpoints out of an object, never the object
    }),
  },
  {
    name: 'masterservice',
    components: ['kubelet'],
    resources: ['/services'],
    needsHub: true,
    step: r => objectStep(masterServiceFilter, () => r.filterContext()),
  },
  {
    name: 'serviceenvupdater',
    components: ['kubelet'],
    resources: ['/pods'],
    needsHub: true,
    step: r => objectStep(serviceEnvUpdaterFilter, () => r.filterContext()),
  },
  {
    name: 'forwardkubesvctraffic',
    components: ['kube-proxy'],
    resources: ['discovery.k8s.io/endpointslices'],
    needsHub: true,
    step: r => objectStep(forwardKubeSvcTrafficFilter, () => r.filterContext()),
  },
  {
    name: 'discardcloudservice',
    components: ['kube-proxy'],
    resources: ['/services'],
    needsHub: false,
    step: r => objectStep(discardCloudServiceFilter, () => r.filterContext()),
  },
  {
    name: 'nodeportisolation',
    components: ['kube-proxy'],
    resources: ['/services'],
    needsHub: false,
    step: r => objectStep(nodePortIsolationFilter, () => r.filterContext()),
  },
  {
    name: 'inclusterconfig',
    components: ['kubelet'],
    resources: ['/configmaps'],
    needsHub: false,
    needs: {
      filter: 'masterservice',
      why: "kube-proxy would drop its kubeconfig for the in-cluster config, whose address is the apiserver's own, and go past the hub (no topology, no offline cache)",
    },
    step: r => objectStep(inClusterConfigFilter, () => r.filterContext()),
  },
]

export const filterNames: readonly string[] = specs.map(s => s.name)

export function defaultFilterComponents(name: string): string[] {
  return specs.find(s => s.name === name)?.components ?? []
}

export interface FilterConfig {
  /** filters turned on (default: all) */
  enabled: readonly string[]
  /** per filter, the components it is for (default: each filter's own) */
  components: Readonly<Record<string, readonly string[]>>
  /** where pods reach the hub's HTTPS port (masterservice, serviceenvupdater, forwardkubesvctraffic); undefined: nowhere pods can */
  hub?: HubAddress
  /** why there is no hub address, when there is none */
  hubMissing?: string
  /** what the node's own pods look like now (lib/overlay/pod-overlay.ts); undefined: localendpoints is off, with why */
  local?: { input(): LocalEndpointsInput }
  localMissing?: string
  /** whether the cloud is reachable now (default: it is) */
  isOnline?: () => boolean
}

/** What one filter did, for /debug/filters. */
export interface FilterReport {
  name: string
  enabled: boolean
  /** why it is off, when it is */
  off?: string
  components: string[]
  ran: number
  changed: number
  dropped: number
  failed: number
  last?: { what: string; did: 'changed' | 'dropped' | 'failed'; at: string }
}

/** A FilterReport as it is kept: the last object named and dated only when someone asks. */
type Tally = Omit<FilterReport, 'last'> & { last?: { what: () => string; did: 'changed' | 'dropped' | 'failed'; at: number } }

export class FilterRegistry {
  private readonly reports = new Map<string, Tally>()
  private readonly steps = new Map<string, Step>()
  private readonly warned = new Set<string>()
  /** per set of steps, what they made of each stored object while nothing they read has changed */
  private readonly filtered = new Map<string, FilteredObjects>()
  private input: ServiceTopologyInput | undefined

  constructor(
    private readonly provider: TopologyProvider,
    private readonly config: FilterConfig,
    private readonly log: Logger,
  ) {
    const offFor = new Map<string, string[]>()
    for (const spec of specs) {
      const requested = config.enabled.includes(spec.name)
      const off = !requested
        ? 'turned off (--filters / --disable-filters)'
        : spec.needsHub && !config.hub
          ? `no address where pods reach the hub (--advertise-address, --pod-address, --secure-port)${config.hubMissing ? `: ${config.hubMissing}` : ''}`
          : spec.name === 'localendpoints' && !config.local
            ? (config.localMissing ?? 'no pod overlay')
            : spec.needs && !this.reports.get(spec.needs.filter)?.enabled
              ? `${spec.needs.filter} is off, and without it ${spec.needs.why}`
              : undefined
      this.reports.set(spec.name, {
        name: spec.name,
        enabled: off === undefined,
        ...(off ? { off } : {}),
        components: [...(config.components[spec.name] ?? spec.components)],
        ran: 0,
        changed: 0,
        dropped: 0,
        failed: 0,
      })
      if (!off) this.steps.set(spec.name, spec.step(this))
      else if (requested) offFor.set(off, [...(offFor.get(off) ?? []), spec.name])
    }
    // one line per reason: the three filters that need a hub address share theirs
    for (const [off, names] of offFor)
      log.warn({ filters: names }, `${names.length > 1 ? 'filters' : 'filter'} ${names.join(', ')} ${names.length > 1 ? 'are' : 'is'} off: ${off}`)
  }

  /** Filters asked for that are off because a filter they need is off: worth an operator's attention (readyz). */
  partnerless(): string[] {
    return specs
      .filter(spec => spec.needs && this.config.enabled.includes(spec.name) && !this.reports.get(spec.name)!.enabled)
      .map(spec => `filter ${spec.name} is off: ${this.reports.get(spec.name)!.off}`)
  }

  /** The context changed: the next filtering reads it afresh. */
  invalidate(): void {
    this.input = undefined
    this.forgetFiltered()
  }

  /** What the filters made of objects is forgotten (something they read is about to change). */
  forgetFiltered(): void {
    this.filtered.clear()
  }

  topologyInput(): ServiceTopologyInput {
    this.input ??= {
      topology: this.provider.context(),
      annotationOf: (namespace, service) => this.provider.annotationOf(namespace, service),
      onInvalid: (namespace, service, reason) => this.warnOnce('servicetopology', `annotation of ${namespace}/${service} ignored: ${reason}`),
    }
    return this.input
  }

  /**
   * Whether localendpoints can change what this request is sent. Pods are overlaid only while the
   * cloud is away; with none overlaid, a get or list has nothing to change, and so has a watch
   * opened online by a component that does not route traffic. The endpoint consumers' watches
   * (servicetopology's components) keep the filter: they outlive an outage in the shared watch caches.
   */
  private mayOverlay(info: RequestInfo): boolean {
    if (this.localInput().pods.size > 0) return true
    if (info.verb !== 'watch') return false
    if (!(this.config.isOnline?.() ?? true)) return true
    return this.reports.get('servicetopology')!.components.includes(info.component)
  }

  localInput(): LocalEndpointsInput {
    return this.config.local!.input()
  }

  filterContext(): FilterContext {
    return { hub: this.config.hub ?? { host: '', port: 0 }, nodePool: this.provider.nodePool, warn: (filter, reason) => this.warnOnce(filter, reason) }
  }

  private warnOnce(filter: string, reason: string): void {
    const key = `${filter}: ${reason}`
    if (this.warned.has(key)) return
    this.warned.add(key)
    this.log.warn({ filter, reason }, `${filter}: ${reason}`)
  }

  private readonly report: StepReport = {
    ran: name => {
      this.reports.get(name)!.ran++
    },
    changed: (name, what) => {
      const r = this.reports.get(name)!
      r.changed++
      r.last = { what, did: 'changed', at: Date.now() }
    },
    dropped: (name, what) => {
      const r = this.reports.get(name)!
      r.dropped++
      r.last = { what, did: 'dropped', at: Date.now() }
    },
    failed: (name, what, error) => {
      const r = this.reports.get(name)!
      r.failed++
      r.last = { what, did: 'failed', at: Date.now() }
      this.warnOnce(name, `an object passed unfiltered: ${(error as Error).message}`)
    },
  }

  /** The filters for a request, or undefined when none applies. */
  forRequest(info: RequestInfo): ResponseFilter | undefined {
    if (info.verb !== 'get' && info.verb !== 'list' && info.verb !== 'watch') return undefined
    if (info.subresource !== '' || !info.isResourceRequest) return undefined
    const resource = `${info.apiGroup}/${info.resource}`
    const steps: Step[] = []
    for (const spec of specs) {
      const step = this.steps.get(spec.name)
      const components = this.reports.get(spec.name)!.components
      if (!step || !spec.resources.includes(resource) || !(components.includes(info.component) || components.includes('*'))) continue
      // service topology needs this node: until it is known, objects pass as they are
      if (spec.name === 'servicetopology' && !this.provider.known) continue
      if (spec.name === 'localendpoints' && !this.mayOverlay(info)) continue
      steps.push(step)
    }
    if (steps.length === 0) return undefined
    const key = steps.map(step => step.name).join(',')
    // with no pod overlaid localendpoints changes nothing: its chains share what the others' make
    // (else a kube-proxy watch and a kube-proxy list would each keep a filtered copy of every slice)
    const keyWithoutLocal = steps
      .filter(step => step.name !== 'localendpoints')
      .map(step => step.name)
      .join(',')
    return new FilterChain(steps, this.report, () => {
      const current = (this.config.local?.input().pods.size ?? 0) === 0 ? keyWithoutLocal : key
      let shared = this.filtered.get(current)
      if (!shared) this.filtered.set(current, (shared = new WeakMap()))
      return shared
    })
  }

  /** What each filter did so far (the metrics read these when scraped: no counter is touched per object). */
  tallies(): readonly Pick<FilterReport, 'name' | 'ran' | 'changed' | 'dropped' | 'failed'>[] {
    return [...this.reports.values()]
  }

  /** Every filter: on or off, for whom, and what it did last. */
  describe(): FilterReport[] {
    return [...this.reports.values()].map(({ last, ...r }) => ({
      ...r,
      components: [...r.components],
      ...(last ? { last: { what: last.what(), did: last.did, at: new Date(last.at).toISOString() } } : {}),
    }))
  }
}
