// PATCH bodies: JSON merge patch (RFC 7386), a pragmatic strategic merge patch (merge patch whose
// lists merge by the Kubernetes merge keys where they have one: conditions by type, podIPs and
// hostIPs by ip, a node's addresses by type, the rest of named objects by name; `$patch` and
// `$setElementOrder` understood, `$deleteFromPrimitiveList` applied, `$retainKeys` dropped; no
// schema, so a list is merged only when every entry has the key), and JSON patch (RFC 6902).

import { badRequest } from './errors.ts'

const isObject = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v)

export function mergePatch(target: any, patch: any): any {
  if (!isObject(patch)) return patch
  const out: Record<string, any> = isObject(target) ? { ...target } : {}
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = mergePatch(out[k], v)
  }
  return out
}

/**
 * The merge key of a list field, as the Kubernetes types declare it (patchMergeKey); candidates in
 * order, the first every entry has wins. A field not named here merges by `name` when every entry
 * has one, else the patch's list replaces the object's.
 */
const mergeKeys: Record<string, readonly string[]> = {
  conditions: ['type'],
  podIPs: ['ip'],
  hostIPs: ['ip'],
  // NodeStatus.addresses; an Endpoints subset's addresses have no type and are replaced whole
  addresses: ['type'],
  taints: ['key'],
  volumeMounts: ['mountPath'],
  volumeDevices: ['devicePath'],
  ownerReferences: ['uid'],
  // a container's ports, then a Service's
  ports: ['containerPort', 'port'],
}

type Key = string | number

function scalarKey(entry: unknown, key: string): Key | undefined {
  const v = isObject(entry) ? entry[key] : undefined
  return typeof v === 'string' || typeof v === 'number' ? v : undefined
}

/** The key `field`'s list merges by, or undefined: every entry of both lists (and of the order) must have it. */
function mergeKeyOf(field: string, patch: unknown[], target: unknown, order: unknown): string | undefined {
  const lists = [patch, Array.isArray(target) ? target : [], Array.isArray(order) ? order : []]
  if (!lists.every(l => l.every(isObject))) return undefined
  return (mergeKeys[field] ?? ['name']).find(key => lists.every(l => l.every(e => scalarKey(e, key) !== undefined)))
}

const orderPrefix = '$setElementOrder/'
const deletePrimitivesPrefix = '$deleteFromPrimitiveList/'

export function strategicMergePatch(target: any, patch: any): any {
  if (!isObject(patch)) return patch
  if (patch.$patch === 'replace') {
    const { $patch: _p, ...rest } = patch
    return stripDirectives(rest)
  }
  if (patch.$patch === 'delete') return undefined
  const out: Record<string, any> = isObject(target) ? { ...target } : {}
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue // $setElementOrder/… (with its list, below), $retainKeys, $deleteFromPrimitiveList/… (after)
    if (v === null) {
      delete out[k]
    } else if (Array.isArray(v)) {
      out[k] = mergeList(k, out[k], v, patch[orderPrefix + k])
    } else {
      const next = strategicMergePatch(out[k], v)
      if (next === undefined) delete out[k]
      else out[k] = next
    }
  }
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith(orderPrefix) && !Object.hasOwn(patch, k.slice(orderPrefix.length))) {
      // an order alone reorders what the object holds
      const field = k.slice(orderPrefix.length)
      if (Array.isArray(out[field])) out[field] = mergeList(field, out[field], [], v)
    } else if (k.startsWith(deletePrimitivesPrefix) && Array.isArray(v)) {
      const field = k.slice(deletePrimitivesPrefix.length)
      if (Array.isArray(out[field])) out[field] = out[field].filter((e: unknown) => !v.includes(e))
    }
  }
  return out
}

/**
 * A list of the patch into the object's: by its merge key when it has one (`$patch: delete` entries
 * remove, others merge into the entry of the same key or are added, `$patch: replace` replaces),
 * else replaced. Then the patch's entries take the order of `$setElementOrder` (else the patch's),
 * and entries only the object has keep their places among them (strategicpatch's normalizeElementOrder).
 */
function mergeList(field: string, target: unknown, patch: unknown[], order: unknown): unknown[] {
  const replace = patch.some(e => isObject(e) && e.$patch === 'replace')
  const entries: any[] = patch.filter(e => !(isObject(e) && e.$patch === 'replace'))
  const key = mergeKeyOf(field, entries, target, order)
  if (key === undefined || replace) {
    if (key === undefined && Array.isArray(order) && !order.every(isObject)) return orderPrimitives(entries, order)
    return entries.filter(e => !(isObject(e) && e.$patch === 'delete')).map(stripDirectives)
  }
  const original = Array.isArray(target) ? target : []
  const keyOf = (e: unknown) => scalarKey(e, key)!
  const deleted = new Set(entries.filter(e => e.$patch === 'delete').map(keyOf))
  const merged: any[] = original.filter(e => !deleted.has(keyOf(e)))
  const patched = entries.filter(e => e.$patch !== 'delete')
  for (const entry of patched) {
    const at = merged.findIndex(e => keyOf(e) === keyOf(entry))
    if (at === -1) merged.push(stripDirectives(entry))
    else merged[at] = strategicMergePatch(merged[at], entry)
  }
  const orderKeys = Array.isArray(order) ? order.map(keyOf) : patched.map(keyOf)
  const rank = new Map<Key, number>()
  orderKeys.forEach((k, i) => rank.has(k) || rank.set(k, i))
  const fromPatch = merged.filter(e => rank.has(keyOf(e))).sort((a, b) => rank.get(keyOf(a))! - rank.get(keyOf(b))!)
  const serverOnly = merged.filter(e => !rank.has(keyOf(e)))
  const serverRank = new Map<Key, number>()
  original.forEach((e, i) => serverRank.has(keyOf(e)) || serverRank.set(keyOf(e), i))
  const out: unknown[] = []
  let i = 0
  let j = 0
  while (i < serverOnly.length || j < fromPatch.length) {
    if (j >= fromPatch.length) out.push(serverOnly[i++])
    else if (i >= serverOnly.length) out.push(fromPatch[j++])
    else {
      // an entry new to the object has no place in it yet: it goes before the object's own, as the apiserver puts it
      const left = serverRank.get(keyOf(serverOnly[i]))
      const right = serverRank.get(keyOf(fromPatch[j]))
      out.push(left !== undefined && right !== undefined && left < right ? serverOnly[i++] : fromPatch[j++])
    }
  }
  return out
}

