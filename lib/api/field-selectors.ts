// Which field selectors kube-apiserver (v1.33) accepts per resource, its 400 for the rest, and the
// value each accepted field has for an object: what a shared watch cache needs to evaluate every
// client's fieldSelector locally exactly as the apiserver would. Pure functions, no I/O.
//
// The apiserver works in two independent steps, mirrored here:
//
//  1. Acceptance. The list/watch/deletecollection handlers (k8s.io/apiserver
//     pkg/endpoints/handlers/get.go ListResource, delete.go DeleteCollection) run every term of the
//     parsed selector through `fields.Selector.Transform(scope.Convertor.ConvertFieldLabel)` and answer
//     `errors.NewBadRequest(err.Error())` for the first failure: 400, reason BadRequest, the
//     conversion function's message, no details. `fields.ParseSelector` sorts the raw terms
//     (apimachinery pkg/fields/selector.go: `sort.StringSlice(parts).Sort()`) before that, so the
//     failure named is the first unsupported term in sorted order, not in the order sent.
//     Conversion functions per kind (AddFieldLabelConversionFunc):
//       - pkg/apis/core/v1/conversion.go: Pod, Node, ReplicationController,
//         AddFieldLabelConversionsForEvent / Namespace / Secret / Service — `field label not supported: %s`
//       - pkg/apis/events/v1/conversion.go AddFieldLabelConversionsForEvent (regarding.* and
//         reportingController mapped onto the core names; events.k8s.io/v1beta1 the same)
//       - pkg/apis/batch/v1/conversion.go: Job — `field label %q not supported for Job`
//       - pkg/apis/certificates/v1/conversion.go: CertificateSigningRequest
//       - any other built-in kind (configmaps, endpoints, endpointslices of discovery.k8s.io v1 and
//         v1beta1, leases, everything in apps …): apimachinery pkg/runtime/conversion.go
//         DefaultMetaV1FieldSelectorConversion — `%q is not a known field selector: only %q, %q`
//       - custom resources: apiextensions-apiserver pkg/apiserver/conversion/converter.go
//         ConvertFieldLabel — metadata.name, metadata.namespace unless cluster-scoped, the version's
//         spec.versions[].selectableFields; else `field label not supported: %s`
//  2. Matching. The registry strategy's GetAttrs builds a fields.Set for each object and the selector
//     compares against it; a label the set lacks reads as "" (fields.Set.Get):
//       - pkg/registry/core/pod/strategy.go ToSelectableFields (spec.hostNetwork via
//         strconv.FormatBool, so a missing one is "false"; status.podIP is PodIPs[0]; status.podIPs is
//         accepted above but never set, so it is always "")
//       - pkg/registry/core/node/strategy.go NodeToSelectableFields (spec.unschedulable FormatBool)
//       - pkg/registry/core/namespace/strategy.go, secret/strategy.go, service/strategy.go
//         (spec.clusterIP, spec.type), replicationcontroller/strategy.go (status.replicas via Itoa)
//       - pkg/registry/core/event/strategy.go ToSelectableFields (source is Source.Component, else
//         ReportingController)
//       - pkg/registry/batch/job/strategy.go (status.successful is Itoa(Status.Succeeded))
//       - pkg/registry/certificates/certificates/strategy.go (spec.signerName)
//       - apiextensions-apiserver pkg/registry/customresource/strategy.go selectableFields (fmt.Sprint
//         of the value at the jsonPath, "" when absent)
//     The internal type is read through the v1 wire format here: v1→internal conversions that matter
//     are spec.serviceAccount (DeprecatedServiceAccount, used when serviceAccountName is empty) and
//     status.podIP (authoritative over status.podIPs[0] when set).
// Differences from older apiservers: spec.hostNetwork, status.podIPs (pods) and spec.clusterIP,
// spec.type (services) are refused by v1.24 with `field label not supported: …`.

import type { FieldSelector, FieldRequirement } from './selectors.ts'

/** How a custom resource's field labels work: its CRD's scope and the served version's selectableFields. */
export interface CustomResourceFields {
  /** a cluster-scoped custom resource refuses metadata.namespace */
  namespaced: boolean
  /** spec.versions[].selectableFields[].jsonPath of the served version, e.g. `.spec.color` */
  selectableFields?: readonly string[]
}

type Value = (obj: unknown) => string

interface Rules {
  /** metadata.namespace is accepted (metadata.name always is) */
  namespaceLabel: boolean
  /** every other accepted label and the value the apiserver compares it with */
  fields: Readonly<Record<string, Value>>
  refuse: (label: string) => string
}

