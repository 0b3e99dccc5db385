// Discovery documents (/api, /apis, /api/v1, /apis/<group>/<version>, /version): clients such as
// kubectl read them before anything else, or they could not even start a request offline. They are
// the cluster's, the same for every client on the node, so whoever reads one as the node records
// it for all, in one collection of the hub's own, per representation (legacy, or aggregated
// discovery with `;as=APIGroupDiscoveryList`).
import type { RequestInfo } from '../api/requestinfo.ts'
import type { Reply } from '../api/reply.ts'
import type { CachedObject, ResourceKey } from './types.ts'
import type { CacheStore } from './store.ts'
import { everything as everythingScope } from './scope.ts'

const discoveryPath = /^\/(version|api|apis|api\/v1|apis\/[a-z0-9.-]+|apis\/[a-z0-9.-]+\/[a-z0-9]+)\/?$/

export function isDiscoveryDocument(info: RequestInfo): boolean {
  return !info.isResourceRequest && info.verb === 'get' && discoveryPath.test(info.path)
}

export const documentsKey: ResourceKey = { component: 'outpost', group: '', version: 'outpost', resource: 'discovery' }

interface MediaType {
  type: string
  params: Record<string, string>
}

function parseMediaType(value: string): MediaType {
  const [type, ...params] = value.split(';').map(p => p.trim())
  return {
    type: type.toLowerCase(),
    params: Object.fromEntries(params.map(p => p.split('=').map(s => s.trim())).filter(kv => kv.length === 2 && kv[0] !== 'q')),
  }
}

/** The file name of one representation of one document: /apis/apps/v1 as aggregated → apis.apps.v1:apigroupdiscoverylist */
function documentName(path: string, representation: string | undefined): string {
  const base = path.replace(/^\/|\/$/g, '').replaceAll('/', '.')
  return representation ? `${base}:${representation.toLowerCase()}` : base
}

export function documentFor(info: RequestInfo, contentType: string, body: Buffer): CachedObject | undefined {
  const media = parseMediaType(contentType)
  if (media.type !== 'application/json') return undefined
  return {
    // the hub's own collection, not an API resource: named as its key is (lib/api/kinds.ts apiVersionOf)
    apiVersion: documentsKey.version,
    kind: 'DiscoveryDocument',
    namespace: '',
    name: documentName(info.path, media.params.as),
    resourceVersion: '',
    format: 'json',
    body,
    fields: { contentType },
  }
}

/** The first cached representation the Accept header allows, in its order; undefined when none is cached. */
export async function documentFromCache(store: CacheStore, info: RequestInfo, accept: string | undefined): Promise<Reply | undefined> {
  for (const wanted of (accept ?? '*/*').split(',').map(parseMediaType)) {
    if (wanted.type !== 'application/json' && wanted.type !== '*/*') continue
    const document = await store.get(documentsKey, '', documentName(info.path, wanted.params.as))
    if (!document) continue
    const stored = parseMediaType(document.fields?.contentType ?? 'application/json')
    if (wanted.params.as && (stored.params.g !== wanted.params.g || stored.params.v !== wanted.params.v)) continue
    return { contentType: document.fields?.contentType ?? 'application/json', body: document.body, cached: {} }
  }
  return undefined
}

/** Short names the cached discovery documents list (a CRD's, for one), by short name. */
export async function discoveredShortNames(store: CacheStore): Promise<Record<string, { resource: string; group: string }>> {
  const out: Record<string, { resource: string; group: string }> = {}
  const selection = await store.list(documentsKey, everythingScope).catch(() => undefined)
  for (const document of selection?.items ?? []) {
    let parsed: { kind?: string; groupVersion?: string; resources?: { name?: string; shortNames?: string[] }[] }
    try {
      parsed = JSON.parse(document.body.toString())
    } catch {
      continue
    }
    if (parsed.kind !== 'APIResourceList' || typeof parsed.groupVersion !== 'string') continue
    const group = parsed.groupVersion.includes('/') ? parsed.groupVersion.split('/')[0] : ''
    for (const r of parsed.resources ?? []) {
      if (typeof r.name !== 'string' || r.name.includes('/')) continue
      for (const short of r.shortNames ?? []) out[short] ??= { resource: r.name, group }
    }
  }
  return out
}
