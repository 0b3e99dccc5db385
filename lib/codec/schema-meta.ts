// Field tables for meta/v1 (ObjectMeta, ListMeta, Status, …), which live in k8s.io/apimachinery; the
// API groups' tables are generated from k8s.io/api (schema-generated.ts). They exist so the typed
// codec (typed.ts) can turn objects from JSON into protobuf and back without a schema compiler.
//
// Notation (parsed by schema.ts), one field per `;`, listed in Go struct order (= JSON key order):
//   <protobuf field number> <JSON name> <type>
// type: [*][[]]Base[?]   `*` Go pointer (written only when set), `[]` repeated, `?` json omitempty.
// Base: string bool int32 int64 bytes Time MicroTime Quantity IntOrString FieldsV1, map[<value>]
// (map<string, value>), or a message name. `<n> ... <Message>` embeds a struct inline: its fields
// appear in the parent's JSON object, in protobuf it is the nested message <n>. `+<n>`: a field
// added after v1.24, written to protobuf only when set (v1.24's bytes are matched exactly).
// Numbers and names as in k8s.io/apimachinery's meta/v1.

export const metaMessages: Record<string, string> = {
  ObjectMeta: `1 name string?; 2 generateName string?; 3 namespace string?; 4 selfLink string?; 5 uid string?;
    6 resourceVersion string?; 7 generation int64?; 8 creationTimestamp Time?; 9 deletionTimestamp *Time?;
    10 deletionGracePeriodSeconds *int64?; 11 labels map[string]?; 12 annotations map[string]?;
    13 ownerReferences []OwnerReference?; 14 finalizers []string?; 15 clusterName string?;
    17 managedFields []ManagedFieldsEntry?`,
  OwnerReference: `5 apiVersion string; 1 kind string; 3 name string; 4 uid string; 6 controller *bool?;
    7 blockOwnerDeletion *bool?`,
  ManagedFieldsEntry: `1 manager string?; 2 operation string?; 3 apiVersion string?; 4 time *Time?;
    6 fieldsType string?; 7 fieldsV1 *FieldsV1?; 8 subresource string?`,
  ListMeta: '1 selfLink string?; 2 resourceVersion string?; 3 continue string?; 4 remainingItemCount *int64?',
  Status: `1 metadata ListMeta?; 2 status string?; 3 message string?; 4 reason string?; 5 details *StatusDetails?;
    6 code int32?`,
  StatusDetails: `1 name string?; 2 group string?; 3 kind string?; 6 uid string?; 4 causes []StatusCause?;
    5 retryAfterSeconds int32?`,
  StatusCause: '1 reason string?; 2 message string?; 3 field string?',
  LabelSelector: '1 matchLabels map[string]?; 2 matchExpressions []LabelSelectorRequirement?',
  LabelSelectorRequirement: '1 key string; 2 operator string; 3 values []string?',
  Condition: `1 type string; 2 status string; 3 observedGeneration int64?; 4 lastTransitionTime Time;
    5 reason string; 6 message string`,
  PartialObjectMetadata: '1 metadata ObjectMeta?',
}
