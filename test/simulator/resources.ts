// The resource registry: which group/version/resources the simulator serves, how they are named in
// discovery, and how a version other than the storage version is converted (EndpointSlice v1beta1).

export interface ResourceType {
  group: string
  version: string
  resource: string
  kind: string
  listKind?: string
  namespaced: boolean
  shortNames?: string[]
  singular?: string
}

export interface ResourceEntry {
  group: string
  version: string
  resource: string
  kind: string
  listKind: string
  namespaced: boolean
  shortNames: string[]
  singular: string
  /** `v1` or `discovery.k8s.io/v1` */
  apiVersion: string
  /** objects live under this key whatever version they are read in (`discovery.k8s.io/endpointslices`) */
  storageKey: string
  /** registered at run time, served like a custom resource: list items keep kind/apiVersion, keys sorted */
  custom: boolean
  /** metadata.generation is maintained (bumped on spec changes) */
  generation: boolean
  /** has a status subresource */
  status: boolean
  /** subresources besides status that update one part of the object (a CSR's approval); see Cluster.setStrategy */
  writableSubresources: string[]
  categories: string[]
  /** connect subresources announced in discovery (pods: exec, attach, portforward) */
  connect: string[]
  /** zero-valued fields Go's encoder puts in a BOOKMARK object of this kind */
  bookmarkZero: Record<string, unknown>
}

import { canonical } from './objects.ts'

type Converter = (obj: any) => any

interface BuiltIn {
  group: string
  version: string
  resource: string
  kind: string
  namespaced: boolean
  shortNames?: string[]
  generation?: boolean
  status?: boolean
  writableSubresources?: string[]
  categories?: string[]
  connect?: string[]
  bookmarkZero?: Record<string, unknown>
}

const builtIns: BuiltIn[] = [
  {
    group: '',
    version: 'v1',
    resource: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    shortNames: ['ns'],
    status: true,
    bookmarkZero: { spec: {}, status: {} },
  },
  {
    group: '',
    version: 'v1',
    resource: 'nodes',
    kind: 'Node',
    namespaced: false,
    shortNames: ['no'],
    status: true,
    bookmarkZero: {
      spec: {},
      status: {
        daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
        nodeInfo: {
          machineID: '',
          systemUUID: '',
          bootID: '',
          kernelVersion: '',
          osImage: '',
          containerRuntimeVersion: '',
          kubeletVersion: '',
          kubeProxyVersion: '',
          operatingSystem: '',
          architecture: '',
        },
      },
    },
  },
  {
    group: '',
    version: 'v1',
    resource: 'services',
    kind: 'Service',
    namespaced: true,
    shortNames: ['svc'],
    status: true,
    categories: ['all'],
    bookmarkZero: { spec: {}, status: { loadBalancer: {} } },
  },
  { group: '', version: 'v1', resource: 'endpoints', kind: 'Endpoints', namespaced: true, shortNames: ['ep'] },
  {
    group: '',
    version: 'v1',
    resource: 'pods',
    kind: 'Pod',
    namespaced: true,
    shortNames: ['po'],
    status: true,
    categories: ['all'],
    connect: ['attach', 'exec', 'portforward'],
    bookmarkZero: { spec: { containers: null }, status: {} },
  },
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, shortNames: ['cm'] },
  { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true },
  {
    group: '',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    namespaced: true,
    shortNames: ['ev'],
    bookmarkZero: {
      involvedObject: {},
      reason: '',
      message: '',
      source: {},
      firstTimestamp: null,
      lastTimestamp: null,
      type: '',
      eventTime: null,
      reportingComponent: '',
      reportingInstance: '',
    },
  },
  { group: '', version: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true, shortNames: ['sa'] },
  { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true, bookmarkZero: { spec: {} } },
  {
    group: 'discovery.k8s.io',
    version: 'v1',
    resource: 'endpointslices',
    kind: 'EndpointSlice',
    namespaced: true,
    generation: true,
    bookmarkZero: { addressType: '', endpoints: null, ports: null },
  },
  {
    group: 'discovery.k8s.io',
    version: 'v1beta1',
    resource: 'endpointslices',
    kind: 'EndpointSlice',
    namespaced: true,
    generation: true,
    bookmarkZero: { addressType: '', endpoints: null, ports: null },
  },
  // what kubelet writes at first start (its CSINode) and lists with its informers; cluster-scoped
  { group: 'storage.k8s.io', version: 'v1', resource: 'csidrivers', kind: 'CSIDriver', namespaced: false, bookmarkZero: { spec: {} } },
  { group: 'storage.k8s.io', version: 'v1', resource: 'csinodes', kind: 'CSINode', namespaced: false, bookmarkZero: { spec: { drivers: null } } },
  { group: 'node.k8s.io', version: 'v1', resource: 'runtimeclasses', kind: 'RuntimeClass', namespaced: false, bookmarkZero: { handler: '' } },
  {
    group: 'certificates.k8s.io',
    version: 'v1',
    resource: 'certificatesigningrequests',
    kind: 'CertificateSigningRequest',
    namespaced: false,
    shortNames: ['csr'],
    status: true,
    writableSubresources: ['approval'],
    bookmarkZero: { spec: { request: null, signerName: '' }, status: {} },
  },
]

