// The three patch formats the apiserver applies (RFC 7386 merge patch, Kubernetes' strategic merge
// patch, RFC 6902 JSON patch), over plain JSON values, pure and bounded: what pod-status.ts applies
// kubelet's status writes with. Anything malformed or past a bound throws Invalid with a reason.
import { setKey } from '../codec/typed-values.ts'

export type Json = Record<string, unknown>

/** a pod is nowhere near this deep; the merges recurse, so deeper bodies are refused before parsing */
export const maxDepth = 64

/** entries of a list merged by key (conditions, podIPs…): far more than a pod has, and the merge stays cheap */
const maxMergedEntries = 1024
/** RFC 6902 patches: operations, and JSON values `copy` may create (as the apiserver bounds them) */
const maxJsonPatchOps = 10_000
const maxCopiedValues = 1 << 20

export class Invalid extends Error {}
export function fail(reason: string): never {
  throw new Invalid(reason)
}

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
export const has = (o: Json, key: string): boolean => Object.hasOwn(o, key)
/** a value quoted in a reason, never long */
export const quote = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v) : typeof v)

// ---------------------------------------------------------------- RFC 7386 merge patch

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch
  const out: Json = isObject(target) ? { ...target } : {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key]
    else setKey(out, key, mergePatch(has(out, key) ? out[key] : undefined, value))
  }
  return out
}

// ---------------------------------------------------------------- strategic merge patch

/** The patch strategy of the fields a status write reaches (k8s.io/api core/v1 tags); other lists are replaced. */
export interface Schema {
  fields?: Record<string, Schema>
  /** a list merged by this key (patchStrategy:"merge") */
  mergeKey?: string
}
const orderPrefix = '$setElementOrder/'

/** A patch value stored as it is: nulls (deletions of nothing) and directives dropped, as the apiserver's decoding drops them. */
function clean(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clean)
  if (!isObject(v)) return v
  const out: Json = {}
  for (const [key, value] of Object.entries(v)) if (value !== null && !key.startsWith('$')) setKey(out, key, clean(value))
  return out
}

/** The original map with the patch applied; neither is changed (the result shares what the patch leaves alone). */
export function strategicMap(original: Json, patch: Json, schema: Schema | undefined): Json {
  const directive = patch.$patch
  if (directive === 'replace') return clean(patch) as Json
  if (directive === 'delete') return {}
  if (directive !== undefined) fail(`unknown $patch directive ${quote(directive)}`)
  const out: Json = { ...original }
  if (has(patch, '$retainKeys')) {
    const retain = patch.$retainKeys
    if (!Array.isArray(retain)) return fail('$retainKeys is not a list')
    const keep = new Set(retain)
    for (const [key, value] of Object.entries(patch)) {
      if (value !== null && !key.startsWith('$') && !keep.has(key)) fail(`the patch sets ${quote(key)}, which its $retainKeys does not list`)
    }
    for (const key of Object.keys(out)) if (!keep.has(key)) delete out[key]
  }
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith(orderPrefix)) {
      const field = key.slice(orderPrefix.length)
      if (!Array.isArray(value)) fail(`${key} is not a list`)
      // an order with no list in the patch reorders the original list
      const list = out[field]
      const mergeKey = schema?.fields?.[field]?.mergeKey
      if (!has(patch, field) && mergeKey && Array.isArray(list)) setKey(out, field, strategicList(list, [], value, mergeKey, undefined))
    } else if (key.startsWith('$')) {
      // $patch and $retainKeys are done; $deleteFromPrimitiveList has no list to act on in a pod's
      // status, and directives of newer apiservers are left alone
    } else if (value === null) delete out[key]
    else {
      const sub = schema?.fields?.[key]
      const current = has(out, key) ? out[key] : undefined
      const order = patch[orderPrefix + key]
      if (sub?.mergeKey && Array.isArray(value) && (current === undefined || Array.isArray(current)))
        setKey(out, key, strategicList(current ?? [], value, order, sub.mergeKey, sub))
      else if (isObject(current) && isObject(value)) setKey(out, key, strategicMap(current, value, sub))
      else setKey(out, key, clean(value))
    }
  }
  return out
}

/** Where each key first is. */
function positions(keys: (string | undefined)[]): Map<string, number> {
  const at = new Map<string, number>()
  keys.forEach((key, i) => key === undefined || at.has(key) || at.set(key, i))
  return at
}

