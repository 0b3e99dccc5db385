// The bench's apiserver simulator in a process of its own (so its CPU is neither the hub's nor the
// load generator's). It generates the cluster itself and answers commands over IPC:
//   parent → child: { id, cmd, args }     child → parent: { id, result } or { id, error }
// and sends { ready: url } once it listens. Started by test/bench/processes.ts.
import { ApiServerSimulator } from '../simulator/index.ts'
import type { Fault } from '../simulator/index.ts'
import type { HugeListSpec } from '../simulator/huge-list.ts'
import * as objects from './objects.ts'

const sim = await ApiServerSimulator.start({ bookmarkIntervalMs: 5_000 })
const clock = (): number => performance.timeOrigin + performance.now()
const yieldToIo = (): Promise<void> => new Promise(resolve => setImmediate(resolve))
let sliceCount = 0
let seq = 0

/** Creates objects made by `make`, letting the event loop serve between batches. */
async function createMany(count: number, make: (i: number) => any, batch = 200): Promise<void> {
  for (let i = 0; i < count; i++) {
    sim.create(make(i))
    if (i % batch === batch - 1) await yieldToIo()
  }
}

function ensureNamespace(name: string): void {
  if (!sim.get('v1', 'Namespace', '', name)) sim.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })
}

const commands: Record<string, (args: any) => unknown> = {
  /** Nodes in three pools, `slices` EndpointSlices (10 endpoints each) under annotated Services, `pods` pods, `configMaps` bulk ConfigMaps. */
  async seed(args: { slices: number; pods: number; configMaps: number }) {
    for (const ns of [...objects.appNamespaces, objects.benchNamespace, objects.watchNamespace, objects.bulkNamespace, objects.burstNamespace])
      ensureNamespace(ns)
    for (let i = 0; i < objects.nodeCount; i++) sim.create(objects.node(i))
    await createMany(Math.ceil(args.slices / objects.slicesPerService), objects.service)
    await createMany(args.slices, objects.endpointSlice)
    sliceCount = args.slices
    await createMany(args.pods, i => objects.pod(i))
    await createMany(args.configMaps, objects.bulkConfigMap)
    sim.create(objects.configMap(objects.smallConfigMap, objects.benchNamespace, { greeting: 'hello' }))
    sim.create(objects.configMap(objects.watchedConfigMap, objects.watchNamespace, { value: '0' }))
    return { resourceVersion: sim.currentResourceVersion() }
  },

  resourceVersion() {
    return sim.currentResourceVersion()
  },

  /** `count` modifications of existing slices, round robin, as fast as the simulator can (one event each). */
  async modifySlices(args: { count: number }) {
    const started = clock()
    for (let i = 0; i < args.count; i++) {
      const name = objects.sliceName(i % sliceCount)
      const namespace = objects.serviceNamespace(Math.floor((i % sliceCount) / objects.slicesPerService))
      const current = sim.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, name)
      sim.update({ ...current, metadata: { ...current.metadata, annotations: { ...current.metadata.annotations, [objects.seqAnnotation]: String(++seq) } } })
      if (i % 100 === 99) await yieldToIo()
    }
    return { ms: clock() - started, resourceVersion: sim.currentResourceVersion() }
  },

  /** `count` writes of the watched ConfigMap, one every `intervalMs`, each stamped with its write time. */
  async stampedWrites(args: { count: number; intervalMs: number }) {
    for (let i = 0; i < args.count; i++) {
      const current = sim.get('v1', 'ConfigMap', objects.watchNamespace, objects.watchedConfigMap)
      const annotations = { ...current.metadata.annotations, [objects.writtenAtAnnotation]: clock().toFixed(3) }
      sim.update({ ...current, metadata: { ...current.metadata, annotations }, data: { value: String(i) } })
      await new Promise(resolve => setTimeout(resolve, args.intervalMs))
    }
    return { resourceVersion: sim.currentResourceVersion() }
  },

  /** `count` new pods on `nodeName` in the burst namespace, as fast as the simulator can. */
  async podBurst(args: { count: number; nodeName: string; offset: number }) {
    const started = clock()
    await createMany(args.count, i => objects.pod(args.offset + i, objects.burstNamespace, args.nodeName), 50)
    return { ms: clock() - started, resourceVersion: sim.currentResourceVersion() }
  },

  /** Objects the load generator made (test/bench/rows-reboot.ts builds its cluster itself), in order: the uids the simulator gave them. */
  async createObjects(args: { objects: any[] }) {
    const uids: string[] = []
    for (const obj of args.objects)
      uids.push(sim.get(obj.apiVersion, obj.kind, obj.metadata.namespace ?? '', obj.metadata.name)?.metadata.uid ?? sim.create(obj).metadata.uid)
    await yieldToIo()
    return { uids, resourceVersion: sim.currentResourceVersion() }
  },

  /**
   * The EndpointSlice controller after pods restarted: each change rewrites one endpoint (found by its
   * pod's name) of one slice to `ip`, one update each, yielding to I/O every `batch`; each change's
   * time (clock(), before its update) comes back in order.
   */
  async setEndpointAddresses(args: { changes: { namespace: string; slice: string; pod: string; ip: string }[]; batch: number }) {
    const writtenAt: number[] = []
    for (const [i, c] of args.changes.entries()) {
      const current = sim.get('discovery.k8s.io/v1', 'EndpointSlice', c.namespace, c.slice)
      if (!current) throw new Error(`no EndpointSlice ${c.namespace}/${c.slice}`)
      const endpoints = current.endpoints.map((e: any) => (e.targetRef?.name === c.pod ? { ...e, addresses: [c.ip] } : e))
      if (!current.endpoints.some((e: any) => e.targetRef?.name === c.pod)) throw new Error(`no endpoint of pod ${c.pod} in ${c.namespace}/${c.slice}`)
      writtenAt.push(clock())
      sim.update({ ...current, endpoints })
      if (i % args.batch === args.batch - 1) await yieldToIo()
    }
    return { writtenAt, resourceVersion: sim.currentResourceVersion() }
  },

  /** From now on lists of `spec`'s resource answer a generated body of about spec.bytes (none: every list as before). */
  hugeList(args: { spec?: HugeListSpec }) {
    if (args.spec) sim.hugeLists.set(args.spec)
    else sim.hugeLists.clear()
    return sim.hugeLists.sent.length
  },

  /** The last huge list's answer: its bytes, and its sha256 once written whole. */
  hugeListSent() {
    return sim.hugeLists.sent.at(-1)
  },

  async fault(args: { fault: Fault }) {
    await sim.setFault(args.fault)
    return args.fault
  },

  memory() {
    return process.memoryUsage().rss
  },

  async close() {
    await sim.close()
    setImmediate(() => process.exit(0))
    return 'closed'
  },
}

process.on('message', (message: { id: number; cmd: string; args?: unknown }) => {
  const command = commands[message.cmd]
  Promise.resolve()
    .then(() => {
      if (!command) throw new Error(`simulator-process: no command ${message.cmd}`)
      return command(message.args ?? {})
    })
    .then(
      result => process.send?.({ id: message.id, result }),
      (error: Error) => process.send?.({ id: message.id, error: error.stack ?? error.message }),
    )
})
process.on('disconnect', () => process.exit(0)) // the bench went away
process.send?.({ ready: sim.url })
