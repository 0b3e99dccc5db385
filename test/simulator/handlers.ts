// HTTP handling of resource requests (get, list, watch, create, update, patch, delete,
// deletecollection, and the status subresource), on top of Cluster.

import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { gzipSync } from 'node:zlib'
import { parse as parseYaml } from 'yaml'
import type { RequestInfo } from '../../lib/api/requestinfo.ts'
import { pathSegmentNameProblems } from '../../lib/api/paths.ts'
import { failure, type Status } from '../../lib/api/status.ts'
import { parseFieldSelector, parseLabelSelector, type FieldSelector, type LabelSelector } from '../../lib/api/selectors.ts'
import { fieldSelectorProblem } from '../../lib/api/field-selectors.ts'
import type { Identity } from './auth.ts'
import type { Cluster, PatchType } from './cluster.ts'
import type { ResourceEntry } from './resources.ts'
import { ApiError, badRequest, noSuchResource } from './errors.ts'
import { listQuery } from './listoptions.ts'
import { decodeCsrApprovalBody, decodeProtobufBody, sendOutput, sendProtobufStatus } from './protobuf.ts'
import { negotiate, notAcceptableMessage, renderList, renderObject, type Output } from './render.ts'
import { WatchStream } from './watch.ts'

/** The apiserver gzips response bodies of at least this size when the client accepts gzip. */
export const gzipThreshold = 128 * 1024
const maxBody = 3 * 1024 * 1024

export function baseHeaders(): Record<string, string> {
  return { 'Audit-Id': randomUUID(), 'Cache-Control': 'no-cache, private' }
}

export function acceptsGzip(req: IncomingMessage): boolean {
  const ae = req.headers['accept-encoding']
  if (!ae) return false
  return String(ae)
    .split(',')
    .some(part => {
      const [coding, ...params] = part.split(';').map(s => s.trim().toLowerCase())
      return coding === 'gzip' && !params.some(p => /^q=0(\.0*)?$/.test(p))
    })
}

export function sendJSON(req: IncomingMessage, res: ServerResponse, code: number, body: unknown): void {
  sendBytes(req, res, code, 'application/json', Buffer.from(JSON.stringify(body)))
}

/** Writes a whole body as SerializeObject does: gzip above 128 KiB when the client accepts it. */
export function sendBytes(req: IncomingMessage, res: ServerResponse, code: number, contentType: string, body: Buffer): void {
  if (res.headersSent || res.destroyed) return
  let data = body
  const headers: Record<string, string> = { ...baseHeaders(), 'Content-Type': contentType }
  if (data.length > gzipThreshold && acceptsGzip(req)) {
    data = gzipSync(data)
    headers['Content-Encoding'] = 'gzip'
    headers['Vary'] = 'Accept-Encoding'
  } else {
    headers['Content-Length'] = String(data.length)
  }
  res.writeHead(code, headers)
  res.end(req.method === 'HEAD' ? undefined : data)
}

export function sendStatus(req: IncomingMessage, res: ServerResponse, status: Status): void {
  if (!sendProtobufStatus(req, res, status)) sendJSON(req, res, status.code, status)
}

export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > maxBody) {
        reject(ApiError.of(413, 'Request entity too large: limit is 3145728', 'RequestEntityTooLarge'))
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
    req.on('aborted', () => reject(new Error('client went away')))
  })
}

function parseJSON(buf: Buffer): any {
  try {
    return JSON.parse(buf.toString('utf8'))
  } catch (err) {
    throw badRequest(`the body of the request could not be decoded as JSON: ${(err as Error).message}`)
  }
}

/** A create/update body: JSON (or YAML), or protobuf for the kinds the typed codec knows (else 415). */
function parseBody(req: IncomingMessage, buf: Buffer, entry: ResourceEntry): any {
  const type = String(req.headers['content-type'] ?? '')
    .split(';')[0]
    .trim()
    .toLowerCase()
  if (type === 'application/vnd.kubernetes.protobuf') {
    if (entry.storageKey === 'certificates.k8s.io/certificatesigningrequests' && /\/approval(\?|$)/.test(req.url ?? ''))
      return decodeCsrApprovalBody(entry, buf)
    return decodeProtobufBody(entry, buf)
  }
  if (type === 'application/yaml') {
    try {
      return parseYaml(buf.toString('utf8'))
    } catch (err) {
      throw badRequest(`error decoding YAML: ${(err as Error).message}`)
    }
  }
  if (type !== '' && type !== 'application/json' && type !== '*/*') {
    throw ApiError.of(
      415,
      `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml`,
      'UnsupportedMediaType',
    )
  }
  return parseJSON(buf)
}

