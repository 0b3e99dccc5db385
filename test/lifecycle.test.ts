// One stack of closers for a start that fails half way and for close(): whatever the hub had
// started when a port refused it is stopped, so the node can start it again at once.
import t from 'tap'
import type { Test } from 'tap'
import net from 'node:net'
import { once } from 'node:events'
import path from 'node:path'
import { Lifecycle } from '../lib/wiring/lifecycle.ts'
import { startHub } from '../lib/hub.ts'
import { DiskCache } from '../lib/cache/disk.ts'
import { ApiServerSimulator } from './simulator/index.ts'
import { capturingLogger, eventually, freePort, hubConfig, quietLogger } from './helpers/hub.ts'
import { startDemoCluster } from './simulator/demo.ts'
import { request } from 'undici'
import { tempDir } from './helpers/temp-dirs.ts'

t.test('closers run last registered first, once, and one that fails does not keep the rest from running', async t => {
  const { logger, text } = capturingLogger()
  const lifecycle = new Lifecycle(logger)
  const ran: string[] = []
  lifecycle.defer('cache', () => ran.push('cache'))
  lifecycle.defer('upstream', async () => {
    await new Promise(resolve => setTimeout(resolve, 5))
    ran.push('upstream')
  })
  lifecycle.defer('port', () => {
    ran.push('port')
    throw new Error('EBADF')
  })
  lifecycle.defer('watches', () => ran.push('watches'))
  await Promise.all([lifecycle.unwind(), lifecycle.unwind()])
  await lifecycle.unwind()
  t.same(ran, ['watches', 'port', 'upstream', 'cache'], 'reverse order, each once, though unwound three times')
  t.match(text(), /"part":"port".*"err":"EBADF"/, 'the failure is logged with the part that failed')
})

async function listeningPort(t: Test): Promise<number> {
  const holder = net.createServer()
  holder.listen(0, '127.0.0.1')
  await once(holder, 'listening')
  t.teardown(() => new Promise(resolve => holder.close(resolve)))
  return (holder.address() as net.AddressInfo).port
}

t.test('a port in use stops the start: the hub lets go of its cache dir and proxy port, and asks the apiserver nothing more', async t => {
  const simulator = await ApiServerSimulator.start()
  t.teardown(() => simulator.close())
  const taken = await listeningPort(t)
  const cacheDir = path.join(tempDir(t, 'outpost-lifecycle-'), 'cache')
  const config = hubConfig([simulator.url], { cacheDir, port: await freePort(), adminPort: taken })
  await t.rejects(startHub(config, { logger: quietLogger() }), /--admin-port/, 'the start fails naming the flag')

  const disk = await DiskCache.open(cacheDir, quietLogger())
  await disk.close()
  t.pass('the cache dir is no longer locked: another start can open it')
  const proxyPort = net.createServer().listen(config.port, '127.0.0.1')
  await once(proxyPort, 'listening')
  await new Promise(resolve => proxyPort.close(resolve))
  t.pass('the proxy port it had listened on is free again')
  const asked = simulator.requests.length
  t.ok(asked > 0, 'it had probed the apiserver and started reading the topology')
  await new Promise(resolve => setTimeout(resolve, 10 * config.healthIntervalMs))
  t.equal(simulator.requests.length, asked, 'no probe and no watch after the failed start: the health checks and the topology stopped')

  const hub = await startHub({ ...config, adminPort: 0 }, { logger: quietLogger() })
  t.teardown(() => hub.close())
  t.match(hub.adminUrl, /^http:/, 'started again on the same cache dir, with a free admin port')
})

t.test('close() with the shared caches and the topology watching: no failure logged, and nothing asked of the apiserver after', async t => {
  const { logger, text } = capturingLogger()
  const simulator = await startDemoCluster()
  t.teardown(() => simulator.close())
  const hub = await startHub(hubConfig([simulator.url], { cacheDir: path.join(tempDir(t, 'outpost-lifecycle-'), 'cache') }), { logger })
  t.teardown(() => hub.close()) // once: a second close() is the first's
  const h = { simulator, hub, url: hub.proxyUrl }
  const kubeProxy = { 'user-agent': 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/2cc6ddc' }
  const res = await request(`${h.url}/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0`, { headers: kubeProxy })
  t.equal(res.statusCode, 200)
  await res.body.dump()
  await eventually(() => h.simulator.requests.some(r => r.watch && r.path.includes('endpointslices')), 20_000, 'the shared cache to watch')
  const logged = text().length
  await h.hub.close()
  const asked = h.simulator.requests.length
  const after = text()
    .slice(logged)
    .split('\n')
    .filter(Boolean)
    .map(line => JSON.parse(line) as { level: number; msg: string })
  t.same(
    after.filter(line => line.level >= 40).map(line => line.msg),
    [],
    'no warning or error while stopping: the reflectors stopped before their watches were ended',
  )
  await new Promise(resolve => setTimeout(resolve, 1_500))
  t.equal(h.simulator.requests.length, asked, 'no list or watch after close()')
})