const hostnameKey = 'kubernetes.io/hostname'
const zoneKey = 'topology.kubernetes.io/zone'

/** discovery.k8s.io/v1 → v1beta1: nodeName and zone move into `topology`, like the apiserver's conversion. */
function sliceToV1beta1(obj: any): any {
  const out = { ...obj, apiVersion: 'discovery.k8s.io/v1beta1' }
  if (Array.isArray(obj.endpoints)) {
    out.endpoints = obj.endpoints.map((ep: any) => {
      const { nodeName, zone, deprecatedTopology, ...rest } = ep ?? {}
      const topology: Record<string, string> = { ...(deprecatedTopology ?? {}) }
      if (nodeName) topology[hostnameKey] = nodeName
      if (zone) topology[zoneKey] = zone
      const converted: any = { ...rest }
      if (Object.keys(topology).length > 0) converted.topology = topology
      return converted
    })
  }
  return out
}

/** discovery.k8s.io/v1beta1 → v1 (storage). */
function sliceFromV1beta1(obj: any): any {
  const out = { ...obj, apiVersion: 'discovery.k8s.io/v1' }
  if (Array.isArray(obj.endpoints)) {
    out.endpoints = obj.endpoints.map((ep: any) => {
      const { topology, ...rest } = ep ?? {}
      const converted: any = { ...rest }
      const remaining: Record<string, string> = { ...(topology ?? {}) }
      if (remaining[hostnameKey]) converted.nodeName = remaining[hostnameKey]
      if (remaining[zoneKey]) converted.zone = remaining[zoneKey]
      delete remaining[hostnameKey]
      delete remaining[zoneKey]
      if (Object.keys(remaining).length > 0) converted.deprecatedTopology = remaining
      return converted
    })
  }
  return out
}

export function apiVersionOf(group: string, version: string): string {
  return group ? `${group}/${version}` : version
}

export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/')
  return slash === -1 ? { group: '', version: apiVersion } : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) }
}

export class ResourceRegistry {
  private readonly entries: ResourceEntry[] = []
  private readonly toStorage = new Map<string, Converter>()
  private readonly fromStorage = new Map<string, Converter>()

