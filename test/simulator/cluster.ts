// API semantics over the store: create / update / patch / delete / list with the apiserver's
// errors (404, 409 AlreadyExists and Conflict, 422 Invalid, 410 Expired, 400 for bad continue
// tokens), version conversion and continue tokens. Used by the HTTP handlers and the
// programmatic API alike.

import { failure, notFound } from '../../lib/api/status.ts'
import { isEmptySelector, matchesLabels, type FieldSelector, type LabelSelector } from '../../lib/api/selectors.ts'
import { fieldsOf, matchesFieldSet } from '../../lib/api/field-selectors.ts'
import type { Identity } from './auth.ts'
import { ApiError, badRequest } from './errors.ts'
import { keyOf, prepareCreate, sortKeys, specChanged } from './objects.ts'
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.ts'
import type { ResourceEntry, ResourceRegistry } from './resources.ts'
import type { Store } from './store.ts'

export interface WriteOptions {
  dryRun?: boolean
  /** programmatic writes: create missing namespaces, and let update/patch change status too */
  programmatic?: boolean
  subresource?: string
  /** who asked (HTTP writes); undefined for programmatic ones */
  user?: Identity
}

/** Rules of one resource beyond the generic ones, like the apiserver's registry strategies. */
export interface ResourceStrategy {
  /** validates (throwing ApiError) and completes an object about to be created, after name generation */
  prepareCreate?(entry: ResourceEntry, obj: any, user: Identity | undefined): any
  /** the object after an update through one of entry.writableSubresources */
  updateSubresource?(entry: ResourceEntry, subresource: string, prev: any, incoming: any): any
}

export interface ListOptions {
  namespace?: string
  labelSelector?: LabelSelector
  fieldSelector?: FieldSelector
  limit?: number
  continue?: string
  resourceVersion?: string
  resourceVersionMatch?: string
}

export interface ListResult {
  items: any[]
  resourceVersion: string
  continue?: string
  remainingItemCount?: number
}

export type PatchType = 'merge' | 'strategic' | 'json' | 'apply'

export function qualifiedResource(entry: ResourceEntry): string {
  return entry.group ? `${entry.resource}.${entry.group}` : entry.resource
}

function conflict(entry: ResourceEntry, name: string, why: string): ApiError {
  const details = entry.group ? { name, group: entry.group, kind: entry.resource } : { name, kind: entry.resource }
  return ApiError.of(409, `Operation cannot be fulfilled on ${qualifiedResource(entry)} "${name}": ${why}`, 'Conflict', details)
}

const modifiedMsg = 'the object has been modified; please apply your changes to the latest version and try again'

/** Whether `obj`, in the version `entry` serves, is selected; field selectors over the apiserver's fields.Set (fieldsOf). */
export function matches(
  entry: ResourceEntry,
  obj: any,
  opts: { namespace?: string; name?: string; labelSelector?: LabelSelector; fieldSelector?: FieldSelector },
): boolean {
  if (opts.namespace && obj.metadata?.namespace !== opts.namespace) return false
  if (opts.name && obj.metadata?.name !== opts.name) return false
  if (opts.labelSelector && !matchesLabels(opts.labelSelector, obj.metadata?.labels)) return false
  if (opts.fieldSelector && !isEmptySelector(opts.fieldSelector)) {
    const fields = fieldsOf(entry.group, entry.resource, obj, entry.custom ? { namespaced: entry.namespaced } : undefined)
    if (!matchesFieldSet(opts.fieldSelector, fields, { name: obj.metadata?.name ?? '', namespace: obj.metadata?.namespace ?? '' })) return false
  }
  return true
}

export function encodeContinue(rv: number, start: string): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start })).toString('base64url')
}

export function decodeContinue(token: string): { rv: number; start: string } {
  const invalid = (why: string) => badRequest(`invalid continue token: continue key is not valid: ${why}`)
  const bad = token.search(/[^A-Za-z0-9_-]/)
  if (bad !== -1) throw invalid(`illegal base64 data at input byte ${bad}`)
  let c: any
  try {
    c = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'))
  } catch (err) {
    throw invalid((err as Error).message)
  }
  if (c === null || typeof c !== 'object' || c.v !== 'meta.k8s.io/v1') throw invalid('server does not recognize this encoded version')
  // a negative rv is what the apiserver puts in the token of a 410 for an expired one: "at the latest"
  if (!Number.isInteger(c.rv) || c.rv === 0) throw invalid('incorrect encoded start resourceVersion (version meta.k8s.io/v1)')
  if (typeof c.start !== 'string' || c.start === '') throw invalid('encoded start key empty (version meta.k8s.io/v1)')
  return { rv: c.rv, start: c.start }
}

