// The child of the bench's compaction row (rows-disk.ts): records one list of many ConfigMaps, then
// changes them one event at a time until the journal is compacted; the moment the compaction starts
// writing its snapshot the disk fills up (for every file), and the writes go on failing until the
// parent kills this process with SIGKILL. It tells the parent each write it makes and each one the
// disk took (the kernel has it: acknowledged), over IPC.
import { pino } from 'pino'
import { DiskCache } from '../../lib/cache/disk.ts'
import { CacheStore } from '../../lib/cache/store.ts'
import { Recorder } from '../../lib/cache/recorder.ts'
import { classify } from '../../lib/api/requestinfo.ts'
import { FaultyIO } from '../helpers/faulty-io.ts'
import type { DiskFile } from '../../lib/cache/disk-io.ts'

export type ChildMessage =
  { wrote: { name: string; rv: number; deleted?: boolean } } | { acked: number } | { listed: number; rv: number } | { compacting: true }

const [dir, objectsArg] = process.argv.slice(2)
const objects = Number(objectsArg)
const send = (message: ChildMessage) => process.send!(message)

/** The disk fills up the moment a compaction opens its snapshot. */
class FillsDuringCompaction extends FaultyIO {
  override async open(file: string, flags: 'r' | 'a' | 'w', mode?: number): Promise<DiskFile> {
    if (flags === 'w' && file.includes('snapshot')) {
      send({ compacting: true })
      this.replan({ diskFullFrom: 1 })
    }
    return super.open(file, flags, mode)
  }
}

const log = pino({ level: 'silent' })
const disk = await DiskCache.open(dir, log, { io: new FillsDuringCompaction() })
// the parent counts as acknowledged what the disk took: each batch's puts, in the order they were written
let writes = 0
const write = disk.write.bind(disk)
disk.write = async (key, ops) => {
  await write(key, ops)
  writes += ops.filter(op => op.t !== 'meta').length
  send({ acked: writes })
}
const store = new CacheStore(disk, log)
await store.load()
const recorder = new Recorder(store, log)
const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const base = '/api/v1/namespaces/bench/configmaps'
const pad = 'x'.repeat(400)
const body = (name: string, rv: number) => ({ metadata: { name, namespace: 'bench', resourceVersion: String(rv) }, data: { pad, rv: String(rv) } })

let rv = 1_000
const names = Array.from({ length: objects }, (_, i) => `cm-${String(i).padStart(6, '0')}`)
const items = names.map(name => body(name, ++rv))
for (const [i, name] of names.entries()) send({ wrote: { name, rv: Number(items[i].metadata.resourceVersion) } })
await recorder.recordListPage(
  classify('GET', base, kubelet),
  'json',
  Buffer.from(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items })),
)
send({ listed: objects, rv })

const watch = classify('GET', `${base}?watch=true&resourceVersion=${rv}`, kubelet)
const recording = recorder.watch(watch, 'json')
for (let i = 0; ; i++) {
  const name = names[(i * 7919) % names.length]
  const deleted = i % 50 === 49
  const event = { type: deleted ? 'DELETED' : 'MODIFIED', object: { kind: 'ConfigMap', apiVersion: 'v1', ...body(name, ++rv) } }
  send({ wrote: { name, rv, deleted } })
  await recording.record(Buffer.from(JSON.stringify(event) + '\n'))
  if (deleted) {
    // made again at once, so the list keeps its size
    send({ wrote: { name, rv: ++rv } })
    await recording.record(Buffer.from(JSON.stringify({ type: 'ADDED', object: { kind: 'ConfigMap', apiVersion: 'v1', ...body(name, rv) } }) + '\n'))
  }
}
