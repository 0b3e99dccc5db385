// The cluster docs/deploy.md is followed against (test/deploy-guide.e2e.ts), in a process of its
// own so it can run inside the test's network namespace: the demo cluster, plus what a kubeadm
// cluster has that the guide touches (the RBAC and admission kinds, the kube-proxy ConfigMap and
// DaemonSet). Nothing approves CSRs: the guide's `kubectl certificate approve` does.
//   ip netns exec NS node --import tsx test/helpers/deploy-cluster.ts
// Prints {"url": …} once it listens; stdin lines "refuse" / "none" set the connection fault (the
// guide's iptables block); it stops when stdin closes.
import { createInterface } from 'node:readline'
import { startDemoCluster } from '../simulator/demo.ts'

const sim = await startDemoCluster()

// Registered like any resource the simulator serves: stored, listed, patched, deleted. Nothing here
// enforces RBAC or admission policies; applying and deleting them is what the guide does with them.
for (const [group, kinds] of [
  [
    'rbac.authorization.k8s.io',
    [
      ['clusterroles', 'ClusterRole', false],
      ['clusterrolebindings', 'ClusterRoleBinding', false],
      ['roles', 'Role', true],
      ['rolebindings', 'RoleBinding', true],
    ],
  ],
  [
    'admissionregistration.k8s.io',
    [
      ['validatingadmissionpolicies', 'ValidatingAdmissionPolicy', false],
      ['validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding', false],
    ],
  ],
  ['apps', [['daemonsets', 'DaemonSet', true]]],
] as const) {
  for (const [resource, kind, namespaced] of kinds) {
    sim.registerResource({
      group,
      version: 'v1',
      resource,
      kind,
      namespaced,
      singular: kind.toLowerCase(),
      shortNames: resource === 'daemonsets' ? ['ds'] : [],
    })
  }
}

// kubeadm's own auto-approval bindings, which the guide's rollback looks for before deleting ours
for (const [name, role, group] of [
  ['kubeadm:node-autoapprove-bootstrap', 'system:certificates.k8s.io:certificatesigningrequests:nodeclient', 'system:bootstrappers:kubeadm:default-node-token'],
  ['kubeadm:node-autoapprove-certificate-rotation', 'system:certificates.k8s.io:certificatesigningrequests:selfnodeclient', 'system:nodes'],
]) {
  sim.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }],
  })
}

// kubeadm's kube-proxy ConfigMap: config.conf names the kubeconfig that the kubeconfig.conf key
// is mounted as; kubeconfig.conf points at the cloud with the ServiceAccount's token
const cloudKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: https://control-plane.example:6443
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`
sim.create({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'kube-proxy', namespace: 'kube-system', labels: { app: 'kube-proxy' } },
  data: {
    'config.conf': `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
kind: KubeProxyConfiguration
mode: iptables
`,
    'kubeconfig.conf': cloudKubeconfig,
  },
})
// Its status as the DaemonSet controller leaves it once every node runs the current template (the
// loop below plays that controller for `kubectl rollout restart`): `kubectl rollout status` reads
// only this
sim.create({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { name: 'kube-proxy', namespace: 'kube-system', labels: { 'k8s-app': 'kube-proxy' }, generation: 1 },
  spec: {
    selector: { matchLabels: { 'k8s-app': 'kube-proxy' } },
    updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
    template: {
      metadata: { labels: { 'k8s-app': 'kube-proxy' } },
      spec: { containers: [{ name: 'kube-proxy', image: 'registry.k8s.io/kube-proxy:v1.30.0' }] },
    },
  },
  status: {
    observedGeneration: 1,
    desiredNumberScheduled: 4,
    currentNumberScheduled: 4,
    updatedNumberScheduled: 4,
    numberAvailable: 4,
    numberReady: 4,
    numberMisscheduled: 0,
  },
})

const rolledOut = setInterval(() => {
  const ds = sim.get('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy')
  if (ds && ds.metadata.generation > ds.status.observedGeneration) {
    sim.patch('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy', { status: { observedGeneration: ds.metadata.generation } })
  }
}, 100)

process.stdout.write(`${JSON.stringify({ url: sim.url })}\n`)
const lines = createInterface({ input: process.stdin })
lines.on('line', line => {
  const fault = line.trim()
  if (fault === 'refuse' || fault === 'none') void sim.setFault(fault).then(() => process.stdout.write(`${JSON.stringify({ fault })}\n`))
})
lines.on('close', () => {
  clearInterval(rolledOut)
  void sim.close().then(() => process.exit(0))
})