export function tooLarge(rv: number, current: number): ApiError {
  return ApiError.of(504, `Timeout: Too large resource version: ${rv}, current: ${current}`, 'Timeout', {
    causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
    retryAfterSeconds: 1,
  })
}

const inconsistentContinue =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.'

/** etcd3 store's handleCompactedErrorForPaging: 410 Expired carrying a token for the rest at the latest revision (rv -1). */
function continueExpired(start: string): ApiError {
  const status = failure(410, inconsistentContinue, 'Expired')
  ;(status.metadata as Record<string, string>).continue = encodeContinue(-1, start)
  return new ApiError(status)
}

export function parseRV(value: string): number {
  if (!/^\d+$/.test(value)) throw badRequest(`invalid resource version "${value}"`)
  return Number(value)
}

export class Cluster {
  private readonly strategies = new Map<string, ResourceStrategy>()

  constructor(
    readonly registry: ResourceRegistry,
    readonly store: Store,
  ) {}

  setStrategy(storageKey: string, strategy: ResourceStrategy): void {
    this.strategies.set(storageKey, strategy)
  }

  private key(entry: ResourceEntry, namespace: string | undefined, name: string): string {
    return keyOf(entry.namespaced ? namespace : undefined, name)
  }

  get(entry: ResourceEntry, namespace: string, name: string): any | undefined {
    const obj = this.store.get(entry.storageKey, this.key(entry, namespace, name))
    return obj && this.registry.convertFromStorage(entry, obj)
  }

  mustGet(entry: ResourceEntry, namespace: string, name: string): any {
    const obj = this.get(entry, namespace, name)
    if (!obj) throw new ApiError(notFound(entry.resource, entry.group, name))
    return obj
  }

  private namespaceEntry(): ResourceEntry {
    return this.registry.byGVR('', 'v1', 'namespaces')!
  }