const patchTypes: Record<string, PatchType> = {
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
  'application/json-patch+json': 'json',
  'application/apply-patch+yaml': 'apply',
}

/**
 * The selectors of a list, watch or deletecollection. Like the apiserver's handlers, a field label the
 * resource does not support is a 400 BadRequest with the conversion function's message
 * (lib/api/field-selectors.ts), and pods' legacy spec.host is read as spec.nodeName.
 */
function selectors(info: RequestInfo, entry: ResourceEntry): { labelSelector?: LabelSelector; fieldSelector?: FieldSelector } {
  let labelSelector: LabelSelector | undefined
  let fieldSelector: FieldSelector | undefined
  try {
    labelSelector = info.labelSelector ? parseLabelSelector(info.labelSelector) : undefined
    fieldSelector = info.fieldSelector ? parseFieldSelector(info.fieldSelector) : undefined
  } catch (err) {
    throw badRequest((err as Error).message)
  }
  if (fieldSelector) {
    const custom = entry.custom ? { namespaced: entry.namespaced } : undefined
    const problem = fieldSelectorProblem(entry.group, entry.resource, fieldSelector, custom)
    if (problem !== undefined) throw badRequest(problem)
    if (entry.group === '' && entry.resource === 'pods') {
      const requirements = fieldSelector.requirements.map(r => (r.field === 'spec.host' ? { ...r, field: 'spec.nodeName' } : r))
      fieldSelector = { requirements }
    }
  }
  return { labelSelector, fieldSelector }
}

function nonNegativeInt(value: string | null, name: string): number | undefined {
  if (value === null || value === '') return undefined
  if (!/^\d+$/.test(value)) throw badRequest(`${name}: Invalid value: "${value}": must be a non-negative integer`)
  return Number(value)
}

export interface HandlerContext {
  cluster: Cluster
  user: Identity
  bookmarkIntervalMs: number
  /** serve sendInitialEvents (kube-apiserver >= 1.27 with the WatchList gate), else v1.24's rules */
  watchList: boolean
  watches: Set<WatchStream>
}

