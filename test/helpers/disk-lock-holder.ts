// Child process for test/cache-lock.test.ts: opens a DiskCache on argv[2], writes an object, says
// `ready <pid>` and holds the dir until killed; or, when another process holds it, says
// `locked <holder pid>` and exits 3. Usage: node --import tsx disk-lock-holder.ts <cacheDir>
import { pino } from 'pino'
import { CacheDirLockedError, DiskCache } from '../../lib/cache/disk.ts'

const cacheDir = process.argv[2]
if (!cacheDir) throw new Error('usage: disk-lock-holder.ts <cacheDir>')
let disk: DiskCache
try {
  disk = await DiskCache.open(cacheDir, pino({ level: 'silent' }))
} catch (error) {
  if (!(error instanceof CacheDirLockedError)) throw error
  process.stdout.write(`locked ${error.pid}\n`)
  process.exit(3)
}
await disk.load(() => {})
const name = `from-${process.pid}`
const body = Buffer.from(JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: '1' } }))
await disk.put(
  { component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' },
  { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name, resourceVersion: '1', format: 'json', body },
)
await disk.flush()
process.stdout.write(`ready ${process.pid}\n`)
setInterval(() => {}, 60_000)
