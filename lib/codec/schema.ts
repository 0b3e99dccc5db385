// The one schema of the built-in Kubernetes types the hub knows field by field: which protobuf
// field number each JSON field has, its type, and Go's rules for it (pointer or not, omitempty).
// The hub's offline answers (JSON from stored protobuf) and the apiserver simulator (protobuf from
// JSON) both read it through typed.ts. The tables are plain text: schema-generated.ts (from k8s.io/api's
// types, build/gen-schema.ts) and schema-meta.ts (meta/v1); this file parses them once, checks them,
// and maps apiVersion/kind to the object's message.
import { generatedMessages } from './schema-generated.ts'
import { metaMessages } from './schema-meta.ts'

/** What a field holds. `message` fields point at their MessageSpec. */
export type FieldType = 'string' | 'bool' | 'int32' | 'int64' | 'bytes' | 'Time' | 'MicroTime' | 'Quantity' | 'IntOrString' | 'FieldsV1' | 'message'

export interface FieldSpec {
  /** Position in MessageSpec.fields (Go struct order). */
  index: number
  number: number
  /** JSON key; '' for an inline (embedded) struct. */
  json: string
  /** For maps: the type of the values (keys are always strings). */
  type: FieldType
  message?: MessageSpec
  repeated: boolean
  map: boolean
  /** A Go pointer: written to protobuf only when set; JSON null/absent means unset. */
  pointer: boolean
  omitempty: boolean
  /** An embedded struct: its fields are the parent's in JSON, message `number` in protobuf. */
  inline: boolean
  /**
   * Added to the API after the oldest release the hub matches byte for byte (v1.24): written to
   * protobuf only when set, as that release wrote nothing for it (a decoder reads absent as zero).
   */
  added: boolean
}

export interface MessageSpec {
  name: string
  /** Go struct order, which is the apiserver's JSON key order. */
  fields: FieldSpec[]
  /** Field-number order, which is the order gogo-protobuf writes. */
  wireOrder: FieldSpec[]
  /** By protobuf field number (sparse). */
  byNumber: (FieldSpec | undefined)[]
  /** Every JSON key the message accepts, including those of inline structs. */
  jsonKeys: Set<string>
}

export interface KindSpec {
  apiVersion: string
  kind: string
  message: MessageSpec
  /** The apiserver writes kind/apiVersion into each item of this kind's lists (metadata-only lists). */
  typedItems: boolean
}

const scalarTypes = new Set<string>(['string', 'bool', 'int32', 'int64', 'bytes', 'Time', 'MicroTime', 'Quantity', 'IntOrString', 'FieldsV1'])

const tables: Record<string, string> = {}
for (const table of [metaMessages, generatedMessages]) {
  for (const [name, text] of Object.entries(table)) {
    if (name in tables) throw new Error(`schema: message ${name} defined twice`)
    tables[name] = text
  }
}

const messages = new Map<string, MessageSpec>()

function parseMessage(name: string): MessageSpec {
  const done = messages.get(name)
  if (done) return done
  const text = tables[name]
  if (text === undefined) throw new Error(`schema: unknown message ${name}`)
  const spec: MessageSpec = { name, fields: [], wireOrder: [], byNumber: [], jsonKeys: new Set() }
  messages.set(name, spec) // before resolving fields, so references may be in any order
  for (const part of text.split(';')) {
    const words = part.trim().split(/\s+/)
    const m = words.length === 3 ? /^(\*?)((?:\[\])?)(map\[(\w+)\]|\w+)(\??)$/.exec(words[2]) : null
    // `+`: added after the release whose bytes the hub matches exactly (schema-generated.ts)
    const added = words[0].startsWith('+')
    const number = Number(added ? words[0].slice(1) : words[0])
    if (!m || !Number.isInteger(number) || number < 1) throw new Error(`schema: ${name}: cannot read field "${part.trim()}"`)
    const inline = words[1] === '...'
    const base = m[4] ?? m[3]
    const field: FieldSpec = {
      index: spec.fields.length,
      number,
      json: inline ? '' : words[1],
      type: scalarTypes.has(base) ? (base as FieldType) : 'message',
      repeated: m[2] === '[]',
      map: m[4] !== undefined,
      pointer: m[1] === '*',
      omitempty: m[5] === '?',
      inline,
      added,
    }
    if (field.type === 'message') field.message = parseMessage(base)
    if (spec.byNumber[number]) throw new Error(`schema: ${name}: field number ${number} used twice`)
    if (inline && (field.type !== 'message' || field.repeated || field.map || field.pointer)) {
      throw new Error(`schema: ${name}: inline field ${number} must be a plain message`)
    }
    spec.fields.push(field)
    spec.byNumber[number] = field
  }
  spec.wireOrder = [...spec.fields].sort((a, b) => a.number - b.number)
  return spec
}

