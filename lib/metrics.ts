// Prometheus metrics (prom-client), one registry per hub so tests can run several hubs at once.
import { Counter, Gauge, Registry } from 'prom-client'

export interface Metrics {
  registry: Registry
  cacheLoadErrors: Counter
  cacheLoadedObjects: Gauge
  servedFromCache: Counter<'component' | 'verb' | 'resource'>
  cloudOnline: Gauge
  filteredObjects: Counter
  droppedEndpoints: Counter
  refilterEvents: Counter
}

export function createMetrics(): Metrics {
  const registry = new Registry()
  return {
    registry,
    cacheLoadErrors: new Counter({
      name: 'outpost_cache_load_errors_total',
      help: 'Cache files that could not be read at start (reported and skipped)',
      registers: [registry],
    }),
    cacheLoadedObjects: new Gauge({ name: 'outpost_cache_loaded_objects', help: 'Objects loaded from disk at start', registers: [registry] }),
    servedFromCache: new Counter({
      name: 'outpost_served_from_cache_total',
      help: 'Requests answered from the cache while the cloud was unreachable',
      labelNames: ['component', 'verb', 'resource'],
      registers: [registry],
    }),
    cloudOnline: new Gauge({ name: 'outpost_cloud_online', help: '1 while at least one apiserver is reachable', registers: [registry] }),
    filteredObjects: new Counter({ name: 'outpost_filter_changed_objects_total', help: 'Objects the service topology filter changed', registers: [registry] }),
    droppedEndpoints: new Counter({ name: 'outpost_filter_dropped_endpoints_total', help: 'Endpoints (or Endpoints addresses) the service topology filter dropped', registers: [registry] }),
    refilterEvents: new Counter({ name: 'outpost_refilter_events_total', help: 'MODIFIED events sent to open watches because the topology changed', registers: [registry] }),
  }
}
