// The admin server (127.0.0.1 only): liveness, readiness with what is missing, Prometheus metrics,
// and read-only views of the cache, the topology context and the filters for operators with curl.
import Fastify, { LogController } from 'fastify'
import { prettyWanted } from '../api/negotiate.ts'
import type { Logger } from 'pino'
import type { Metrics } from './metrics.ts'
import type { CacheStore } from '../cache/store.ts'
import { clusterScopeDir, resourceDirName } from '../cache/types.ts'
import type { CachedObject, ResourceKey } from '../cache/types.ts'
import { storedBody } from '../cache/list-body.ts'
import { validPathComponent } from '../cache/disk.ts'
import { objectMeta } from '../codec/protobuf.ts'
import { asJson } from '../cache/translate.ts'
import { builtinShortNames, resolveResourceName } from '../api/resource-names.ts'
import { discoveredShortNames } from '../cache/documents.ts'
import { classify } from '../api/requestinfo.ts'
import type { FilterRegistry } from '../../filters/registry.ts'
import { failure, notFound } from '../api/status.ts'
import type { TopologySource } from '../topology/source.ts'
import type { HealthChecker } from '../upstream/health.ts'
import { sliceOf, topologyReport } from '../topology/report.ts'
import type { ServiceSlices } from '../topology/report.ts'
import { describeScope, parseScope } from '../cache/scope.ts'
import { numericVersion } from '../cache/versions.ts'

export interface AdminOptions {
  log: Logger
  metrics: Metrics
  store: CacheStore
  topology: TopologySource
  health: HealthChecker
  filters: FilterRegistry
  nodeName: string
  /** what else the hub waits for (the HTTPS port's certificate), '' when nothing */
  pending?: () => string
  /** what keeps the cache from its promise (offline autonomy off, writes failing); [] when nothing */
  cacheProblems?: () => string[]
  /** whether the cache is still being read from disk (each collection answers once it is) */
  loading?: () => boolean
  /** the shared watch caches, for /debug/cache */
  watchCaches?: { describe(): unknown[] }
  /** whether a component is served a resource from a shared collection (`shared-json`, `shared-protobuf`) */
  servedFromShared?(component: string, key: ResourceKey): boolean
  /** this hub's part in its node pool (undefined: --pool-sharing=off) */
  pool?: () => { describe(): unknown; note(): string | undefined } | undefined
  /** the link-local address pods reach the hub on */
  podAddress?: { describe(): unknown; note(): string | undefined }
  /** this node's pods as kubelet wrote them while the cloud was away (lib/overlay/pod-overlay.ts) */
  overlay?: { describe(): unknown }
}

const everything = parseScope({ namespace: '', labelSelector: '', fieldSelector: '' })

const lastApplied = 'kubectl.kubernetes.io/last-applied-configuration'

/** Secret values never leave the hub: their keys and sizes are enough to debug with. */
function redact(document: any): any {
  if (document?.kind !== 'Secret') return document
  const hidden = (values: Record<string, string> | undefined) =>
    values && Object.fromEntries(Object.keys(values).map(k => [k, `<redacted, ${values[k].length} bytes>`]))
  // kubectl apply keeps the whole object it applied, values included, in this annotation
  const annotations = document.metadata?.annotations
  const applied = annotations?.[lastApplied]
  const metadata =
    applied === undefined ? document.metadata : { ...document.metadata, annotations: { ...annotations, [lastApplied]: `<redacted, ${applied.length} bytes>` } }
  return { ...document, metadata, data: hidden(document.data), stringData: hidden(document.stringData) }
}

/**
 * A cached object as JSON, Secrets redacted: JSON bodies whole, protobuf ones decoded in full for the
 * kinds the hub knows field by field, else a summary of their metadata.
 */
function readable(object: CachedObject): unknown {
  const json = asJson(object)
  if (json) return redact(json)
  const meta = objectMeta(object.body)
  return {
    kind: object.kind,
    apiVersion: object.apiVersion,
    format: 'protobuf',
    bytes: object.body.length,
    metadata: { name: meta.name, namespace: meta.namespace, resourceVersion: meta.resourceVersion, labels: meta.labels },
  }
}

function apiPath(key: ResourceKey): string {
  return key.group ? `/apis/${key.group}/${key.version}/${key.resource}` : `/api/${key.version}/${key.resource}`
}

