// The hub as it runs on a node, in its own process: killed with SIGKILL in the middle of a burst
// of cache writes, started again while the cloud is unreachable, it serves the node from disk.
import t from 'tap'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { pino } from 'pino'
import { startDemoCluster } from './simulator/demo.ts'
import { DiskCache } from '../lib/cache/disk.ts'
import { eventually } from './helpers/hub.ts'
import { readWatch } from './helpers/watch.ts'
import { startHubProcess } from './helpers/hub-process.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89' }
const kubeProxy = { 'user-agent': 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc' }

async function json(url: string): Promise<{ status: number; body: any }> {
  const res = await request(url, { headers: kubelet })
  return { status: res.statusCode, body: JSON.parse(await res.body.text()) }
}

t.test('SIGKILL mid-burst, restart offline: every file parses, nothing acknowledged is lost, the node is served from disk', async t => {
  const simulator = await startDemoCluster()
  t.teardown(() => simulator.close())
  const cacheDir = tempDir(t, 'outpost-restart-')
  const first = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => first.kill())

  // What kubelet reads on start: its Node, its pods, the configmaps and secrets they mount, its Lease.
  t.equal((await json(`${first.url}/api/v1/nodes/kind-worker2`)).status, 200)
  t.equal((await json(`${first.url}/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2`)).body.items.length, 2)
  await json(`${first.url}/api/v1/namespaces/default/configmaps`)
  await json(`${first.url}/api/v1/namespaces/default/secrets`)
  await json(`${first.url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kind-worker2`)
  // kube-proxy's slices; the hub's own Node and Service watches have filled the topology context by now
  const proxyList = await request(`${first.url}/apis/discovery.k8s.io/v1/endpointslices`, { headers: kubeProxy })
  t.equal(proxyList.statusCode, 200)
  await proxyList.body.dump()

  // A burst: the cloud writes configmaps as fast as it can; kubelet's watch sees them through the hub.
  const rv = simulator.currentResourceVersion()
  const watch = await request(`${first.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}`, { headers: kubelet })
  const acknowledged = new Map<string, number>()
  let buffered = ''
  const reading = (async () => {
    try {
      for await (const chunk of watch.body) {
        buffered += chunk.toString()
        const lines = buffered.split('\n')
        buffered = lines.pop() ?? ''
        for (const line of lines) {
          const event = JSON.parse(line)
          acknowledged.set(event.object.metadata.name, Number(event.object.metadata.resourceVersion))
        }
      }
    } catch {
      // the hub was killed
    }
  })()
  let writing = true
  const writer = (async () => {
    for (let i = 0; writing && i < 20_000; i++) {
      simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `burst-${i}`, namespace: 'default' }, data: { i: String(i) } })
      if (i % 50 === 0) await new Promise(resolve => setImmediate(resolve))
    }
  })()
  await eventually(() => acknowledged.size >= 300, 30_000, 'a few hundred events to reach the client')
  first.child.kill('SIGKILL')
  await once(first.child, 'exit')
  writing = false
  await writer
  await reading
  t.ok(acknowledged.size >= 300, `${acknowledged.size} events acknowledged to the client before the kill`)

  const disk = await DiskCache.open(cacheDir, pino({ level: 'silent' }))
  t.teardown(() => disk.close())
  const onDisk = new Map<string, number>()
  const report = await disk.load(({ key, object }) => {
    if (key.component === 'kubelet' && key.resource === 'configmaps') onDisk.set(object.name, Number(object.resourceVersion))
  })
  t.equal(report.failed.length, 0, 'every cache file parses')
  await disk.close()
  const lost = [...acknowledged].filter(([name, version]) => !(onDisk.get(name)! >= version))
  t.same(lost, [], 'every object acknowledged to the client is on disk, at least at the version the client saw')

  // Start again with the cloud unreachable.
  await simulator.setFault('refuse')
  const second = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => second.kill())
  const node = await json(`${second.url}/api/v1/nodes/kind-worker2`)
  t.equal(node.status, 200, 'its Node, from disk')
  t.equal(node.body.metadata.labels['apps.openyurt.io/nodepool'], 'shanghai')
  const pods = await json(`${second.url}/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2`)
  t.same(pods.body.items.map((p: any) => p.metadata.name).sort(), ['nginx-shanghai-9jvjb', 'united-deployment1-shanghai-hr6xt'], 'its pods')
  const configMaps = await json(`${second.url}/api/v1/namespaces/default/configmaps`)
  const names = new Set(configMaps.body.items.map((c: any) => c.metadata.name))
  t.ok(names.has('app-config'), 'configmaps')
  t.same(
    [...acknowledged.keys()].filter(n => !names.has(n)),
    [],
    'every acknowledged burst object is served after the restart',
  )
  const secret = await json(`${second.url}/api/v1/namespaces/default/secrets/app-secret`)
  t.equal(secret.status, 200, 'secrets')
  const lease = await json(`${second.url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kind-worker2`)
  t.equal(lease.status, 200, 'its Lease')

  // service topology from disk: this node, its pool and the Services' annotations were cached too
  const slices = (await (await request(`${second.url}/apis/discovery.k8s.io/v1/endpointslices`, { headers: kubeProxy })).body.json()) as any
  const ud1 = slices.items.find((s: any) => s.metadata.name === 'svc-ud1-abcde')
  t.same(ud1.endpoints.flatMap((e: any) => e.addresses).sort(), ['10.244.1.3', '10.244.3.2'], 'kube-proxy still sees only its pool, offline after a restart')
})

t.test('SIGTERM with open watches exits 0, ends the watches, and leaves a loadable cache', async t => {
  const simulator = await startDemoCluster({ bookmarkIntervalMs: 100 })
  t.teardown(() => simulator.close())
  const cacheDir = tempDir(t, 'outpost-sigterm-')
  const hub = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => hub.kill())
  await (await request(`${hub.url}/api/v1/namespaces/default/configmaps`, { headers: kubelet })).body.dump()
  const rv = simulator.currentResourceVersion()
  const watches = await Promise.all(
    [0, 1, 2].map(() =>
      request(`${hub.url}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`, { headers: kubelet }),
    ),
  )
  t.same(
    watches.map(w => w.statusCode),
    [200, 200, 200],
  )
  const readers = watches.map(w => readWatch(w.body))
  await eventually(() => readers.every(r => r.bookmarks() >= 3 || !r.isOpen()), 30_000, "three of the apiserver's BOOKMARKs on every watch")
  t.same(
    readers.map(r => r.isOpen()),
    [true, true, true],
    `every watch is open after ${Math.min(...readers.map(r => r.bookmarks()))}+ BOOKMARK periods`,
  )
  const exited = once(hub.child, 'exit')
  hub.child.kill('SIGTERM')
  const [code] = await exited
  t.equal(code, 0, 'exit code 0')
  const ends = await Promise.race([Promise.all(readers.map(r => r.ended)), sleep(20_000, undefined, { ref: false })])
  t.ok(ends, 'every watch open until the SIGTERM was ended by the shutdown')
  t.same(
    ends?.map(e => (e.error ? String(e.error) : 'clean')),
    ['clean', 'clean', 'clean'],
    'ended cleanly after the last whole event',
  )
  const disk = await DiskCache.open(cacheDir, pino({ level: 'silent' }))
  t.teardown(() => disk.close())
  const report = await disk.load(() => {})
  t.equal(report.failed.length, 0, 'the cache loads')
  t.ok(report.loaded > 0, 'and holds what was recorded')
})
