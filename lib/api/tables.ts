// meta.k8s.io/v1 Tables, what kubectl get asks for (`Accept: …;as=Table;g=meta.k8s.io;v=v1`): the
// apiserver's printers for EndpointSlices (as recorded in list-endpointslices.table.json) and a few
// other kinds, Name + Age for the rest. The hub answers kubectl's offline gets with them, and the
// apiserver simulator its online ones.

export type IncludeObject = 'None' | 'Metadata' | 'Object'

interface Column {
  name: string
  type: string
  format: string
  description: string
  priority: number
}

const nameDesc =
  'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names'
const ageDesc =
  'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata'

const col = (name: string, description = '', format = '', priority = 0): Column => ({ name, type: 'string', format, description, priority })
const nameCol = col('Name', nameDesc, 'name')
const ageCol = col('Age', ageDesc)

/** k8s.io/apimachinery/pkg/util/duration.HumanDuration */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000)
  if (seconds < -1) return '<invalid>'
  if (seconds < 0) return '0s'
  if (seconds < 120) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`
  if (minutes < 180) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`
  if (hours < 48) return `${hours}h`
  if (hours < 24 * 8) return hours % 24 === 0 ? `${hours / 24}d` : `${Math.floor(hours / 24)}d${hours % 24}h`
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`
  const days = Math.floor(hours / 24)
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${days / 365}y` : `${Math.floor(days / 365)}y${days % 365}d`
  return `${Math.floor(days / 365)}y`
}

function age(obj: any): string {
  const ts = obj.metadata?.creationTimestamp
  return ts ? humanDuration(Date.now() - Date.parse(ts)) : '<unknown>'
}

function listWithMore(list: string[], count: number, max = 3): string {
  const shown = list.slice(0, max).join(',')
  if (count > max) return `${shown} + ${count - max} more...`
  return shown === '' ? '<unset>' : shown
}

interface Printer {
  columns: Column[]
  cells(obj: any): unknown[]
}

const printers: Record<string, Printer> = {
  'discovery.k8s.io/endpointslices': {
    columns: [
      nameCol,
      col(
        'AddressType',
        'addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.',
      ),
      col(
        'Ports',
        'ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates "all ports". Each slice may include a maximum of 100 ports.',
      ),
      col('Endpoints', 'endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.'),
      ageCol,
    ],
    cells: obj => {
      const ports: any[] = obj.ports ?? []
      const portList = ports.map(p => (p.port !== undefined && p.port !== null ? String(p.port) : p.name ? String(p.name) : '*'))
      const addresses: string[] = (obj.endpoints ?? []).flatMap((e: any) => e.addresses ?? [])
      return [obj.metadata.name, String(obj.addressType ?? ''), listWithMore(portList, portList.length), listWithMore(addresses, addresses.length), age(obj)]
    },
  },
  '/pods': {
    columns: [
      nameCol,
      col('Ready', 'The aggregate readiness state of this pod for accepting traffic.'),
      col('Status', 'The aggregate status of the containers in this pod.'),
      col('Restarts', 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.'),
      ageCol,
      col('IP', 'IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.', '', 1),
      col('Node', 'NodeName is a request to schedule this pod onto a specific node.', '', 1),
    ],
    cells: obj => {
      const containers: any[] = obj.spec?.containers ?? []
      const statuses: any[] = obj.status?.containerStatuses ?? []
      const ready = statuses.filter(s => s.ready).length
      const restarts = statuses.reduce((n, s) => n + (s.restartCount ?? 0), 0)
      const status = obj.metadata?.deletionTimestamp ? 'Terminating' : (obj.status?.reason ?? obj.status?.phase ?? 'Unknown')
      return [obj.metadata.name, `${ready}/${containers.length}`, status, restarts, age(obj), obj.status?.podIP ?? '<none>', obj.spec?.nodeName ?? '<none>']
    },
  },
  '/services': {
    columns: [
      nameCol,
      col('Type', 'type determines how the Service is exposed.'),
      col('Cluster-IP', 'clusterIP is the IP address of the service and is usually assigned randomly.'),
      col('External-IP', 'externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.'),
      col('Port(s)', 'The list of ports that are exposed by this service.'),
      ageCol,
      col('Selector', 'Route service traffic to pods with label keys and values matching this selector.', '', 1),
    ],
    cells: obj => {
      const spec = obj.spec ?? {}
      const ports = (spec.ports ?? []).map((p: any) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ''}/${p.protocol ?? 'TCP'}`).join(',') || '<none>'
      const external = (spec.externalIPs ?? []).join(',') || (spec.type === 'LoadBalancer' ? '<pending>' : '<none>')
      const selector =
        Object.entries(spec.selector ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(',') || '<none>'
      return [obj.metadata.name, spec.type ?? 'ClusterIP', spec.clusterIP ?? '<none>', external, ports, age(obj), selector]
    },
  },
  '/nodes': {
    columns: [
      nameCol,
      col('Status', 'The status of the node'),
      col('Roles', 'The roles of the node'),
      ageCol,
      col('Version', 'Kubelet Version reported by the node.'),
    ],
    cells: obj => {
      const ready = (obj.status?.conditions ?? []).find((c: any) => c.type === 'Ready')
      let status = ready ? (ready.status === 'True' ? 'Ready' : 'NotReady') : 'Unknown'
      if (obj.spec?.unschedulable) status += ',SchedulingDisabled'
      const roles = Object.keys(obj.metadata?.labels ?? {})
        .filter(k => k.startsWith('node-role.kubernetes.io/'))
        .map(k => k.slice('node-role.kubernetes.io/'.length))
      return [obj.metadata.name, status, roles.join(',') || '<none>', age(obj), obj.status?.nodeInfo?.kubeletVersion || '']
    },
  },
  '/namespaces': {
    columns: [nameCol, col('Status', 'The status of the namespace'), ageCol],
    cells: obj => [obj.metadata.name, obj.status?.phase ?? 'Active', age(obj)],
  },
}

const genericPrinter: Printer = { columns: [nameCol, ageCol], cells: obj => [obj.metadata?.name, age(obj)] }

function rowObject(obj: any, include: IncludeObject): any {
  if (include === 'None') return undefined
  if (include === 'Object') return obj
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata }
}

/** A Table of `objects` (JSON, with kind and apiVersion) of `group`/`resource` ('' for the core group). */
export function toTable(group: string, resource: string, objects: any[], listMeta: Record<string, unknown>, include: IncludeObject): any {
  const printer = printers[`${group}/${resource}`] ?? genericPrinter
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: listMeta,
    columnDefinitions: printer.columns,
    rows: objects.map(obj => {
      const row: any = { cells: printer.cells(obj) }
      const o = rowObject(obj, include)
      if (o !== undefined) row.object = o
      return row
    }),
  }
}
