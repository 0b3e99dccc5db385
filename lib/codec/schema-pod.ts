// Field tables for core/v1 Pods: PodSpec (containers, env, probes, resources, security contexts,
// affinity, tolerations, …) and PodStatus. They exist so the typed codec (typed.ts) can turn a Pod
// from JSON into the apiserver's protobuf bytes and back; kubelet lists its pods in protobuf.
// Volumes are in schema-volumes.ts. Notation: see schema-meta.ts.

export const podMessages: Record<string, string> = {
  Pod: '1 metadata ObjectMeta?; 2 spec PodSpec?; 3 status PodStatus?',
  PodSpec: `1 volumes []Volume?; 20 initContainers []Container?; 2 containers []Container;
    34 ephemeralContainers []EphemeralContainer?; 3 restartPolicy string?;
    4 terminationGracePeriodSeconds *int64?; 5 activeDeadlineSeconds *int64?; 6 dnsPolicy string?;
    7 nodeSelector map[string]?; 8 serviceAccountName string?; 9 serviceAccount string?;
    21 automountServiceAccountToken *bool?; 10 nodeName string?; 11 hostNetwork bool?; 12 hostPID bool?;
    13 hostIPC bool?; 27 shareProcessNamespace *bool?; 14 securityContext *PodSecurityContext?;
    15 imagePullSecrets []LocalObjectReference?; 16 hostname string?; 17 subdomain string?;
    18 affinity *Affinity?; 19 schedulerName string?; 22 tolerations []Toleration?;
    23 hostAliases []HostAlias?; 24 priorityClassName string?; 25 priority *int32?;
    26 dnsConfig *PodDNSConfig?; 28 readinessGates []PodReadinessGate?; 29 runtimeClassName *string?;
    30 enableServiceLinks *bool?; 31 preemptionPolicy *string?; 32 overhead map[Quantity]?;
    33 topologySpreadConstraints []TopologySpreadConstraint?; 35 setHostnameAsFQDN *bool?; 36 os *PodOS?`,
  PodStatus: `1 phase string?; 2 conditions []PodCondition?; 3 message string?; 4 reason string?;
    11 nominatedNodeName string?; 5 hostIP string?; 6 podIP string?; 12 podIPs []PodIP?; 7 startTime *Time?;
    10 initContainerStatuses []ContainerStatus?; 8 containerStatuses []ContainerStatus?; 9 qosClass string?;
    13 ephemeralContainerStatuses []ContainerStatus?`,
  Container: `1 name string; 2 image string?; 3 command []string?; 4 args []string?; 5 workingDir string?;
    6 ports []ContainerPort?; 19 envFrom []EnvFromSource?; 7 env []EnvVar?; 8 resources ResourceRequirements?;
    9 volumeMounts []VolumeMount?; 21 volumeDevices []VolumeDevice?; 10 livenessProbe *Probe?;
    11 readinessProbe *Probe?; 22 startupProbe *Probe?; 12 lifecycle *Lifecycle?;
    13 terminationMessagePath string?; 20 terminationMessagePolicy string?; 14 imagePullPolicy string?;
    15 securityContext *SecurityContext?; 16 stdin bool?; 17 stdinOnce bool?; 18 tty bool?`,
  // EphemeralContainerCommon (field 1, inline) has exactly Container's fields and numbers.
  EphemeralContainer: '1 ... Container; 2 targetContainerName string?',
  PodSecurityContext: `1 seLinuxOptions *SELinuxOptions?; 8 windowsOptions *WindowsSecurityContextOptions?; 2 runAsUser *int64?;
    6 runAsGroup *int64?; 3 runAsNonRoot *bool?; 4 supplementalGroups []int64?; 5 fsGroup *int64?;
    7 sysctls []Sysctl?; 9 fsGroupChangePolicy *string?; 10 seccompProfile *SeccompProfile?`,
  LocalObjectReference: '1 name string?',
  Affinity: '1 nodeAffinity *NodeAffinity?; 2 podAffinity *PodAffinity?; 3 podAntiAffinity *PodAntiAffinity?',
  Toleration: '1 key string?; 2 operator string?; 3 value string?; 4 effect string?; 5 tolerationSeconds *int64?',
  HostAlias: '1 ip string?; 2 hostnames []string?',
  PodDNSConfig: '1 nameservers []string?; 2 searches []string?; 3 options []PodDNSConfigOption?',
  PodReadinessGate: '1 conditionType string',
  TopologySpreadConstraint: `1 maxSkew int32; 2 topologyKey string; 3 whenUnsatisfiable string; 4 labelSelector *LabelSelector?;
    5 minDomains *int32?`,
  PodOS: '1 name string',
  PodCondition: `1 type string; 2 status string; 3 lastProbeTime Time?; 4 lastTransitionTime Time?; 5 reason string?;
    6 message string?`,
  PodIP: '1 ip string?',
  ContainerStatus: `1 name string; 2 state ContainerState?; 3 lastState ContainerState?; 4 ready bool; 5 restartCount int32;
    6 image string; 7 imageID string; 8 containerID string?; 9 started *bool?`,
  ContainerPort: '1 name string?; 2 hostPort int32?; 3 containerPort int32; 4 protocol string?; 5 hostIP string?',
  EnvFromSource: '1 prefix string?; 2 configMapRef *ConfigMapEnvSource?; 3 secretRef *SecretEnvSource?',
  EnvVar: '1 name string; 2 value string?; 3 valueFrom *EnvVarSource?',
  ResourceRequirements: '1 limits map[Quantity]?; 2 requests map[Quantity]?',
  VolumeMount: `1 name string; 2 readOnly bool?; 3 mountPath string; 4 subPath string?; 5 mountPropagation *string?;
    6 subPathExpr string?`,
  VolumeDevice: '1 name string; 2 devicePath string',
  Probe: `1 ... ProbeHandler; 2 initialDelaySeconds int32?; 3 timeoutSeconds int32?; 4 periodSeconds int32?;
    5 successThreshold int32?; 6 failureThreshold int32?; 7 terminationGracePeriodSeconds *int64?`,
  Lifecycle: '1 postStart *LifecycleHandler?; 2 preStop *LifecycleHandler?',
  SecurityContext: `1 capabilities *Capabilities?; 2 privileged *bool?; 3 seLinuxOptions *SELinuxOptions?;
    10 windowsOptions *WindowsSecurityContextOptions?; 4 runAsUser *int64?; 8 runAsGroup *int64?;
    5 runAsNonRoot *bool?; 6 readOnlyRootFilesystem *bool?; 7 allowPrivilegeEscalation *bool?;
    9 procMount *string?; 11 seccompProfile *SeccompProfile?`,
  SELinuxOptions: '1 user string?; 2 role string?; 3 type string?; 4 level string?',
  WindowsSecurityContextOptions: `1 gmsaCredentialSpecName *string?; 2 gmsaCredentialSpec *string?; 3 runAsUserName *string?;
    4 hostProcess *bool?`,
  Sysctl: '1 name string; 2 value string',
  SeccompProfile: '1 type string; 2 localhostProfile *string?',
  NodeAffinity: `1 requiredDuringSchedulingIgnoredDuringExecution *NodeSelector?;
    2 preferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm?`,
  PodAffinity: `1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm?;
    2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm?`,
  PodAntiAffinity: `1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm?;
    2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm?`,
  PodDNSConfigOption: '1 name string?; 2 value *string?',
  ContainerState: `1 waiting *ContainerStateWaiting?; 2 running *ContainerStateRunning?;
    3 terminated *ContainerStateTerminated?`,
  ConfigMapEnvSource: '1 ... LocalObjectReference; 2 optional *bool?',
  SecretEnvSource: '1 ... LocalObjectReference; 2 optional *bool?',
  EnvVarSource: `1 fieldRef *ObjectFieldSelector?; 2 resourceFieldRef *ResourceFieldSelector?;
    3 configMapKeyRef *ConfigMapKeySelector?; 4 secretKeyRef *SecretKeySelector?`,
  ProbeHandler: '1 exec *ExecAction?; 2 httpGet *HTTPGetAction?; 3 tcpSocket *TCPSocketAction?; 4 grpc *GRPCAction?',
  LifecycleHandler: '1 exec *ExecAction?; 2 httpGet *HTTPGetAction?; 3 tcpSocket *TCPSocketAction?',
  Capabilities: '1 add []string?; 2 drop []string?',
  NodeSelector: '1 nodeSelectorTerms []NodeSelectorTerm',
  PreferredSchedulingTerm: '1 weight int32; 2 preference NodeSelectorTerm',
  PodAffinityTerm: `1 labelSelector *LabelSelector?; 2 namespaces []string?; 3 topologyKey string;
    4 namespaceSelector *LabelSelector?`,
  WeightedPodAffinityTerm: '1 weight int32; 2 podAffinityTerm PodAffinityTerm',
  ContainerStateWaiting: '1 reason string?; 2 message string?',
  ContainerStateRunning: '1 startedAt Time?',
  ContainerStateTerminated: `1 exitCode int32; 2 signal int32?; 3 reason string?; 4 message string?; 5 startedAt Time?;
    6 finishedAt Time?; 7 containerID string?`,
  ObjectFieldSelector: '1 apiVersion string?; 2 fieldPath string',
  ResourceFieldSelector: '1 containerName string?; 2 resource string; 3 divisor Quantity?',
  ConfigMapKeySelector: '1 ... LocalObjectReference; 2 key string; 3 optional *bool?',
  SecretKeySelector: '1 ... LocalObjectReference; 2 key string; 3 optional *bool?',
  ExecAction: '1 command []string?',
  HTTPGetAction: '1 path string?; 2 port IntOrString; 3 host string?; 4 scheme string?; 5 httpHeaders []HTTPHeader?',
  TCPSocketAction: '1 port IntOrString; 2 host string?',
  GRPCAction: '1 port int32; 2 service *string',
  NodeSelectorTerm: '1 matchExpressions []NodeSelectorRequirement?; 2 matchFields []NodeSelectorRequirement?',
  HTTPHeader: '1 name string; 2 value string',
  NodeSelectorRequirement: '1 key string; 2 operator string; 3 values []string?',
}
