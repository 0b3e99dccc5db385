// The kind each built-in resource holds, as kube-apiserver's discovery names it (the same in every
// version of a group). A cache of a resource accepts only objects and lists of its kind: what the
// apiserver said about that resource, never an answer that came back for another path. Offline, an
// empty list is named by it too, as the apiserver names it after any restart of the hub.
// Resources not listed here (custom resources) take the kind their first answer names.

const builtinKinds: Record<string, Record<string, string>> = {
  '': {
    pods: 'Pod',
    services: 'Service',
    endpoints: 'Endpoints',
    nodes: 'Node',
    namespaces: 'Namespace',
    configmaps: 'ConfigMap',
    secrets: 'Secret',
    serviceaccounts: 'ServiceAccount',
    events: 'Event',
    persistentvolumes: 'PersistentVolume',
    persistentvolumeclaims: 'PersistentVolumeClaim',
    limitranges: 'LimitRange',
    resourcequotas: 'ResourceQuota',
    replicationcontrollers: 'ReplicationController',
    podtemplates: 'PodTemplate',
    componentstatuses: 'ComponentStatus',
  },
  apps: {
    deployments: 'Deployment',
    daemonsets: 'DaemonSet',
    replicasets: 'ReplicaSet',
    statefulsets: 'StatefulSet',
    controllerrevisions: 'ControllerRevision',
  },
  batch: { jobs: 'Job', cronjobs: 'CronJob' },
  autoscaling: { horizontalpodautoscalers: 'HorizontalPodAutoscaler' },
  policy: { poddisruptionbudgets: 'PodDisruptionBudget' },
  'discovery.k8s.io': { endpointslices: 'EndpointSlice' },
  'coordination.k8s.io': { leases: 'Lease' },
  'storage.k8s.io': {
    csinodes: 'CSINode',
    csidrivers: 'CSIDriver',
    storageclasses: 'StorageClass',
    volumeattachments: 'VolumeAttachment',
    csistoragecapacities: 'CSIStorageCapacity',
  },
  'node.k8s.io': { runtimeclasses: 'RuntimeClass' },
  'networking.k8s.io': {
    ingresses: 'Ingress',
    ingressclasses: 'IngressClass',
    networkpolicies: 'NetworkPolicy',
    servicecidrs: 'ServiceCIDR',
    ipaddresses: 'IPAddress',
  },
  'rbac.authorization.k8s.io': { roles: 'Role', rolebindings: 'RoleBinding', clusterroles: 'ClusterRole', clusterrolebindings: 'ClusterRoleBinding' },
  'scheduling.k8s.io': { priorityclasses: 'PriorityClass' },
  'certificates.k8s.io': { certificatesigningrequests: 'CertificateSigningRequest' },
  'apiextensions.k8s.io': { customresourcedefinitions: 'CustomResourceDefinition' },
  'admissionregistration.k8s.io': {
    validatingwebhookconfigurations: 'ValidatingWebhookConfiguration',
    mutatingwebhookconfigurations: 'MutatingWebhookConfiguration',
  },
  'resource.k8s.io': {
    resourceslices: 'ResourceSlice',
    resourceclaims: 'ResourceClaim',
    resourceclaimtemplates: 'ResourceClaimTemplate',
    deviceclasses: 'DeviceClass',
  },
}

/** The kind of a built-in resource, or undefined for one this table does not know. */
export function builtinKind(group: string, resource: string): string | undefined {
  return builtinKinds[group]?.[resource]
}

/** The apiVersion the apiserver writes on a resource's objects and lists: `group/version`, or `v1` for the core group. */
export function apiVersionOf(group: string, version: string): string {
  return group ? `${group}/${version}` : version
}

/**
 * Why an object or list of `kind`/`apiVersion` does not belong to a resource expected to hold
 * `expected` ('' when its kind is not known yet): '' when it does. A resource holds one kind, and a
 * cache holds only what the apiserver said for that resource.
 */
export function kindProblem(expected: { kind: string; apiVersion: string }, kind: string, apiVersion: string): string {
  if (apiVersion !== expected.apiVersion) return `apiVersion ${JSON.stringify(apiVersion)} is not ${expected.apiVersion}`
  if (!kind) return 'no kind'
  if (expected.kind && kind !== expected.kind) return `kind ${JSON.stringify(kind)} is not ${expected.kind}`
  return ''
}