export async function handleResource(ctx: HandlerContext, req: IncomingMessage, res: ServerResponse, info: RequestInfo): Promise<void> {
  const { cluster } = ctx
  const entry = cluster.registry.byGVR(info.apiGroup, info.apiVersion, info.resource)
  if (!entry) throw noSuchResource()
  const isNamespaceObject = entry.storageKey === '/namespaces'
  const namespace = entry.namespaced ? info.namespace : ''
  if (!entry.namespaced && info.namespace && !isNamespaceObject) throw noSuchResource()
  // a name from the path needs its namespace; one from `fieldSelector=metadata.name=` (a list or watch) selects across all
  if (entry.namespaced && !info.namespace && info.name && info.verb !== 'list' && info.verb !== 'watch') throw noSuchResource()
  const name = info.name
  const sub = info.subresource
  if (sub && !((sub === 'status' && entry.status) || entry.writableSubresources.includes(sub))) {
    if (entry.connect.includes(sub)) throw badRequest('Upgrade request required')
    throw noSuchResource()
  }
  // genericregistry's key functions refuse a name that cannot be the last segment of a storage key
  const nameProblems = name && ['get', 'update', 'patch', 'delete'].includes(info.verb) ? pathSegmentNameProblems(name) : []
  if (nameProblems.length > 0) throw badRequest(`Name parameter invalid: ${JSON.stringify(name)}: ${nameProblems.join(';')}`)
  const accept = req.headers.accept
  const want = (target: 'object' | 'list' | 'watch'): Output => {
    const output = negotiate(accept, target, info.query.get('includeObject'), entry)
    if (!output) throw ApiError.of(406, notAcceptableMessage, 'NotAcceptable')
    return output
  }
  const dryRun = info.query.getAll('dryRun').includes('All')
  const one = (code: number, obj: any) => {
    const output = want('object')
    sendOutput(req, res, code, renderObject(entry, obj, output), output)
  }

  switch (info.verb) {
    case 'get':
      return one(200, cluster.mustGet(entry, namespace, name))
    case 'list': {
      const q = listQuery(info, ctx.watchList)
      const output = want('list')
      const result = cluster.list(entry, {
        namespace,
        ...selectors(info, entry),
        limit: nonNegativeInt(info.query.get('limit'), 'limit'),
        continue: q.continue || undefined,
        resourceVersion: q.resourceVersion || undefined,
        resourceVersionMatch: q.resourceVersionMatch || undefined,
      })
      return sendOutput(req, res, 200, renderList(entry, result, output), output)
    }
    case 'watch': {
      const q = listQuery(info, ctx.watchList)
      const output = want('watch')
      const sel = selectors(info, entry)
      const watch = new WatchStream(
        res,
        cluster,
        {
          entry,
          namespace,
          name,
          ...sel,
          resourceVersion: q.resourceVersion,
          sendInitialEvents: q.sendInitialEvents,
          allowBookmarks: q.allowWatchBookmarks,
          bookmarkIntervalMs: ctx.bookmarkIntervalMs,
          timeoutSeconds: nonNegativeInt(info.query.get('timeoutSeconds'), 'timeoutSeconds'),
          output,
        },
        w => ctx.watches.delete(w),
      )
      ctx.watches.add(watch)
      watch.start(baseHeaders())
      return
    }
    case 'create': {
      if (name || sub) throw ApiError.of(405, `the server does not allow this method on the requested resource`, 'MethodNotAllowed', {})
      const body = parseBody(req, await readBody(req), entry)
      return one(201, cluster.create(entry, body, { namespace, dryRun, user: ctx.user }))
    }
    case 'update': {
      const body = parseBody(req, await readBody(req), entry)
      return one(200, cluster.update(entry, body, { namespace, name, subresource: sub, dryRun }))
    }
    case 'patch': {
      const contentType = String(req.headers['content-type'] ?? '')
        .split(';')[0]
        .trim()
        .toLowerCase()
      const type = patchTypes[contentType]
      if (!type) {
        throw ApiError.of(
          415,
          `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`,
          'UnsupportedMediaType',
        )
      }
      const raw = await readBody(req)
      let body: any
      if (type === 'apply') {
        try {
          body = parseYaml(raw.toString('utf8'))
        } catch (err) {
          throw badRequest(`error decoding YAML: ${(err as Error).message}`)
        }
      } else body = parseJSON(raw)
      return one(200, cluster.patch(entry, namespace, name, type, body, { subresource: sub, dryRun }))
    }
    case 'delete': {
      const raw = await readBody(req)
      let opts: any = {}
      try {
        if (raw.length > 0) opts = JSON.parse(raw.toString('utf8')) // DeleteOptions; a protobuf one is ignored
      } catch {
        opts = {}
      }
      const pre = opts?.preconditions ?? {}
      const deleteDryRun = dryRun || (Array.isArray(opts?.dryRun) && opts.dryRun.includes('All'))
      return one(200, cluster.delete(entry, namespace, name, { dryRun: deleteDryRun, preconditions: pre }))
    }
    case 'deletecollection': {
      const output = want('list')
      const items = cluster.deleteCollection(entry, { namespace, ...selectors(info, entry) })
      return sendOutput(req, res, 200, renderList(entry, { items, resourceVersion: String(cluster.store.currentRV()) }, output), output)
    }
    default:
      throw ApiError.of(405, 'the server does not allow this method on the requested resource', 'MethodNotAllowed', {})
  }
}

export function errorStatus(err: unknown): Status {
  if (err instanceof ApiError) return err.status
  return failure(500, `Internal error occurred: ${(err as Error)?.message ?? String(err)}`, 'InternalError')
}
