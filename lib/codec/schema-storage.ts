// Field tables for what a kubelet writes and watches besides pods and its node: storage.k8s.io/v1
// CSINode (it creates its own at first start) and CSIDriver (an informer), and node.k8s.io/v1
// RuntimeClass (an informer). Without them the hub could not answer these in the other wire format.
// Numbers and Go rules as in k8s.io/api v0.24.0 storage/v1 and node/v1 (generated.proto, types.go).
// Notation: see schema-meta.ts.

export const storageMessages: Record<string, string> = {
  // storage.k8s.io/v1; the spec is a plain struct (`json:"spec"`), so it is always written
  CSINode: '1 metadata ObjectMeta?; 2 spec CSINodeSpec',
  // `json:"drivers"`: a CSINode without drivers says `"drivers": null`, as kubelet's first one does
  CSINodeSpec: '1 drivers []CSINodeDriver',
  CSINodeDriver: '1 name string; 2 nodeID string; 3 topologyKeys []string; 4 allocatable *VolumeNodeResources?',
  VolumeNodeResources: '1 count *int32?',
  CSIDriver: '1 metadata ObjectMeta?; 2 spec CSIDriverSpec',
  CSIDriverSpec: `1 attachRequired *bool?; 2 podInfoOnMount *bool?; 3 volumeLifecycleModes []string?;
    4 storageCapacity *bool?; 5 fsGroupPolicy *string?; 6 tokenRequests []TokenRequest?; 7 requiresRepublish *bool?`,
  TokenRequest: '1 audience string; 2 expirationSeconds *int64?',
}

export const nodeMessages: Record<string, string> = {
  // node.k8s.io/v1; tolerations are core/v1's (schema-pod.ts)
  RuntimeClass: '1 metadata ObjectMeta?; 2 handler string; 3 overhead *Overhead?; 4 scheduling *Scheduling?',
  Overhead: '1 podFixed map[Quantity]?',
  Scheduling: '1 nodeSelector map[string]?; 2 tolerations []Toleration?',
}
