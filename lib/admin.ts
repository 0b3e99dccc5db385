// The admin server (127.0.0.1 only): liveness, readiness with what is missing, Prometheus metrics,
// and read-only views of the cache and the topology context for operators with curl.
import Fastify, { LogController } from 'fastify'
import type { Logger } from 'pino'
import type { Metrics } from './metrics.ts'
import type { CacheStore } from './cache/store.ts'
import { resourceDirName } from './cache/types.ts'
import type { TopologySource } from './topology.ts'
import type { HealthChecker } from './health.ts'

export interface AdminOptions {
  log: Logger
  metrics: Metrics
  store: CacheStore
  topology: TopologySource
  health: HealthChecker
  nodeName: string
}

export function createAdminServer(options: AdminOptions) {
  const { store, topology, health, metrics } = options
  const admin = Fastify({ loggerInstance: options.log.child({ server: 'admin' }), logController: new LogController({ disableRequestLogging: true }) })

  admin.get('/v1/healthz', async () => 'ok')

  // Ready once the cache is loaded (it is, before the server listens) and this node is known,
  // from the cloud or from disk: until then kube-proxy would get unfiltered endpoints.
  admin.get('/v1/readyz', async (_request, reply) => {
    const missing: string[] = []
    if (!topology.known) missing.push(`topology context: node ${options.nodeName} not seen yet (cloud ${health.state}, nothing cached)`)
    reply.type('text/plain')
    if (missing.length === 0) return 'ok'
    reply.code(503)
    return `not ready:\n${missing.map(m => `- ${m}`).join('\n')}\n`
  })

  admin.get('/metrics', async (_request, reply) => {
    reply.type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })

  admin.get('/debug/cache', async () => ({
    cloud: health.state,
    memory: store.memory,
    collections: store
      .all()
      .map(c => ({
        component: c.key.component,
        resource: resourceDirName(c.key),
        objects: c.entries.size,
        listed: c.known,
        origin: c.origin,
        lastUpdate: c.lastUpdate ? new Date(c.lastUpdate).toISOString() : null,
        resourceVersion: c.maxResourceVersion(),
      }))
      .sort((a, b) => (a.component + a.resource < b.component + b.resource ? -1 : 1)),
  }))

  admin.get('/debug/topology', async () => {
    const context = topology.context()
    return {
      node: context.nodeName,
      known: topology.known,
      pool: topology.nodePool || null,
      poolNodes: [...context.poolNodes].sort(),
      nodeLabels: context.nodeLabels,
      services: topology.annotatedServices(),
    }
  })
  return admin
}
