// Field tables for the other core/v1 kinds the hub caches: Node, Service, Endpoints, ConfigMap,
// Secret, Namespace. They exist so the typed codec (typed.ts) can answer these objects in JSON from
// protobuf it stored, and write protobuf from JSON, byte for byte as the apiserver does.
// Notation: see schema-meta.ts.

export const coreMessages: Record<string, string> = {
  Node: '1 metadata ObjectMeta?; 2 spec NodeSpec?; 3 status NodeStatus?',
  Service: '1 metadata ObjectMeta?; 2 spec ServiceSpec?; 3 status ServiceStatus?',
  Endpoints: '1 metadata ObjectMeta?; 2 subsets []EndpointSubset?',
  ConfigMap: '1 metadata ObjectMeta?; 4 immutable *bool?; 2 data map[string]?; 3 binaryData map[bytes]?',
  // Secret data are bytes: base64 strings in JSON, raw bytes in protobuf.
  Secret: `1 metadata ObjectMeta?; 5 immutable *bool?; 2 data map[bytes]?; 4 stringData map[string]?; 3 type string?`,
  Namespace: '1 metadata ObjectMeta?; 2 spec NamespaceSpec?; 3 status NamespaceStatus?',
  NodeSpec: `1 podCIDR string?; 7 podCIDRs []string?; 3 providerID string?; 4 unschedulable bool?; 5 taints []Taint?;
    6 configSource *NodeConfigSource?; 2 externalID string?`,
  NodeStatus: `1 capacity map[Quantity]?; 2 allocatable map[Quantity]?; 3 phase string?; 4 conditions []NodeCondition?;
    5 addresses []NodeAddress?; 6 daemonEndpoints NodeDaemonEndpoints?; 7 nodeInfo NodeSystemInfo?;
    8 images []ContainerImage?; 9 volumesInUse []string?; 10 volumesAttached []AttachedVolume?;
    11 config *NodeConfigStatus?`,
  ServiceSpec: `1 ports []ServicePort?; 2 selector map[string]?; 3 clusterIP string?; 18 clusterIPs []string?;
    4 type string?; 5 externalIPs []string?; 7 sessionAffinity string?; 8 loadBalancerIP string?;
    9 loadBalancerSourceRanges []string?; 10 externalName string?; 11 externalTrafficPolicy string?;
    12 healthCheckNodePort int32?; 13 publishNotReadyAddresses bool?;
    14 sessionAffinityConfig *SessionAffinityConfig?; 19 ipFamilies []string?; 17 ipFamilyPolicy *string?;
    20 allocateLoadBalancerNodePorts *bool?; 21 loadBalancerClass *string?; 22 internalTrafficPolicy *string?`,
  ServiceStatus: '1 loadBalancer LoadBalancerStatus?; 2 conditions []Condition?',
  EndpointSubset: '1 addresses []EndpointAddress?; 2 notReadyAddresses []EndpointAddress?; 3 ports []EndpointPort?',
  NamespaceSpec: '1 finalizers []string?',
  NamespaceStatus: '1 phase string?; 2 conditions []NamespaceCondition?',
  Taint: '1 key string; 2 value string?; 3 effect string; 4 timeAdded *Time?',
  NodeConfigSource: '2 configMap *ConfigMapNodeConfigSource?',
  NodeCondition: `1 type string; 2 status string; 3 lastHeartbeatTime Time?; 4 lastTransitionTime Time?; 5 reason string?;
    6 message string?`,
  NodeAddress: '1 type string; 2 address string',
  NodeDaemonEndpoints: '1 kubeletEndpoint DaemonEndpoint?',
  NodeSystemInfo: `1 machineID string; 2 systemUUID string; 3 bootID string; 4 kernelVersion string; 5 osImage string;
    6 containerRuntimeVersion string; 7 kubeletVersion string; 8 kubeProxyVersion string;
    9 operatingSystem string; 10 architecture string`,
  ContainerImage: '1 names []string; 2 sizeBytes int64?',
  AttachedVolume: '1 name string; 2 devicePath string',
  NodeConfigStatus: `1 assigned *NodeConfigSource?; 2 active *NodeConfigSource?; 3 lastKnownGood *NodeConfigSource?;
    4 error string?`,
  ServicePort: `1 name string?; 2 protocol string?; 6 appProtocol *string?; 3 port int32; 4 targetPort IntOrString?;
    5 nodePort int32?`,
  SessionAffinityConfig: '1 clientIP *ClientIPConfig?',
  LoadBalancerStatus: '1 ingress []LoadBalancerIngress?',
  EndpointAddress: '1 ip string; 3 hostname string?; 4 nodeName *string?; 2 targetRef *ObjectReference?',
  EndpointPort: '1 name string?; 2 port int32; 3 protocol string?; 4 appProtocol *string?',
  NamespaceCondition: '1 type string; 2 status string; 4 lastTransitionTime Time?; 5 reason string?; 6 message string?',
  ObjectReference: `1 kind string?; 2 namespace string?; 3 name string?; 4 uid string?; 5 apiVersion string?;
    6 resourceVersion string?; 7 fieldPath string?`,
  ConfigMapNodeConfigSource: `1 namespace string; 2 name string; 3 uid string?; 4 resourceVersion string?;
    5 kubeletConfigKey string`,
  DaemonEndpoint: '1 Port int32',
  ClientIPConfig: '1 timeoutSeconds *int32?',
  LoadBalancerIngress: '1 ip string?; 2 hostname string?; 4 ports []PortStatus?',
  PortStatus: '1 port int32; 2 protocol string; 3 error *string?',
}