  constructor() {
    for (const b of builtIns) {
      this.add({
        group: b.group,
        version: b.version,
        resource: b.resource,
        kind: b.kind,
        listKind: `${b.kind}List`,
        namespaced: b.namespaced,
        shortNames: b.shortNames ?? [],
        singular: b.kind.toLowerCase(),
        apiVersion: apiVersionOf(b.group, b.version),
        storageKey: `${b.group}/${b.resource}`,
        custom: false,
        generation: b.generation ?? false,
        status: b.status ?? false,
        writableSubresources: b.writableSubresources ?? [],
        categories: b.categories ?? [],
        connect: b.connect ?? [],
        bookmarkZero: b.bookmarkZero ?? {},
      })
    }
    this.setConverter('discovery.k8s.io', 'v1beta1', 'endpointslices', sliceFromV1beta1, sliceToV1beta1)
  }

  /** A CRD-like resource; registering another version of a known group/resource shares its objects. */
  register(type: ResourceType): ResourceEntry {
    if (!type.resource || !type.kind || !type.version) throw new Error('registerResource: resource, kind and version are required')
    const existing = this.byGVR(type.group, type.version, type.resource)
    if (existing) return existing
    const entry: ResourceEntry = {
      group: type.group,
      version: type.version,
      resource: type.resource,
      kind: type.kind,
      listKind: type.listKind ?? `${type.kind}List`,
      namespaced: type.namespaced,
      shortNames: type.shortNames ?? [],
      singular: type.singular ?? type.kind.toLowerCase(),
      apiVersion: apiVersionOf(type.group, type.version),
      storageKey: `${type.group}/${type.resource}`,
      custom: true,
      generation: true,
      status: true,
      writableSubresources: [],
      categories: [],
      connect: [],
      bookmarkZero: {},
    }
    this.add(entry)
    return entry
  }

  private add(entry: ResourceEntry): void {
    this.entries.push(entry)
  }

  private setConverter(group: string, version: string, resource: string, to: Converter, from: Converter): void {
    this.toStorage.set(`${group}/${version}/${resource}`, to)
    this.fromStorage.set(`${group}/${version}/${resource}`, from)
  }

  byGVR(group: string, version: string, resource: string): ResourceEntry | undefined {
    return this.entries.find(e => e.group === group && e.version === version && e.resource === resource)
  }

  byKind(apiVersion: string, kind: string): ResourceEntry | undefined {
    return this.entries.find(e => e.apiVersion === apiVersion && e.kind === kind)
  }

  /** The version objects of this entry's resource are stored in (the first registered). */
  storageEntry(entry: ResourceEntry): ResourceEntry {
    return this.entries.find(e => e.storageKey === entry.storageKey)!
  }

  /** An object as sent by a client in `entry`'s version → the storage version. */
  convertToStorage(entry: ResourceEntry, obj: any): any {
    const storage = this.storageEntry(entry)
    if (storage === entry) return { ...obj, apiVersion: entry.apiVersion, kind: entry.kind }
    const conv = this.toStorage.get(`${entry.group}/${entry.version}/${entry.resource}`)
    const out = conv ? conv(obj) : { ...obj }
    return { ...out, apiVersion: storage.apiVersion, kind: storage.kind }
  }

  /** A stored object → `entry`'s version. */
  convertFromStorage(entry: ResourceEntry, obj: any): any {
    if (obj.apiVersion === entry.apiVersion) return obj
    const conv = this.fromStorage.get(`${entry.group}/${entry.version}/${entry.resource}`)
    const out = conv ? conv(obj) : { ...obj }
    return canonical({ ...out, apiVersion: entry.apiVersion, kind: entry.kind })
  }

  /** Served groups with their versions in registration order (the first is preferred); '' is core. */
  groups(): { group: string; versions: string[] }[] {
    const out: { group: string; versions: string[] }[] = []
    for (const e of this.entries) {
      let g = out.find(x => x.group === e.group)
      if (!g) out.push((g = { group: e.group, versions: [] }))
      if (!g.versions.includes(e.version)) g.versions.push(e.version)
    }
    return out
  }

  resourcesOf(group: string, version: string): ResourceEntry[] {
    return this.entries.filter(e => e.group === group && e.version === version)
  }

  all(): ResourceEntry[] {
    return [...this.entries]
  }
}
