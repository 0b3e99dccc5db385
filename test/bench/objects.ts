// The bench cluster's objects, shaped like a real cluster's: nodes in three pools, Services
// annotated for service topology, EndpointSlices of 10 endpoints spread over the nodes, pods,
// ConfigMaps. Generated in the simulator's process (test/bench/simulator-process.ts).

export const pools = ['shanghai', 'hangzhou', 'beijing']
export const nodeCount = 30
export const nodeName = (i: number): string => `node-${i % nodeCount}`
/** the node the hub runs as: pool shanghai */
export const hubNode = nodeName(0)
/** namespaces the slices, services and pods are spread over */
export const appNamespaces = Array.from({ length: 10 }, (_, i) => `app-${i}`)
export const slicesPerService = 5
export const endpointsPerSlice = 10
/** where the small ConfigMap (row 1), the watched ones (row 4) and the bulk ones (row 6) live */
export const benchNamespace = 'bench'
export const watchNamespace = 'bench-watch'
export const bulkNamespace = 'bench-cm'
export const burstNamespace = 'bench-burst'
export const smallConfigMap = 'small'
export const watchedConfigMap = 'delay-target'
/** the annotation a stamped write carries: the write's time, performance.timeOrigin + performance.now() */
export const writtenAtAnnotation = 'bench.outpost.io/written-at'
export const seqAnnotation = 'bench.outpost.io/seq'

export function node(i: number): any {
  const name = nodeName(i)
  const pool = pools[i % pools.length]
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'apps.openyurt.io/nodepool': pool,
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'topology.kubernetes.io/zone': `${pool}-a`,
      },
    },
    spec: { podCIDR: `10.244.${i}.0/24` },
    status: {
      addresses: [
        { type: 'InternalIP', address: `192.168.0.${i + 10}` },
        { type: 'Hostname', address: name },
      ],
      conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' }],
    },
  }
}

export const serviceName = (s: number): string => `svc-${s}`
export const serviceNamespace = (s: number): string => appNamespaces[s % appNamespaces.length]

export function service(s: number): any {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: serviceName(s),
      namespace: serviceNamespace(s),
      labels: { app: serviceName(s) },
      annotations: { 'openyurt.io/topologyKeys': 'openyurt.io/nodepool' },
    },
    spec: { selector: { app: serviceName(s) }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
  }
}

/** slice i belongs to service floor(i / slicesPerService) */
export const sliceName = (i: number): string => `${serviceName(Math.floor(i / slicesPerService))}-${i.toString(36).padStart(5, '0')}`

export function endpointSlice(i: number): any {
  const s = Math.floor(i / slicesPerService)
  const namespace = serviceNamespace(s)
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: sliceName(i),
      namespace,
      generateName: `${serviceName(s)}-`,
      labels: {
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
        'kubernetes.io/service-name': serviceName(s),
      },
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Service',
          name: serviceName(s),
          uid: `00000000-0000-4000-8000-${s.toString().padStart(12, '0')}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType: 'IPv4',
    endpoints: Array.from({ length: endpointsPerSlice }, (_, j) => {
      const n = (i * 7 + j) % nodeCount
      return {
        addresses: [`10.${100 + ((i >> 8) & 127)}.${i & 255}.${j + 1}`],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: nodeName(n),
        zone: `${pools[n % pools.length]}-a`,
        targetRef: {
          kind: 'Pod',
          namespace,
          name: `${serviceName(s)}-${i.toString(36)}-${j}`,
          uid: `10000000-0000-4000-8000-${(i * 16 + j).toString().padStart(12, '0')}`,
        },
      }
    }),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  }
}

export function pod(i: number, namespace = appNamespaces[i % appNamespaces.length], onNode = nodeName(i)): any {
  const name = `pod-${i}`
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app: `app-${i % 50}`, 'pod-template-hash': '5d4f8c7b9' } },
    spec: {
      nodeName: onNode,
      containers: [
        {
          name: 'main',
          image: 'registry.k8s.io/e2e-test-images/agnhost:2.39',
          args: ['netexec', '--http-port=8080'],
          ports: [{ containerPort: 8080, protocol: 'TCP' }],
          env: [{ name: 'POD_INDEX', value: String(i) }],
          resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 10 },
        },
      ],
      serviceAccountName: 'default',
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
    },
    status: {
      phase: 'Running',
      hostIP: `192.168.0.${(i % nodeCount) + 10}`,
      podIP: `10.244.${i % nodeCount}.${(i % 250) + 2}`,
      conditions: [
        { type: 'Initialized', status: 'True' },
        { type: 'Ready', status: 'True' },
        { type: 'ContainersReady', status: 'True' },
        { type: 'PodScheduled', status: 'True' },
      ],
      containerStatuses: [{ name: 'main', ready: true, restartCount: 0, image: 'registry.k8s.io/e2e-test-images/agnhost:2.39', started: true }],
    },
  }
}

export function configMap(name: string, namespace: string, data: Record<string, string>): any {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data }
}

export const bulkConfigMap = (i: number): any => configMap(`cm-${i}`, bulkNamespace, { 'settings.yaml': `index: ${i}\nlevel: info\n${'x'.repeat(200)}\n` })

// ---- the requests' paths ----------------------------------------------------------------------

/** kube-proxy's EndpointSlice informer: every namespace, minus headless and other proxies' services */
export const kubeProxySelector = '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name'
export const slicesPath = `/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${encodeURIComponent(kubeProxySelector)}&limit=500&resourceVersion=0`
export const slicesWatchPath = (rv: string): string =>
  `/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${encodeURIComponent(kubeProxySelector)}&resourceVersion=${rv}&watch=true`
/** one service's slices: a scope of its own, to warm the hub's caching and filtering paths up */
export const warmUpPath = `/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${serviceName(0)}`)}&resourceVersion=0`
export const podsPath = '/api/v1/pods?limit=500&resourceVersion=0'
export const bulkConfigMapsPath = `/api/v1/namespaces/${bulkNamespace}/configmaps?limit=500&resourceVersion=0`
export const smallConfigMapPath = `/api/v1/namespaces/${benchNamespace}/configmaps/${smallConfigMap}`
export const watchedConfigMapsWatchPath = (rv: string): string => `/api/v1/namespaces/${watchNamespace}/configmaps?resourceVersion=${rv}&watch=true`
/** kubelet's own pods (row 7's burst lands there) */
export const nodePodsPath = `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${hubNode}`)}`