export function createAdminServer(options: AdminOptions) {
  const { store, topology, health, metrics } = options
  const admin = Fastify({ loggerInstance: options.log.child({ server: 'admin' }), logController: new LogController({ disableRequestLogging: true }) })

  // JSON for people indented, as kube-apiserver writes it: for curl, Wget and browsers, and for ?pretty=true
  admin.addHook('preSerialization', async (request, reply, payload) => {
    const pretty = (request.query as Record<string, string | undefined>).pretty
    if (prettyWanted(pretty, request.headers['user-agent'])) reply.serializer((body: unknown) => `${JSON.stringify(body, null, 2)}\n`)
    return payload
  })

  admin.get('/v1/healthz', async (_request, reply) => reply.type('text/plain').send('ok\n'))

  // Ready once the cache is loaded (it is, before the server listens) and this node is known,
  // from the cloud or from disk: until then kube-proxy would get unfiltered endpoints.
  admin.get('/v1/readyz', async (_request, reply) => {
    const missing: string[] = []
    // why the cloud is away: a misconfiguration to fix (TLS, credentials) apart from an outage to wait out
    const cloud = health.problem()
    if (!topology.known) missing.push(`topology context: node ${options.nodeName} not seen yet (nothing cached, and ${cloud ?? 'the cloud has not sent it'})`)
    const pending = options.pending?.()
    if (pending) missing.push(pending)
    missing.push(...(options.cacheProblems?.() ?? []))
    if (options.loading?.()) missing.push('cache: still being read from disk (what is read already is served)')
    reply.type('text/plain')
    // worth knowing, never a reason to be unready: the cloud serves what the pool's leader would
    const notes = [topology.known ? cloud : undefined, options.pool?.()?.note(), options.podAddress?.note(), ...options.filters.partnerless()].filter(
      n => n !== undefined,
    )
    if (missing.length === 0) return `ok\n${notes.map(n => `- ${n}\n`).join('')}`
    reply.code(503)
    return `not ready:\n${[...missing, ...notes].map(m => `- ${m}\n`).join('')}`
  })

  admin.get('/metrics', async (_request, reply) => {
    reply.type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })

  admin.get('/debug/pool', async () => options.pool?.()?.describe() ?? { enabled: false, why: 'leader hubs are off (--pool-sharing=off)' })

  admin.get('/debug/cache', async () => ({
    cloud: health.state,
    loading: options.loading?.() ?? false,
    // what would keep an offline answer from being whole: autonomy off, the disk not keeping up
    problems: options.cacheProblems?.() ?? [],
    memory: store.memory,
    // pods whose endpoints show what kubelet wrote offline (was: the cloud's addresses, now: kubelet's)
    podOverlay: options.overlay?.describe() ?? { pods: [] },
    // one upstream list+watch each, shared by every local client of that scope
    watchCaches: options.watchCaches?.describe() ?? [],
    collections: store
      .all()
      .map(c => ({
        component: c.key.component,
        resource: resourceDirName(c.key),
        objects: c.entries.size,
        bytes: c.bytes(),
        kind: c.kind || null,
        scopes: [...c.listed.values()].map(l => describeScope(l.scope)).sort(),
        listed: c.listed.size > 0,
        // refused offline until listed whole again, and why
        incomplete: [...c.incomplete.values()].map(i => ({
          scope: i.scope ? describeScope(i.scope) : 'every scope',
          why: i.why,
          since: new Date(i.since).toISOString(),
        })),
        origin: c.origin,
        lastUpdate: c.lastUpdate ? new Date(c.lastUpdate).toISOString() : null,
        resourceVersion: c.maxResourceVersion(),
      }))
      .sort((a, b) => (a.component + a.resource < b.component + b.resource ? -1 : 1)),
  }))

  // Resources by any name kubectl takes (lib/api/resource-names.ts), among what the component has cached;
  // path segments are checked against the cache's own naming rules; anything unknown is a 404 Status.
  const keyOf = async (component: string, name: string): Promise<{ key: ResourceKey; note?: string } | { error: string }> => {
    if (!validPathComponent(component) || !/^[a-z0-9][-a-z0-9.]*$/i.test(name)) return { error: `no such cache: ${component}/${name}` }
    const refsOf = (owned: (key: ResourceKey) => boolean) =>
      store
        .all()
        .filter(c => owned(c.key) && c.key.version !== 'outpost')
        .map(c => ({ ...c.key, singular: c.kind.toLowerCase() || undefined, component: c.key.component }))
    const shortNames = { ...builtinShortNames, ...(await discoveredShortNames(store)) }
    const own = resolveResourceName(
      name,
      refsOf(key => key.component === component),
      shortNames,
    )
    if (!('error' in own)) return { key: { component, group: own.ref.group, version: own.ref.version, resource: own.ref.resource }, note: own.note }
    // what a shared watch cache serves the component is kept once for all: show that
    const shared = refsOf(key => options.servedFromShared?.(component, key) ?? false)
    const resolved = resolveResourceName(name, shared, shortNames)
    if ('error' in resolved) {
      const either = resolveResourceName(name, [...refsOf(key => key.component === component), ...shared], shortNames)
      return { error: `${component}: ${'error' in either ? either.error : own.error}` }
    }
    const ref = resolved.ref as (typeof shared)[number]
    const note = `${component} is served these from the shared watch cache (${ref.component})${resolved.note ? `; ${resolved.note}` : ''}`
    return { key: { component: ref.component, group: ref.group, version: ref.version, resource: ref.resource }, note }
  }
  // filtered as the component sees it, whichever collection holds the object
  const filterFor = (key: ResourceKey, filtered: boolean, component: string) =>
    filtered ? options.filters.forRequest(classify('GET', apiPath(key), component)) : undefined
  const shown = (key: ResourceKey, object: CachedObject, filtered: boolean, component: string) => {
    const filter = filterFor(key, filtered, component)
    if (!filter) return readable(object)
    const body = storedBody(object, object.format, filter)
    return body === null
      ? {
          kind: object.kind,
          metadata: { name: object.name, namespace: object.namespace || undefined },
          dropped: `the filters ${filter.names.join(', ')} drop it: ${component} does not see it`,
        }
      : readable({ ...object, body })
  }

  admin.get<{ Params: { component: string; resource: string }; Querystring: { filtered?: string } }>(
    '/debug/cache/:component/:resource',
    async (request, reply) => {
      const found = await keyOf(request.params.component, request.params.resource)
      if ('error' in found) return reply.code(404).send(failure(404, found.error, 'NotFound'))
      const { key, note } = found
      const filtered = request.query.filtered === 'true'
      const list = await store.list(key, everything)
      const component = request.params.component
      const shared = key.component !== component ? { collection: key.component } : {}
      return {
        component,
        resource: resourceDirName(key),
        ...shared,
        ...(note ? { note } : {}),
        filtered,
        items: (list?.items ?? []).map(o => shown(key, o, filtered, component)),
      }
    },
  )

  admin.get<{ Params: { component: string; resource: string; namespace: string; name: string }; Querystring: { filtered?: string } }>(
    '/debug/cache/:component/:resource/:namespace/:name',
    async (request, reply) => {
      const { component, resource, namespace, name } = request.params
      const found = await keyOf(component, resource)
      const ns = namespace === clusterScopeDir ? '' : namespace
      if ('error' in found || !(ns === '' || validPathComponent(ns)) || !validPathComponent(name)) {
        return reply.code(404).send(failure(404, 'error' in found ? found.error : `no such object: ${component}/${resource}/${namespace}/${name}`, 'NotFound'))
      }
      const { key } = found
      const object = await store.get(key, ns, name)
      if (!object) return reply.code(404).send(notFound(key.resource, key.group, name))
      return shown(key, object, request.query.filtered === 'true', component)
    },
  )

  admin.setNotFoundHandler((request, reply) => reply.code(404).send(failure(404, `no such admin path: ${request.url}`, 'NotFound')))

  // Per annotated Service, what each key keeps of the EndpointSlices in the cache (any component's
  // copy, the newest of each slice).
  const cachedSlices = async (): Promise<ServiceSlices[]> => {
    const newest = new Map<string, CachedObject>()
    for (const c of store.all()) {
      if (c.key.group !== 'discovery.k8s.io' || c.key.resource !== 'endpointslices') continue
      for (const object of (await store.list(c.key, everything))?.items ?? []) {
        const id = `${object.namespace}/${object.name}`
        const seen = newest.get(id)
        if (!seen || numericVersion(object.resourceVersion) > numericVersion(seen.resourceVersion)) newest.set(id, object)
      }
    }
    return [...newest.values()].map(sliceOf).filter((s): s is ServiceSlices => s !== undefined)
  }

  admin.get('/debug/topology', async () => {
    const context = topology.context()
    return {
      node: context.nodeName,
      known: topology.known,
      pool: topology.nodePool || null,
      poolNodes: [...context.poolNodes].sort(),
      nodeLabels: context.nodeLabels,
      // Node and Service metadata events the hub read, and how many changed what the filter reads
      reflected: { ...topology.stats, resourceVersion: topology.resourceVersion },
      services: topologyReport(topology.annotatedServices(), await cachedSlices(), context),
    }
  })

  // every filter: on or off (and why), for whom, and what it did last
  admin.get('/debug/filters', async () => ({ filters: options.filters.describe(), podAddress: options.podAddress?.describe() }))
  return admin
}
