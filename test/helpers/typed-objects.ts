// A Pod using nearly every part of PodSpec and PodStatus (volume kinds, env sources, probes,
// lifecycle hooks, security contexts, affinity, tolerations, ephemeral containers, container states),
// for the typed codec's tests: the recorded pods are too plain to exercise the schema.
const time = '2026-11-21T22:16:41Z'

const ref = (name: string) => ({ name })

export const fullPod = {
  kind: 'Pod',
  apiVersion: 'v1',
  metadata: {
    name: 'web-0',
    generateName: 'web-',
    namespace: 'edge',
    uid: '0f4b9b0e-5c1f-4f4a-9d4b-8d9e2f1a7c31',
    resourceVersion: '1234',
    generation: 2,
    creationTimestamp: time,
    deletionTimestamp: '2026-11-21T23:00:00Z',
    deletionGracePeriodSeconds: 30,
    labels: { app: 'web', 'pod-template-hash': '7d9f' },
    annotations: { 'kubernetes.io/psp': 'x', note: '<&>' },
    ownerReferences: [
      { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: '9a7c', controller: true, blockOwnerDeletion: false },
    ],
    finalizers: ['example.com/keep'],
    managedFields: [
      {
        manager: 'kubelet',
        operation: 'Update',
        apiVersion: 'v1',
        time,
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:status': { 'f:conditions': { 'k:{"type":"Ready"}': { '.': {}, 'f:status': {} } } } },
        subresource: 'status',
      },
    ],
  },
  spec: {
    volumes: [
      { name: 'host', hostPath: { path: '/var/log', type: 'Directory' } },
      { name: 'scratch', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
      { name: 'creds', secret: { secretName: 'creds', items: [{ key: 'a', path: 'a.txt', mode: 256 }], defaultMode: 420, optional: false } },
      { name: 'conf', configMap: { name: 'conf', defaultMode: 0 } },
      { name: 'claim', persistentVolumeClaim: { claimName: 'data', readOnly: true } },
      { name: 'csi', csi: { driver: 'csi.example.com', readOnly: true, volumeAttributes: { b: '2', a: '1' }, nodePublishSecretRef: ref('s') } },
      { name: 'nfs', nfs: { server: '10.0.0.1', path: '/export' } },
      {
        name: 'projected',
        projected: {
          sources: [
            { serviceAccountToken: { audience: 'api', expirationSeconds: 3607, path: 'token' } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
            { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
            { secret: { name: 's', optional: true } },
          ],
          defaultMode: 420,
        },
      },
      {
        name: 'downward',
        downwardAPI: { items: [{ path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } }] },
      },
      {
        name: 'eph',
        ephemeral: {
          volumeClaimTemplate: {
            metadata: { labels: { tier: 'cache' } },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, storageClassName: 'local', volumeMode: 'Filesystem' },
          },
        },
      },
    ],
    initContainers: [{ name: 'init', image: 'busybox', command: ['sh', '-c', 'true'], resources: {}, imagePullPolicy: 'IfNotPresent' }],
    containers: [
      {
        name: 'app',
        image: 'nginx:1.25',
        command: ['nginx'],
        args: ['-g', 'daemon off;'],
        workingDir: '/srv',
        ports: [
          { name: 'http', containerPort: 80, protocol: 'TCP' },
          { name: 'dns', hostPort: 53, containerPort: 53, protocol: 'UDP', hostIP: '127.0.0.1' },
        ],
        envFrom: [{ prefix: 'CFG_', configMapRef: { name: 'conf', optional: true } }, { secretRef: { name: 'creds' } }],
        env: [
          { name: 'PLAIN', value: 'x' },
          { name: 'EMPTY' },
          { name: 'NODE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } },
          { name: 'MEM', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } } },
          { name: 'KEY', valueFrom: { configMapKeyRef: { name: 'conf', key: 'k' } } },
          { name: 'PASS', valueFrom: { secretKeyRef: { name: 'creds', key: 'p', optional: false } } },
        ],
        resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: { cpu: '250m', memory: '64Mi', 'ephemeral-storage': '1G' } },
        volumeMounts: [
          { name: 'host', readOnly: true, mountPath: '/host', mountPropagation: 'HostToContainer' },
          { name: 'conf', mountPath: '/etc/conf', subPathExpr: '$(POD)' },
        ],
        volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }],
        livenessProbe: {
          httpGet: { path: '/healthz', port: 'http', scheme: 'HTTP', httpHeaders: [{ name: 'X-Probe', value: '1' }] },
          initialDelaySeconds: 5,
          timeoutSeconds: 1,
          periodSeconds: 10,
          successThreshold: 1,
          failureThreshold: 3,
          terminationGracePeriodSeconds: 0,
        },
        readinessProbe: { tcpSocket: { port: 80 }, timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 },
        startupProbe: { grpc: { port: 9000, service: null }, failureThreshold: 30 },
        lifecycle: {
          postStart: { httpGet: { path: '/started', port: 8080, host: 'localhost' } },
          preStop: { exec: { command: ['nginx', '-s', 'quit'] } },
        },
        terminationMessagePath: '/dev/termination-log',
        terminationMessagePolicy: 'FallbackToLogsOnError',
        imagePullPolicy: 'Always',
        securityContext: {
          capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL'] },
          privileged: false,
          runAsUser: 0,
          runAsNonRoot: false,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        stdin: true,
        tty: true,
      },
    ],
    ephemeralContainers: [{ name: 'debug', image: 'busybox', resources: {}, stdin: true, targetContainerName: 'app' }],
    restartPolicy: 'Always',
    terminationGracePeriodSeconds: 30,
    activeDeadlineSeconds: 600,
    dnsPolicy: 'ClusterFirst',
    nodeSelector: { 'kubernetes.io/os': 'linux' },
    serviceAccountName: 'web',
    serviceAccount: 'web',
    automountServiceAccountToken: false,
    nodeName: 'kind-worker2',
    hostNetwork: true,
    shareProcessNamespace: true,
    securityContext: {
      seLinuxOptions: { level: 's0:c123,c456' },
      runAsUser: 1000,
      runAsGroup: 3000,
      runAsNonRoot: true,
      supplementalGroups: [4000, 0],
      fsGroup: 2000,
      sysctls: [{ name: 'net.core.somaxconn', value: '1024' }],
      fsGroupChangePolicy: 'OnRootMismatch',
    },
    imagePullSecrets: [ref('regcred')],
    hostname: 'web-0',
    subdomain: 'web',
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            {
              matchExpressions: [{ key: 'apps.openyurt.io/nodepool', operator: 'In', values: ['shanghai', 'hangzhou'] }],
              matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['kind-worker3'] }],
            },
          ],
        },
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 10, preference: { matchExpressions: [{ key: 'disk', operator: 'Exists' }] } },
        ],
      },
      podAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { app: 'cache' } }, namespaces: ['edge'], topologyKey: 'kubernetes.io/hostname' },
        ],
      },
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            podAffinityTerm: {
              labelSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['web'] }] },
              topologyKey: 'topology.kubernetes.io/zone',
              namespaceSelector: {},
            },
          },
        ],
      },
    },
    schedulerName: 'default-scheduler',
    tolerations: [
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      { operator: 'Exists' },
    ],
    hostAliases: [{ ip: '10.0.0.10', hostnames: ['registry.local'] }],
    priorityClassName: 'system-node-critical',
    priority: -5,
    dnsConfig: { nameservers: ['1.1.1.1'], searches: ['edge.svc'], options: [{ name: 'ndots', value: '2' }, { name: 'edns0' }] },
    readinessGates: [{ conditionType: 'example.com/ready' }],
    runtimeClassName: 'runc',
    enableServiceLinks: false,
    preemptionPolicy: 'Never',
    overhead: { cpu: '10m' },
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { app: 'web' } }, minDomains: 2 },
    ],
    setHostnameAsFQDN: false,
    os: { name: 'linux' },
  },
  status: {
    phase: 'Running',
    conditions: [
      { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: time },
      { type: 'Ready', status: 'False', lastProbeTime: null, lastTransitionTime: time, reason: 'ContainersNotReady', message: 'containers with unready status: [app]' },
    ],
    hostIP: '172.18.0.3',
    podIP: '10.244.1.7',
    podIPs: [{ ip: '10.244.1.7' }, { ip: 'fd00::7' }],
    startTime: time,
    initContainerStatuses: [
      {
        name: 'init',
        state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: time, finishedAt: time, containerID: 'containerd://aa' } },
        lastState: {},
        ready: true,
        restartCount: 0,
        image: 'docker.io/library/busybox:latest',
        imageID: 'docker.io/library/busybox@sha256:00',
        containerID: 'containerd://aa',
      },
    ],
    containerStatuses: [
      {
        name: 'app',
        state: { running: { startedAt: time } },
        lastState: { terminated: { exitCode: 137, signal: 9, reason: 'OOMKilled', startedAt: time, finishedAt: time, containerID: 'containerd://bb' } },
        ready: false,
        restartCount: 3,
        image: 'docker.io/library/nginx:1.25',
        imageID: 'docker.io/library/nginx@sha256:11',
        containerID: 'containerd://cc',
        started: true,
      },
    ],
    qosClass: 'Burstable',
    ephemeralContainerStatuses: [
      { name: 'debug', state: { waiting: { reason: 'PodInitializing' } }, lastState: {}, ready: false, restartCount: 0, image: 'busybox', imageID: '' },
    ],
  },
}