function collectKeys(spec: MessageSpec, into: Set<string>, owner: string): void {
  for (const f of spec.fields) {
    if (f.inline) collectKeys(f.message!, into, owner)
    else if (into.has(f.json)) throw new Error(`schema: ${owner}: JSON key ${f.json} used twice`)
    else into.add(f.json)
  }
}

for (const name of Object.keys(tables)) parseMessage(name)
for (const spec of messages.values()) collectKeys(spec, spec.jsonKeys, spec.name)

/** The parsed message `name`; throws for a name not in the tables. */
export function messageSpec(name: string): MessageSpec {
  const spec = messages.get(name)
  if (!spec) throw new Error(`schema: unknown message ${name}`)
  return spec
}

const kindTable: [apiVersion: string, kind: string, message: string, typedItems?: boolean][] = [
  ['v1', 'Pod', 'Pod'],
  ['v1', 'Node', 'Node'],
  ['v1', 'Service', 'Service'],
  ['v1', 'Endpoints', 'Endpoints'],
  ['v1', 'ConfigMap', 'ConfigMap'],
  ['v1', 'Secret', 'Secret'],
  ['v1', 'Namespace', 'Namespace'],
  ['v1', 'Status', 'Status'],
  ['meta.k8s.io/v1', 'Status', 'Status'],
  ['meta.k8s.io/v1', 'PartialObjectMetadata', 'PartialObjectMetadata', true],
  ['discovery.k8s.io/v1', 'EndpointSlice', 'EndpointSlice'],
  ['discovery.k8s.io/v1beta1', 'EndpointSlice', 'EndpointSliceV1beta1'],
  ['coordination.k8s.io/v1', 'Lease', 'Lease'],
  ['storage.k8s.io/v1', 'CSINode', 'CSINode'],
  ['storage.k8s.io/v1', 'CSIDriver', 'CSIDriver'],
  ['node.k8s.io/v1', 'RuntimeClass', 'RuntimeClass'],
]

const kinds = new Map<string, KindSpec>(
  kindTable.map(([apiVersion, kind, message, typedItems]) => [
    `${apiVersion}/${kind}`,
    { apiVersion, kind, message: messageSpec(message), typedItems: typedItems === true },
  ]),
)

/** Every apiVersion/kind the typed codec knows (each also as a `<kind>List`, except Status). */
export const typedKinds: readonly KindSpec[] = [...kinds.values()]

/** The object kind's schema, or undefined when the codec does not know it field by field. */
export function kindSpec(apiVersion: string, kind: string): KindSpec | undefined {
  return kinds.get(`${apiVersion}/${kind}`)
}

/** The item kind of a list kind the codec knows (`PodList` → `Pod`), else undefined. */
export function listItemKind(apiVersion: string, kind: string): string | undefined {
  if (!kind.endsWith('List')) return undefined
  const item = kind.slice(0, -4)
  return item !== 'Status' && kinds.has(`${apiVersion}/${item}`) ? item : undefined
}