function at(obj: unknown, path: string): unknown {
  let cur: unknown = obj
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur) || !Object.hasOwn(cur, part)) return undefined
    cur = (cur as Record<string, unknown>)[part]
  }
  return cur
}

/** a string field of the Go type: "" when absent */
const str =
  (path: string): Value =>
  obj => {
    const v = at(obj, path)
    return typeof v === 'string' ? v : ''
  }
/** strconv.FormatBool of a bool field: "false" when absent */
const bool =
  (path: string): Value =>
  obj =>
    at(obj, path) === true ? 'true' : 'false'
/** strconv.Itoa of an int32 field: "0" when absent */
const int =
  (path: string): Value =>
  obj => {
    const v = at(obj, path)
    return typeof v === 'number' && Number.isInteger(v) ? String(v) : '0'
  }
/** the first non-empty of several string fields */
const firstOf =
  (...values: Value[]): Value =>
  obj => {
    for (const value of values) {
      const v = value(obj)
      if (v !== '') return v
    }
    return ''
  }
const never: Value = () => ''

function podIPsFirst(obj: unknown): string {
  const ips = at(obj, 'status.podIPs')
  const ip = Array.isArray(ips) ? (ips[0] as { ip?: unknown } | undefined)?.ip : undefined
  return typeof ip === 'string' ? ip : ''
}

/** Go's %q for the strings a field label can be */
function goQuote(s: string): string {
  let out = '"'
  for (const ch of s) {
    const c = ch.codePointAt(0)!
    if (ch === '"' || ch === '\\') out += '\\' + ch
    else if (ch === '\n') out += '\\n'
    else if (ch === '\r') out += '\\r'
    else if (ch === '\t') out += '\\t'
    else if (c === 7) out += '\\a'
    else if (c === 8) out += '\\b'
    else if (c === 11) out += '\\v'
    else if (c === 12) out += '\\f'
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0')
    else if (c >= 0x80 && c < 0xa0) out += '\\u' + c.toString(16).padStart(4, '0')
    else out += ch
  }
  return out + '"'
}

const notSupported = (label: string) => `field label not supported: ${label}`

const defaultRules: Rules = {
  namespaceLabel: true,
  fields: {},
  refuse: label => `${goQuote(label)} is not a known field selector: only "metadata.name", "metadata.namespace"`,
}

const coreEvent: Record<string, Value> = {
  'involvedObject.kind': str('involvedObject.kind'),
  'involvedObject.namespace': str('involvedObject.namespace'),
  'involvedObject.name': str('involvedObject.name'),
  'involvedObject.uid': str('involvedObject.uid'),
  'involvedObject.apiVersion': str('involvedObject.apiVersion'),
  'involvedObject.resourceVersion': str('involvedObject.resourceVersion'),
  'involvedObject.fieldPath': str('involvedObject.fieldPath'),
  reason: str('reason'),
  reportingComponent: str('reportingComponent'),
  source: firstOf(str('source.component'), str('reportingComponent')),
  type: str('type'),
}

const eventsK8sIO: Record<string, Value> = {
  'regarding.kind': str('regarding.kind'),
  'regarding.namespace': str('regarding.namespace'),
  'regarding.name': str('regarding.name'),
  'regarding.uid': str('regarding.uid'),
  'regarding.apiVersion': str('regarding.apiVersion'),
  'regarding.resourceVersion': str('regarding.resourceVersion'),
  'regarding.fieldPath': str('regarding.fieldPath'),
  reason: str('reason'),
  reportingController: str('reportingController'),
  source: firstOf(str('deprecatedSource.component'), str('reportingController')),
  type: str('type'),
}

const builtIn: Record<string, Rules> = {
  '/pods': {
    namespaceLabel: true,
    fields: {
      'spec.nodeName': str('spec.nodeName'),
      // "for backwards compatibility with old v1 clients which send spec.host": read as spec.nodeName
      'spec.host': str('spec.nodeName'),
      'spec.restartPolicy': str('spec.restartPolicy'),
      'spec.schedulerName': str('spec.schedulerName'),
      'spec.serviceAccountName': firstOf(str('spec.serviceAccountName'), str('spec.serviceAccount')),
      'spec.hostNetwork': bool('spec.hostNetwork'),
      'status.phase': str('status.phase'),
      'status.podIP': firstOf(str('status.podIP'), podIPsFirst),
      'status.podIPs': never,
      'status.nominatedNodeName': str('status.nominatedNodeName'),
    },
    refuse: notSupported,
  },
  '/nodes': { namespaceLabel: false, fields: { 'spec.unschedulable': bool('spec.unschedulable') }, refuse: notSupported },
  '/replicationcontrollers': { namespaceLabel: true, fields: { 'status.replicas': int('status.replicas') }, refuse: notSupported },
  '/events': { namespaceLabel: true, fields: coreEvent, refuse: notSupported },
  '/namespaces': { namespaceLabel: false, fields: { 'status.phase': str('status.phase') }, refuse: notSupported },
  '/secrets': { namespaceLabel: true, fields: { type: str('type') }, refuse: notSupported },
  '/services': {
    namespaceLabel: true,
    fields: { 'spec.clusterIP': str('spec.clusterIP'), 'spec.type': str('spec.type') },
    refuse: notSupported,
  },
  'events.k8s.io/events': { namespaceLabel: true, fields: eventsK8sIO, refuse: notSupported },
  'batch/jobs': {
    namespaceLabel: true,
    fields: { 'status.successful': int('status.succeeded') },
    refuse: label => `field label ${goQuote(label)} not supported for Job`,
  },
  'certificates.k8s.io/certificatesigningrequests': {
    namespaceLabel: false,
    fields: { 'spec.signerName': str('spec.signerName') },
    refuse: notSupported,
  },
}

