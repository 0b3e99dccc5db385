// PATCH bodies: JSON merge patch (RFC 7386), a pragmatic strategic merge patch (merge patch whose
// lists of named objects merge by name, with $patch / $setElementOrder directives understood or
// dropped), and JSON patch (RFC 6902).

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

function namedList(v: unknown): v is { name: string }[] {
  return Array.isArray(v) && v.every(e => isObject(e) && typeof e.name === 'string')
}

export function strategicMergePatch(target: any, patch: any): any {
  if (!isObject(patch)) return patch
  if (patch.$patch === 'replace') {
    const { $patch: _p, ...rest } = patch
    return stripDirectives(rest)
  }
  if (patch.$patch === 'delete') return undefined
  const out: Record<string, any> = isObject(target) ? { ...target } : {}
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue // $setElementOrder/…, $retainKeys, $deleteFromPrimitiveList/…
    if (v === null) {
      delete out[k]
    } else if (Array.isArray(v) && namedList(v) && namedList(out[k])) {
      const merged: any[] = [...out[k]]
      for (const item of v as any[]) {
        const at = merged.findIndex(e => e.name === item.name)
        if (item.$patch === 'delete') {
          if (at !== -1) merged.splice(at, 1)
        } else if (at === -1) {
          merged.push(stripDirectives(item))
        } else {
          merged[at] = strategicMergePatch(merged[at], item)
        }
      }
      out[k] = merged
    } else if (Array.isArray(v)) {
      out[k] = v.filter(e => !(isObject(e) && e.$patch === 'delete')).map(stripDirectives)
    } else {
      const next = strategicMergePatch(out[k], v)
      if (next === undefined) delete out[k]
      else out[k] = next
    }
  }
  return out
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
