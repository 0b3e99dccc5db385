// The two encodings the apiserver speaks to node components: JSON, and Kubernetes protobuf
// (`application/vnd.kubernetes.protobuf`). Objects, lists and watch streams come in either.
export type WireFormat = 'json' | 'protobuf'
