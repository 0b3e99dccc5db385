// Generates lib/codec/schema-generated.ts: the typed codec's field tables (notation: schema-meta.ts)
// for every kind the hub knows field by field, from k8s.io/api's Go types at one release tag. The
// Go types carry all a table needs, in Go struct order (= the apiserver's JSON key order): the json
// tag (name, omitempty, inline), the protobuf tag (field number) and the Go type (pointer, slice,
// map, named scalars); the generated.proto files lack pointers and omitempty. meta/v1 lives in
// k8s.io/apimachinery and stays in schema-meta.ts.
//
//   fetch github:kubernetes/api (the search tool), then
//   npx tsx build/gen-schema.ts <its git dir> <tag>      e.g. /work/.mirror/kubernetes+api/repo v0.36.3
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'

/** The packages read, by the import alias other packages use for them, and how their clashing names are told apart. */
const packages: { dir: string; aliases: string[]; clash: (name: string) => string }[] = [
  { dir: 'core/v1', aliases: ['v1', 'corev1', 'api'], clash: name => name },
  { dir: 'discovery/v1', aliases: ['discoveryv1'], clash: name => `Slice${name.replace(/^Endpoint/, '')}` },
  { dir: 'discovery/v1beta1', aliases: ['discoveryv1beta1'], clash: name => `${name}V1beta1` },
  { dir: 'coordination/v1', aliases: ['coordinationv1'], clash: name => `Coordination${name}` },
  { dir: 'storage/v1', aliases: ['storagev1'], clash: name => `Storage${name}` },
  { dir: 'node/v1', aliases: ['nodev1'], clash: name => `Node${name}` },
]

/** The kinds' messages, by package: the roots of what is generated (schema.ts's kind table names them). */
const roots: [dir: string, type: string][] = [
  ['core/v1', 'Pod'],
  ['core/v1', 'Node'],
  ['core/v1', 'Service'],
  ['core/v1', 'Endpoints'],
  ['core/v1', 'ConfigMap'],
  ['core/v1', 'Secret'],
  ['core/v1', 'Namespace'],
  ['discovery/v1', 'EndpointSlice'],
  ['discovery/v1beta1', 'EndpointSlice'],
  ['coordination/v1', 'Lease'],
  ['storage/v1', 'CSINode'],
  ['storage/v1', 'CSIDriver'],
  ['node/v1', 'RuntimeClass'],
]

/** Types of other modules, as the notation names them. */
const foreign: Record<string, string> = {
  'metav1.Time': 'Time',
  'metav1.MicroTime': 'MicroTime',
  'metav1.ObjectMeta': 'ObjectMeta',
  'metav1.ListMeta': 'ListMeta',
  'metav1.LabelSelector': 'LabelSelector',
  'metav1.Condition': 'Condition',
  'metav1.FieldsV1': 'FieldsV1',
  'resource.Quantity': 'Quantity',
  'intstr.IntOrString': 'IntOrString',
  'types.UID': 'string',
}
const scalars = new Set(['string', 'bool', 'int32', 'int64'])

interface GoField {
  name: string
  type: string
  json: string
  omitempty: boolean
  inline: boolean
  number: number
}

interface Pkg {
  dir: string
  structs: Map<string, GoField[]>
  /** named non-struct types: `type Protocol string`, `type ResourceList map[ResourceName]resource.Quantity` */
  named: Map<string, string>
}

