// inclusterconfig (kubelet's ConfigMaps): in ConfigMap kube-system/kube-proxy, data["config.conf"]
// (kube-proxy's KubeProxyConfiguration) has its `kubeconfig:` line commented out, so that kube-proxy
// on an edge node falls back to the in-cluster config, i.e. to Service default/kubernetes, which
// masterservice and forwardkubesvctraffic point at the hub. A line counts when, with spaces (only
// spaces) trimmed from both ends, it splits on ":" into exactly two parts of which the first is
// "kubeconfig"; its first "kubeconfig" becomes "#kubeconfig". Every other line, key and object is
// left as it is. As YurtHub's pkg/yurthub/filter/inclusterconfig, except that the input is never
// mutated (YurtHub rewrote the cached ConfigMap in place, #2481).
//
// Protobuf field numbers (k8s.io/api core/v1 generated.proto, v1.24):
//   ConfigMap: 1 metadata (ObjectMeta: 1 name, 3 namespace), 2 data (map entries {1 key, 2 value})
// The value is edited as bytes (latin1): every byte the rule looks at is ASCII, and UTF-8 never has
// ASCII bytes inside a multi-byte character, so any other byte (valid UTF-8 or not) is kept.
import { objectMeta } from '../lib/codec/protobuf.ts'
import { type ObjectFilter, hasKind, isKindOf, isObject, namespacedName } from './object-filter.ts'
import { Patches, applyPatches, inner, lastBytes, lastString, spansOf, stringField } from './protobuf-edit.ts'

export const kubeProxyConfigMapNamespace = 'kube-system'
export const kubeProxyConfigMapName = 'kube-proxy'
export const kubeProxyConfigKey = 'config.conf'

const name = 'inclusterconfig'
const kinds = [{ apiVersion: 'v1', kind: 'ConfigMap' }]
const word = 'kubeconfig'

/** Go's strings.Trim(line, " "). */
function trimSpaces(line: string): string {
  let start = 0
  let end = line.length
  while (start < end && line.charCodeAt(start) === 0x20) start++
  while (end > start && line.charCodeAt(end - 1) === 0x20) end--
  return line.slice(start, end)
}

/** config.conf with its kubeconfig line(s) commented out; the same string when there is none. */
export function commentKubeconfig(conf: string): string {
  let changed = false
  const lines = conf.split('\n').map(line => {
    const parts = trimSpaces(line).split(':')
    if (parts.length !== 2 || parts[0] !== word) return line
    changed = true
    const at = line.indexOf(word)
    return `${line.slice(0, at)}#${line.slice(at)}`
  })
  return changed ? lines.join('\n') : conf
}

const isKubeProxy = (namespace: string, configMap: string): boolean => namespace === kubeProxyConfigMapNamespace && configMap === kubeProxyConfigMapName

function json(object: unknown, kind: string): unknown {
  if (!isObject(object) || !isKindOf(object, kind, kinds)) return object
  const { namespace, name: configMap } = namespacedName(object)
  if (!isKubeProxy(namespace, configMap) || !isObject(object.data)) return object
  const data = object.data
  const conf = Object.hasOwn(data, kubeProxyConfigKey) ? data[kubeProxyConfigKey] : undefined
  if (typeof conf !== 'string') return object
  const commented = commentKubeconfig(conf)
  return commented === conf ? object : { ...object, data: { ...data, [kubeProxyConfigKey]: commented } }
}

function protobuf(raw: Buffer, kind: string): Buffer {
  if (!hasKind(kind, kinds)) return raw
  const meta = objectMeta(raw)
  if (!isKubeProxy(meta.namespace, meta.name)) return raw
  const top = new Patches(spansOf(raw))
  // the last entry of the key counts, as when a map is decoded
  let entry = -1
  top.spans.forEach((s, i) => {
    if (s.field === 2 && lastString(raw, inner(raw, s), 1) === kubeProxyConfigKey) entry = i
  })
  if (entry === -1) return raw
  const entryPatches = new Patches(inner(raw, top.spans[entry]))
  const conf = lastBytes(raw, entryPatches.spans, 2)
  if (conf === undefined) return raw
  const text = conf.toString('latin1')
  const commented = commentKubeconfig(text)
  if (commented === text) return raw
  entryPatches.set(raw, 2, stringField(2, Buffer.from(commented, 'latin1')))
  top.nest(raw, entry, entryPatches)
  return applyPatches(raw, top)
}

export const inClusterConfigFilter: ObjectFilter = {
  name,
  kinds,
  json,
  protobuf,
  drops: false,
  only: { namespace: kubeProxyConfigMapNamespace, name: kubeProxyConfigMapName },
}