/** fmt.Sprint of a custom resource's selectable field: strings as they are, integers and booleans as text */
const sprint =
  (path: string): Value =>
  obj => {
    const v = at(obj, path)
    return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : ''
  }

function rulesFor(group: string, resource: string, custom?: CustomResourceFields): Rules {
  if (custom) {
    const fields: Record<string, Value> = {}
    for (const jsonPath of custom.selectableFields ?? []) {
      const label = jsonPath.replace(/^\./, '')
      fields[label] = sprint(label)
    }
    return { namespaceLabel: custom.namespaced, fields, refuse: notSupported }
  }
  return builtIn[`${group}/${resource}`] ?? defaultRules
}

/** The field labels the apiserver accepts for a resource (`group` '' for the core group). */
export function selectableFields(group: string, resource: string, custom?: CustomResourceFields): readonly string[] {
  const rules = rulesFor(group, resource, custom)
  return ['metadata.name', ...(rules.namespaceLabel ? ['metadata.namespace'] : []), ...Object.keys(rules.fields)]
}

function accepts(rules: Rules, label: string): boolean {
  return label === 'metadata.name' || (label === 'metadata.namespace' && rules.namespaceLabel) || Object.hasOwn(rules.fields, label)
}

/** The term as the client wrote it, which fields.ParseSelector sorts by (values escaped as it requires). */
function rawTerm(r: FieldRequirement): string {
  return r.field + r.operator + r.value.replace(/[\\,=]/g, c => `\\${c}`)
}

/** Go's string order: by UTF-8 bytes, i.e. by code point. */
function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, c => c.codePointAt(0)!)
  const y = Array.from(b, c => c.codePointAt(0)!)
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i]
  return x.length - y.length
}

/**
 * The message of the apiserver's 400 BadRequest for this selector on this resource, or undefined when
 * every label is accepted. The label named is the first refused one in the apiserver's (sorted) order.
 */
export function fieldSelectorProblem(group: string, resource: string, selector: FieldSelector, custom?: CustomResourceFields): string | undefined {
  const rules = rulesFor(group, resource, custom)
  const refused = selector.requirements.filter(r => !accepts(rules, r.field))
  if (refused.length === 0) return undefined
  const first = refused.map(r => ({ r, raw: rawTerm(r) })).sort((a, b) => byCodePoint(a.raw, b.raw))[0].r
  return rules.refuse(first.field)
}

/**
 * The value of every accepted label of the object other than metadata.name and metadata.namespace,
 * as the apiserver's fields.Set compares it (aliases such as pods' spec.host included, under the
 * name the client uses). `object` is the object as parsed JSON in the served version.
 */
export function fieldsOf(group: string, resource: string, object: unknown, custom?: CustomResourceFields): Record<string, string> {
  const rules = rulesFor(group, resource, custom)
  const out: Record<string, string> = {}
  for (const [label, value] of Object.entries(rules.fields)) out[label] = value(object)
  return out
}

/**
 * fields.Selector.Matches over the apiserver's fields.Set: `fields` from fieldsOf plus the object's
 * name and namespace ('' for a cluster-scoped object). A label without a value compares as "".
 */
export function matchesFieldSet(selector: FieldSelector, fields: Readonly<Record<string, string>>, meta: { name: string; namespace: string }): boolean {
  for (const r of selector.requirements) {
    const v =
      r.field === 'metadata.name' ? meta.name : r.field === 'metadata.namespace' ? meta.namespace : Object.hasOwn(fields, r.field) ? fields[r.field] : ''
    if (r.operator === '!=' ? v === r.value : v !== r.value) return false
  }
  return true
}
