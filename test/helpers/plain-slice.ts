// An EndpointSlice of a Service without topology (svc-plain) on kind-worker2: every component sees
// it as it is, so a test of watch plumbing reads the apiserver's objects unchanged.
export const plainSlice = (name: string, ip: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'svc-plain', ...labels } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true }, nodeName: 'kind-worker2' }],
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
})