/** A list of scalars replaced by the patch's, in the order `$setElementOrder` gives. */
function orderPrimitives(entries: unknown[], order: unknown[]): unknown[] {
  const rank = new Map(order.map((v, i) => [v, i]))
  const kept = entries.filter(e => !(isObject(e) && e.$patch === 'delete')).map(stripDirectives)
  return kept.sort((a, b) => (rank.get(a) ?? order.length) - (rank.get(b) ?? order.length))
}

function stripDirectives(v: any): any {
  if (Array.isArray(v)) return v.map(stripDirectives)
  if (!isObject(v)) return v
  const out: Record<string, any> = {}
  for (const [k, x] of Object.entries(v)) if (!k.startsWith('$')) out[k] = stripDirectives(x)
  return out
}

function pointer(path: string): string[] {
  if (path === '') return []
  if (!path.startsWith('/')) throw badRequest(`json patch: invalid path "${path}"`)
  return path
    .slice(1)
    .split('/')
    .map(p => p.replace(/~1/g, '/').replace(/~0/g, '~'))
}

function parentOf(doc: any, parts: string[], path: string): { parent: any; key: string } {
  let cur = doc
  for (const p of parts.slice(0, -1)) {
    cur = Array.isArray(cur) ? cur[Number(p)] : isObject(cur) ? cur[p] : undefined
    if (cur === undefined || cur === null || typeof cur !== 'object') {
      throw badRequest(`json patch: path "${path}" does not exist`)
    }
  }
  return { parent: cur, key: parts[parts.length - 1] }
}

function getAt(doc: any, path: string): any {
  let cur = doc
  for (const p of pointer(path)) {
    cur = Array.isArray(cur) ? cur[Number(p)] : isObject(cur) ? cur[p] : undefined
    if (cur === undefined) throw badRequest(`json patch: path "${path}" does not exist`)
  }
  return cur
}

function removeAt(doc: any, path: string): any {
  const parts = pointer(path)
  if (parts.length === 0) throw badRequest('json patch: cannot remove the whole document')
  const { parent, key } = parentOf(doc, parts, path)
  if (Array.isArray(parent)) {
    const i = Number(key)
    if (!Number.isInteger(i) || i < 0 || i >= parent.length) throw badRequest(`json patch: path "${path}" does not exist`)
    return parent.splice(i, 1)[0]
  }
  if (!(key in parent)) throw badRequest(`json patch: path "${path}" does not exist`)
  const old = parent[key]
  delete parent[key]
  return old
}

function addAt(doc: any, path: string, value: any, replace: boolean): any {
  const parts = pointer(path)
  if (parts.length === 0) return structuredClone(value)
  const { parent, key } = parentOf(doc, parts, path)
  if (Array.isArray(parent)) {
    const i = key === '-' ? parent.length : Number(key)
    if (!Number.isInteger(i) || i < 0 || i > parent.length || (replace && i >= parent.length)) {
      throw badRequest(`json patch: index out of range in "${path}"`)
    }
    if (replace) parent[i] = structuredClone(value)
    else parent.splice(i, 0, structuredClone(value))
  } else {
    if (replace && !(key in parent)) throw badRequest(`json patch: path "${path}" does not exist`)
    parent[key] = structuredClone(value)
  }
  return doc
}

export function jsonPatch(target: any, ops: unknown): any {
  if (!Array.isArray(ops)) throw badRequest('json patch: the body must be a JSON array of operations')
  let doc = structuredClone(target)
  for (const op of ops) {
    if (!isObject(op) || typeof op.path !== 'string') throw badRequest('json patch: each operation needs "op" and "path"')
    switch (op.op) {
      case 'add':
        doc = addAt(doc, op.path, op.value, false)
        break
      case 'replace':
        doc = addAt(doc, op.path, op.value, true)
        break
      case 'remove':
        removeAt(doc, op.path)
        break
      case 'test':
        if (JSON.stringify(getAt(doc, op.path)) !== JSON.stringify(op.value)) {
          throw badRequest(`json patch: test failed at "${op.path}"`)
        }
        break
      case 'move': {
        const v = removeAt(doc, String(op.from))
        doc = addAt(doc, op.path, v, false)
        break
      }
      case 'copy':
        doc = addAt(doc, op.path, getAt(doc, String(op.from)), false)
        break
      default:
        throw badRequest(`json patch: unsupported operation "${String(op.op)}"`)
    }
  }
  return doc
}