function readPackage(gitDir: string, tag: string, dir: string): Pkg {
  const text = execFileSync('git', ['--git-dir', gitDir, 'show', `${tag}:${dir}/types.go`], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  const pkg: Pkg = { dir, structs: new Map(), named: new Map() }
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const named = /^type (\w+) (\S.*)$/.exec(lines[i])
    if (!named) continue
    const [, name, rest] = named
    if (rest !== 'struct {') {
      pkg.named.set(name, rest.replace(/\s*\/\/.*$/, '').trim())
      continue
    }
    const fields: GoField[] = []
    for (i++; i < lines.length && lines[i] !== '}'; i++) {
      const field = /^\t([\w.*]+)(?:\s+([^\s`]+))?\s+`([^`]*)`/.exec(lines[i])
      if (!field) continue
      const [, first, second, tag] = field
      const json = /json:"([^"]*)"/.exec(tag)?.[1]
      const protobuf = /protobuf:"([^"]*)"/.exec(tag)?.[1]
      if (json === undefined || json === '-' || protobuf === undefined) continue // TypeMeta, and fields never on the wire
      const [jsonName, ...options] = json.split(',')
      fields.push({
        name: first,
        type: second ?? first,
        json: jsonName,
        omitempty: options.includes('omitempty'),
        inline: options.includes('inline'),
        number: Number(protobuf.split(',')[1]),
      })
    }
    pkg.structs.set(name, fields)
  }
  return pkg
}

/** The release whose protobuf bytes the hub (and its simulator) match exactly: fields added since are marked `+`. */
export const exactRelease = 'v0.24.17'

export function generate(gitDir: string, tag: string): string {
  const pkgs = new Map(packages.map(p => [p.dir, readPackage(gitDir, tag, p.dir)]))
  const before = new Map(packages.map(p => [p.dir, readPackage(gitDir, exactRelease, p.dir)]))
  const existed = (dir: string, type: string, number: number) =>
    before
      .get(dir)!
      .structs.get(type)
      ?.some(f => f.number === number) ?? false
  const byAlias = new Map(packages.flatMap(p => p.aliases.map(a => [a, p.dir] as const)))
  const coreNames = new Set(pkgs.get('core/v1')!.structs.keys())
  // one notation name per (package, struct): core's as they are, another package's told apart where they clash
  const names = new Map<string, string>()
  const taken = new Map<string, string>()
  const nameOf = (dir: string, type: string): string => {
    const key = `${dir}.${type}`
    let name = names.get(key)
    if (name) return name
    const spec = packages.find(p => p.dir === dir)!
    name = dir === 'core/v1' || (!coreNames.has(type) && !taken.has(type)) ? type : spec.clash(type)
    if (dir === 'discovery/v1beta1') name = spec.clash(type)
    if (taken.has(name) && taken.get(name) !== key) throw new Error(`two messages named ${name}: ${taken.get(name)} and ${key}`)
    names.set(key, name)
    taken.set(name, key)
    return name
  }
  const queue: [string, string][] = []
  const out = new Map<string, string>()

  /** The notation of a Go type in package `dir`: `[*][[]]Base`, where Base may be `map[V]`. */
  const notation = (dir: string, goType: string): string => {
    if (goType.startsWith('*')) return `*${notation(dir, goType.slice(1))}`
    if (goType === '[]byte') return 'bytes'
    if (goType.startsWith('[]')) return `[]${notation(dir, goType.slice(2))}`
    const map = /^map\[[^\]]+\](.+)$/.exec(goType)
    if (map) return `map[${notation(dir, map[1])}]`
    if (scalars.has(goType)) return goType
    if (foreign[goType]) return foreign[goType]
    const [alias, local] = goType.includes('.') ? goType.split('.') : [undefined, goType]
    const home = alias === undefined ? dir : byAlias.get(alias)
    if (!home) throw new Error(`${dir}: type ${goType} of an unknown package`)
    const pkg = pkgs.get(home)!
    const named = pkg.named.get(local)
    if (named !== undefined) return notation(home, named)
    if (!pkg.structs.has(local)) throw new Error(`${home}: no type ${local}`)
    queue.push([home, local])
    return nameOf(home, local)
  }

  for (const [dir, type] of roots) {
    nameOf(dir, type)
    queue.push([dir, type])
  }
  while (queue.length > 0) {
    const [dir, type] = queue.shift()!
    const name = nameOf(dir, type)
    if (out.has(name)) continue
    out.set(name, '') // taken before its fields, which may refer back to it
    const fields = pkgs
      .get(dir)!
      .structs.get(type)!
      .map(f => {
        const number = `${existed(dir, type, f.number) ? '' : '+'}${f.number}`
        if (f.inline) return `${number} ... ${notation(dir, f.type)}`
        return `${number} ${f.json} ${notation(dir, f.type)}${f.omitempty ? '?' : ''}`
      })
    out.set(name, fields.join('; '))
  }
  const body = [...out].map(([name, fields]) => `  ${name}: ${JSON.stringify(fields)},`).join('\n')
  return `// Generated by build/gen-schema.ts from k8s.io/api ${tag} (types.go of ${packages.map(p => p.dir).join(', ')}): do not edit.
// The typed codec's field tables (notation: schema-meta.ts) for every kind the hub knows field by field.
// \`+\` marks a field added since ${exactRelease} (Kubernetes 1.24), whose protobuf bytes the hub matches exactly.
// To regenerate: fetch github:kubernetes/api, then npx tsx build/gen-schema.ts <its git dir> <tag>.

export const generatedFrom = ${JSON.stringify(tag)}

export const generatedMessages: Record<string, string> = {
${body}
}
`
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [gitDir, tag] = process.argv.slice(2)
  if (!gitDir || !tag) {
    console.error('usage: npx tsx build/gen-schema.ts <k8s.io/api git dir> <tag>')
    process.exit(2)
  }
  writeFileSync(new URL('../lib/codec/schema-generated.ts', import.meta.url), generate(gitDir, tag))
  console.log(`lib/codec/schema-generated.ts from k8s.io/api ${tag}`)
}