  ensureNamespace(name: string): void {
    const ns = this.namespaceEntry()
    if (this.store.has(ns.storageKey, name)) return
    this.create(ns, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }, { programmatic: true })
  }

  create(entry: ResourceEntry, body: any, opts: WriteOptions & { namespace?: string } = {}): any {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body must be a JSON object')
    let obj = this.registry.convertToStorage(entry, body)
    const meta = { ...(obj.metadata ?? {}) }
    if (entry.namespaced) {
      if (opts.namespace && meta.namespace && meta.namespace !== opts.namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request')
      }
      meta.namespace = opts.namespace || meta.namespace || 'default'
    }
    obj = { ...obj, metadata: meta }
    const storage = this.registry.storageEntry(entry)
    obj = prepareCreate(storage, obj, name => this.store.has(entry.storageKey, this.key(entry, meta.namespace, name)))
    const strategy = this.strategies.get(entry.storageKey)
    if (strategy?.prepareCreate) obj = strategy.prepareCreate(storage, obj, opts.user)
    if (entry.namespaced) {
      if (opts.programmatic) this.ensureNamespace(meta.namespace)
      else if (!this.store.has(this.namespaceEntry().storageKey, meta.namespace)) {
        throw new ApiError(notFound('namespaces', '', meta.namespace))
      }
    }
    const key = this.key(entry, meta.namespace, obj.metadata.name)
    if (this.store.has(entry.storageKey, key)) {
      const details = entry.group ? { name: obj.metadata.name, group: entry.group, kind: entry.resource } : { name: obj.metadata.name, kind: entry.resource }
      throw ApiError.of(409, `${qualifiedResource(entry)} "${obj.metadata.name}" already exists`, 'AlreadyExists', details)
    }
    const stored = opts.dryRun ? obj : this.store.put(entry.storageKey, key, obj)
    return this.registry.convertFromStorage(entry, stored)
  }

  /** PUT: `body` replaces the object (or only its status, for the status subresource). */
  update(entry: ResourceEntry, body: any, opts: WriteOptions & { namespace?: string; name?: string } = {}): any {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body must be a JSON object')
    const bodyName = body.metadata?.name
    const name = opts.name ?? bodyName
    if (!name) throw badRequest('name is required')
    if (opts.name && bodyName && bodyName !== opts.name) {
      throw badRequest(`the name of the object (${bodyName}) does not match the name on the URL (${opts.name})`)
    }
    const namespace = entry.namespaced ? (opts.namespace ?? body.metadata?.namespace ?? 'default') : undefined
    if (entry.namespaced && opts.namespace && body.metadata?.namespace && body.metadata.namespace !== opts.namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request')
    }
    const key = this.key(entry, namespace, name)
    const prev = this.store.get(entry.storageKey, key)
    if (!prev) throw new ApiError(notFound(entry.resource, entry.group, name))
    const wantRV = body.metadata?.resourceVersion
    if (wantRV !== undefined && wantRV !== '' && String(wantRV) !== prev.metadata.resourceVersion) throw conflict(entry, name, modifiedMsg)
    const incoming = this.registry.convertToStorage(entry, body)
    let next: any
    if (opts.subresource === 'status') {
      next = { ...prev, status: incoming.status }
      if (incoming.status === undefined) delete next.status
    } else if (opts.subresource) {
      const updateSubresource = this.strategies.get(entry.storageKey)?.updateSubresource
      if (!updateSubresource) throw new Error(`simulator: no strategy for the ${opts.subresource} subresource of ${qualifiedResource(entry)}`)
      next = updateSubresource(entry, opts.subresource, prev, incoming)
    } else {
      next = { ...incoming }
      if (entry.status && !opts.programmatic) {
        if (prev.status === undefined) delete next.status
        else next.status = prev.status
      }
      const storage = this.registry.storageEntry(entry)
      const defaulted = { ...next, metadata: { ...prev.metadata, ...next.metadata } }
      next = { ...next, ...pickDefaults(storage, defaulted, prev) }
    }
    const meta = { ...(opts.subresource ? prev.metadata : (incoming.metadata ?? {})) }
    meta.name = prev.metadata.name
    if (entry.namespaced) meta.namespace = prev.metadata.namespace
    else delete meta.namespace
    meta.uid = prev.metadata.uid
    meta.creationTimestamp = prev.metadata.creationTimestamp
    if (prev.metadata.deletionTimestamp) meta.deletionTimestamp = prev.metadata.deletionTimestamp
    delete meta.resourceVersion
    if (entry.generation) meta.generation = (prev.metadata.generation ?? 1) + (specChanged(prev, next) ? 1 : 0)
    else delete meta.generation
    next = { ...next, metadata: meta }
    // An update that changes nothing is not a write: no new resourceVersion, no event.
    const { resourceVersion: _rv, ...prevMeta } = prev.metadata
    if (JSON.stringify(sortKeys({ ...prev, metadata: prevMeta })) === JSON.stringify(sortKeys(next)) || opts.dryRun) {
      return this.registry.convertFromStorage(
        entry,
        opts.dryRun ? { ...next, metadata: { ...next.metadata, resourceVersion: prev.metadata.resourceVersion } } : prev,
      )
    }
    return this.registry.convertFromStorage(entry, this.store.put(entry.storageKey, key, next))
  }

  patch(entry: ResourceEntry, namespace: string, name: string, type: PatchType, patchBody: any, opts: WriteOptions = {}): any {
    const current = this.get(entry, namespace, name)
    if (!current) {
      if (type === 'apply') return this.create(entry, { ...patchBody, metadata: { ...(patchBody?.metadata ?? {}), name } }, { ...opts, namespace })
      throw new ApiError(notFound(entry.resource, entry.group, name))
    }
    if (type !== 'json' && (patchBody === null || typeof patchBody !== 'object' || Array.isArray(patchBody))) {
      throw badRequest('the patch must be a JSON object')
    }
    let patched: any
    if (type === 'json') patched = jsonPatch(current, patchBody)
    else if (type === 'merge') patched = mergePatch(current, patchBody)
    else patched = strategicMergePatch(current, patchBody)
    if (patched === null || typeof patched !== 'object' || Array.isArray(patched)) throw badRequest('the patched object is not a JSON object')
    const wantRV = patched.metadata?.resourceVersion
    if (wantRV && String(wantRV) !== current.metadata.resourceVersion) throw conflict(entry, name, modifiedMsg)
    const body = { ...patched, metadata: { ...(patched.metadata ?? {}), name, resourceVersion: undefined } }
    if (entry.namespaced) body.metadata.namespace = namespace
    delete body.metadata.resourceVersion
    return this.update(entry, body, { ...opts, namespace, name })
  }

  delete(entry: ResourceEntry, namespace: string, name: string, opts: WriteOptions & { preconditions?: { uid?: string; resourceVersion?: string } } = {}): any {
    const key = this.key(entry, namespace, name)
    const prev = this.store.get(entry.storageKey, key)
    if (!prev) throw new ApiError(notFound(entry.resource, entry.group, name))
    const pre = opts.preconditions ?? {}
    if (pre.uid && pre.uid !== prev.metadata.uid) {
      throw conflict(entry, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${prev.metadata.uid}`)
    }
    if (pre.resourceVersion && pre.resourceVersion !== prev.metadata.resourceVersion) {
      throw conflict(
        entry,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${prev.metadata.resourceVersion}`,
      )
    }
    if (opts.dryRun) return this.registry.convertFromStorage(entry, prev)
    if (entry.storageKey === '/namespaces') {
      // what the namespace controller would do: everything inside goes first
      for (const e of this.registry.all()) {
        if (!e.namespaced || this.registry.storageEntry(e) !== e) continue
        for (const [k] of this.store.snapshot(e.storageKey)) if (k.startsWith(`${name}/`)) this.store.delete(e.storageKey, k)
      }
    }
    this.store.delete(entry.storageKey, key)
    return this.registry.convertFromStorage(entry, prev)
  }

  list(entry: ResourceEntry, opts: ListOptions = {}): ListResult {
    const current = this.store.currentRV()
    let atRV = current
    let start = ''
    let limit = opts.limit && opts.limit > 0 ? opts.limit : 0
    if (opts.continue) {
      if (opts.resourceVersion && opts.resourceVersion !== '0') throw badRequest('specifying resource version is not allowed when using continue')
      const token = decodeContinue(opts.continue)
      // etcd has compacted the token's revision: the apiserver offers the rest of the list at the
      // latest revision instead (inconsistent), from the same key
      if (token.rv > 0 && token.rv < this.store.compactedRV()) throw continueExpired(token.start)
      atRV = token.rv > 0 ? Math.min(token.rv, current) : current
      start = token.start
    } else if (opts.resourceVersion) {
      const rv = parseRV(opts.resourceVersion)
      // the cacher hands a legacy resourceVersion=N with a limit to etcd, which reads exactly at N
      if (opts.resourceVersionMatch === 'Exact' || (!opts.resourceVersionMatch && limit > 0 && rv !== 0)) {
        if (rv > current) throw tooLarge(rv, current)
        if (rv < this.store.compactedRV()) throw new ApiError(failure(410, 'The resourceVersion for the provided list is too old.', 'Expired'))
        atRV = rv
      } else {
        if (rv > current) throw tooLarge(rv, current)
        if (rv === 0) limit = 0 // served from the watch cache, which ignores limit
      }
    }
    const prefix = entry.namespaced && opts.namespace ? `${opts.namespace}/` : ''
    const all = this.store.snapshot(entry.storageKey, atRV).filter(([k]) => k.startsWith(prefix))
    const filtered = !!(opts.labelSelector && !isEmptySelector(opts.labelSelector)) || !!(opts.fieldSelector && !isEmptySelector(opts.fieldSelector))
    const items: any[] = []
    let i = 0
    let lastKey = ''
    if (start) while (i < all.length && all[i][0].slice(prefix.length) < start) i++
    for (; i < all.length; i++) {
      if (limit && items.length >= limit) break
      const [k, obj] = all[i]
      const served = this.registry.convertFromStorage(entry, obj)
      if (matches(entry, served, opts)) {
        items.push(served)
        lastKey = k
      }
    }
    const result: ListResult = { items, resourceVersion: String(atRV) }
    if (limit && items.length >= limit && i < all.length) {
      result.continue = encodeContinue(atRV, `${lastKey.slice(prefix.length)}\u0000`)
      if (!filtered) result.remainingItemCount = all.length - i
    }
    return result
  }

  deleteCollection(entry: ResourceEntry, opts: ListOptions): any[] {
    const { items } = this.list(entry, { namespace: opts.namespace, labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector })
    return items.map(obj => this.delete(entry, obj.metadata.namespace ?? '', obj.metadata.name))
  }
}

/** On update, keep the server-assigned defaults a client did not send (a Service's clusterIP). */
function pickDefaults(entry: ResourceEntry, next: any, prev: any): Record<string, unknown> {
  if (entry.storageKey === '/services' && next.spec && prev.spec) {
    const spec = { ...next.spec }
    for (const k of ['clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy', 'internalTrafficPolicy', 'sessionAffinity', 'type']) {
      if (spec[k] === undefined && prev.spec[k] !== undefined) spec[k] = prev.spec[k]
    }
    return { spec }
  }
  return {}
}