/** A merge key value as a Map key; only scalars can be merged on. */
function keyOf(v: unknown): string | undefined {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? `${typeof v}:${v}` : undefined
}

function patchKeyOf(entry: unknown, mergeKey: string, where: string): string {
  const key = isObject(entry) ? keyOf(entry[mergeKey]) : undefined
  return key ?? fail(`an entry of ${where} has no scalar ${mergeKey}`)
}

/**
 * A list merged by `mergeKey`: `$patch: delete` entries remove, `$patch: replace` replaces, others
 * merge into the entry of the same key or are appended; then patch entries take the order of
 * `$setElementOrder` (else the patch's), and entries only the original has keep their places among
 * them as far as the original's order allows (strategicpatch's normalizeElementOrder).
 */
function strategicList(original: unknown[], patch: unknown[], order: unknown, mergeKey: string, item: Schema | undefined): unknown[] {
  if (Math.max(original.length, patch.length, Array.isArray(order) ? order.length : 0) > maxMergedEntries)
    fail(`a list merged by ${mergeKey} with more than ${maxMergedEntries} entries`)
  const deleted = new Set<string>()
  const entries: Json[] = []
  let replace = false
  for (const entry of patch) {
    const directive = isObject(entry) ? entry.$patch : undefined
    if (directive === undefined) entries.push(isObject(entry) ? entry : fail(`an entry of a list merged by ${mergeKey} is not an object`))
    else if (directive === 'delete') deleted.add(patchKeyOf(entry, mergeKey, 'a $patch: delete'))
    else if (directive === 'replace') replace = true
    else fail(`unknown $patch directive ${quote(directive)} in a list`)
  }
  const keyIn = (entry: unknown) => (isObject(entry) ? keyOf(entry[mergeKey]) : undefined)
  const merged = replace ? [] : original.filter(entry => !deleted.has(keyIn(entry) ?? ''))
  const at = positions(merged.map(keyIn))
  for (const entry of entries) {
    const key = patchKeyOf(entry, mergeKey, 'the patch')
    const i = at.get(key)
    if (i !== undefined) merged[i] = strategicMap(merged[i] as Json, entry, item)
    else (at.set(key, merged.length), merged.push(clean(entry)))
  }

  let orderKeys = entries.map(e => patchKeyOf(e, mergeKey, 'the patch'))
  if (order !== undefined) {
    if (!Array.isArray(order)) return fail(`$setElementOrder for a list merged by ${mergeKey} is not a list`)
    const wanted = order.map(e => patchKeyOf(e, mergeKey, '$setElementOrder'))
    // as the apiserver: the patch's entries must appear in $setElementOrder, in the same order
    let next = 0
    for (const key of orderKeys) {
      while (next < wanted.length && wanted[next] !== key) next++
      if (next++ >= wanted.length) fail(`the patch's list does not follow its $setElementOrder`)
    }
    orderKeys = wanted
  }
  const rank = positions(orderKeys)
  const serverRank = positions(original.map(keyIn))
  // [entry, its rank in the order, its place in the original]
  const fromPatch: [unknown, number, number | undefined][] = []
  const serverOnly: [unknown, number, number | undefined][] = []
  for (const entry of merged) {
    const key = keyIn(entry) ?? ''
    const r = rank.get(key)
    ;(r === undefined ? serverOnly : fromPatch).push([entry, r ?? 0, serverRank.get(key)])
  }
  fromPatch.sort((a, b) => a[1] - b[1])
  const out: unknown[] = []
  let i = 0
  let j = 0
  while (i < serverOnly.length || j < fromPatch.length) {
    if (j >= fromPatch.length) out.push(serverOnly[i++][0])
    else if (i >= serverOnly.length) out.push(fromPatch[j++][0])
    else {
      const [left, right] = [serverOnly[i][2], fromPatch[j][2]]
      out.push(left !== undefined && right !== undefined && left < right ? serverOnly[i++][0] : fromPatch[j++][0])
    }
  }
  return out
}

// ---------------------------------------------------------------- RFC 6902 JSON patch

