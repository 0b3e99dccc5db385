// Child process for the crash-safety test of lib/cache/disk.ts: writes objects through DiskCache
// without end and prints `ack <namespace>/<name> <resourceVersion>` for every put whose promise
// resolved, until its parent kills it. Usage: node --import tsx disk-burst.ts <cacheDir>
import { pino } from 'pino'
import { DiskCache } from '../../lib/cache/disk.ts'
import type { ResourceKey } from '../../lib/cache/types.ts'

const cacheDir = process.argv[2]
if (!cacheDir) throw new Error('usage: disk-burst.ts <cacheDir>')
const names = 400
const maxOutstanding = 256

const pods: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'pods' }
const nodes: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'nodes' }

const disk = await DiskCache.open(cacheDir, pino({ level: 'silent' }))
process.stdout.write('ready\n')

let rv = 0
let outstanding = 0
let wake: (() => void) | undefined
for (;;) {
  const i = rv % names
  rv++
  const clusterScoped = i % 5 === 0
  const namespace = clusterScoped ? '' : `ns-${i % 3}`
  const name = `obj-${i}`
  const version = String(rv)
  // Bodies up to ~40 KiB, so that a kill often lands inside a write.
  const padding = 'x'.repeat((i * 97) % 40_000)
  const protobuf = i % 2 === 1
  const body = protobuf
    ? Buffer.concat([Buffer.from([0x0a, 0x03]), Buffer.from('abc'), Buffer.from(padding)])
    : Buffer.from(JSON.stringify({ kind: 'Pod', apiVersion: 'v1', metadata: { name, namespace, resourceVersion: version }, padding }))
  outstanding++
  disk
    .put(clusterScoped ? nodes : pods, {
      apiVersion: 'v1',
      kind: clusterScoped ? 'Node' : 'Pod',
      namespace,
      name,
      resourceVersion: version,
      format: protobuf ? 'protobuf' : 'json',
      body,
    })
    .then(() => {
      process.stdout.write(`ack ${namespace}/${name} ${version}\n`)
    })
    .finally(() => {
      outstanding--
      wake?.()
    })
  if (outstanding >= maxOutstanding) await new Promise<void>(resolve => (wake = resolve))
}
