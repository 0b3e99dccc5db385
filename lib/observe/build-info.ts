// What every Prometheus user alerts on beside the hub's own series: prom-client's process_* and
// nodejs_* metrics (RSS against the pod's memory limit, open fds, event-loop lag, GC) and
// outpost_build_info. Process-wide, so made once per process and registered in each hub's registry
// (tests run several hubs in one process: one GC observer and one event-loop monitor serve them all).
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client'
import type { Metric } from 'prom-client'
// A JSON import, not a file read at run time: esbuild inlines it into the image's bundle, which has
// no package.json beside it; tsc copies it to dist/ (dist/package.json), and tsx reads it in place.
import pkg from '../../package.json' with { type: 'json' }

/** outpost's version, from package.json. */
export const version: string = pkg.version

let processMetrics: Metric[] | undefined

export function registerProcessMetrics(registry: Registry): void {
  if (processMetrics === undefined) {
    const own = new Registry()
    // prom-client samples the event loop's delay every 10 ms by default, a wake-up that costs an
    // idle process ~6 ms of CPU a second (0.6 % of a core); every 100 ms costs ~0.5 ms, and lag
    // worth an alert is longer than that
    collectDefaultMetrics({ register: own, eventLoopMonitoringPrecision: 100 })
    new Gauge({
      name: 'outpost_build_info',
      help: "1, labelled with outpost's version and the Node.js version running it",
      labelNames: ['version', 'node_version'],
      registers: [own],
    }).set({ version, node_version: process.version }, 1)
    processMetrics = own.getMetricsAsArray() as unknown as Metric[]
  }
  for (const metric of processMetrics) registry.registerMetric(metric)
}