type Operation = (root: unknown, path: string[], op: Json, n: number, budget: { left: number }) => unknown
const operand = (op: Json, n: number): unknown => (has(op, 'value') ? op.value : fail(`JSON patch operation ${n} has no value`))
const operations: Record<string, Operation> = {
  add: (root, path, op, n) => add(root, path, operand(op, n)),
  remove: (root, path) => remove(root, path),
  replace: (root, path, op, n) => add(remove(root, path), path, operand(op, n)),
  move: (root, path, op, n) => {
    const from = pointer(op.from, n)
    if (path.length > from.length && from.every((t, i) => path[i] === t)) fail(`JSON patch operation ${n} moves a value into itself`)
    const moved = get(root, from)
    return add(remove(root, from), path, moved)
  },
  copy: (root, path, op, n, budget) => add(root, path, copyCounted(get(root, pointer(op.from, n)), budget)),
  test: (root, path, op, n) => (sameJson(get(root, path), operand(op, n)) ? root : fail(`JSON patch operation ${n} (test of ${quote(op.path)}) failed`)),
}

/** Applies the operations to `doc` in place (a copy the caller made); returns the new root. */
export function applyJsonPatch(doc: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) return fail('a JSON patch is not a list of operations')
  if (ops.length > maxJsonPatchOps) fail(`the JSON patch has ${ops.length} operations, more than ${maxJsonPatchOps}`)
  const budget = { left: maxCopiedValues }
  let root = doc
  for (const [n, op] of ops.entries()) {
    const apply = isObject(op) && typeof op.op === 'string' && Object.hasOwn(operations, op.op) ? operations[op.op] : undefined
    if (!apply) return fail(`JSON patch operation ${n} is not add, remove, replace, move, copy or test`)
    root = apply(root, pointer(op.path, n), op, n, budget)
  }
  return root
}

function pointer(v: unknown, n: number): string[] {
  const where = `JSON patch operation ${n}`
  if (typeof v !== 'string' || (v !== '' && !v.startsWith('/'))) return fail(`${where}: ${quote(v)} is not a JSON pointer`)
  if (v === '') return []
  const tokens = v.slice(1).split('/')
  if (tokens.length > maxDepth) fail(`${where}: the path is deeper than ${maxDepth}`)
  return tokens.map(t => (/~[^01]|~$/.test(t) ? fail(`${where}: ${quote(v)} is not a JSON pointer`) : t.replace(/~1/g, '/').replace(/~0/g, '~')))
}

function arrayIndex(list: unknown[], token: string, insert: boolean): number {
  const i = /^(0|[1-9][0-9]{0,8})$/.test(token) ? Number(token) : -1
  if (i < 0 || i > list.length || (i === list.length && !insert)) fail(`no element ${quote(token)} in a list of ${list.length}`)
  return i
}

/** The object or list holding the path's last token, and that token; fails where the path does not lead. */
function locate(root: unknown, path: string[]): [Json | unknown[], string] {
  const at = path.slice(0, -1).reduce(child, root)
  return isObject(at) || Array.isArray(at) ? [at, path[path.length - 1]] : fail(`the path /${path.join('/')} does not exist`)
}

function child(at: unknown, token: string): unknown {
  if (Array.isArray(at)) return at[arrayIndex(at, token, false)]
  return isObject(at) && has(at, token) ? at[token] : fail(`there is no ${quote(token)} on the path`)
}

const get = (root: unknown, path: string[]): unknown => (path.length === 0 ? root : child(...locate(root, path)))

function add(root: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value
  const [parent, last] = locate(root, path)
  if (Array.isArray(parent)) parent.splice(last === '-' ? parent.length : arrayIndex(parent, last, true), 0, value)
  else setKey(parent, last, value)
  return root
}

function remove(root: unknown, path: string[]): unknown {
  if (path.length === 0) return fail('a JSON patch cannot remove the whole pod')
  const [parent, last] = locate(root, path)
  child(parent, last) // it must exist
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, false), 1)
  else delete parent[last]
  return root
}

function copyCounted(v: unknown, budget: { left: number }): unknown {
  if (--budget.left < 0) fail(`the JSON patch copies more than ${maxCopiedValues} values`)
  if (Array.isArray(v)) return v.map(e => copyCounted(e, budget))
  if (!isObject(v)) return v
  const out: Json = {}
  for (const [key, value] of Object.entries(v)) setKey(out, key, copyCounted(value, budget))
  return out
}

function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((e, i) => sameJson(e, b[i]))
  if (!isObject(a) || !isObject(b)) return false
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every(k => has(b, k) && sameJson(a[k], b[k]))
}
