// The list cap (--max-list-bytes): a list bigger than what the hub holds to record or filter is
// relayed as it streams (the hub's memory does not grow with it), not cached, logged once and
// counted; a shared watch cache whose list is over it is given up, not listed again in a loop.
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import { createHash } from 'node:crypto'
import { gunzipSync } from 'node:zlib'
import { ApiServerSimulator } from './simulator/index.ts'
import { HugeLists } from './simulator/huge-list.ts'
import type { HugeListSpec } from './simulator/huge-list.ts'
import { startHub } from '../lib/hub.ts'
import { capturingLogger, eventually, goDark, hubConfig } from './helpers/hub.ts'

const MiB = 1024 * 1024
/**
 * 256 MiB, 32 times the cap: a gigabyte takes 10-12 s through loopback on a loaded 2-core box, too
 * long for every run (OUTPOST_HUGE_LIST_MIB=1024 runs it). What the hub's memory does meanwhile is
 * the bench's row rss.list-over-cap (the built hub in a process of its own): here, what it sends.
 */
const hugeBytes = Number(process.env.OUTPOST_HUGE_LIST_MIB ?? 256) * MiB
const cap = 8 * MiB

interface Received {
  status: number
  /** what the simulator had sent of its last answer when the first byte reached the client */
  sentAtFirstByte: number
  headers: http.IncomingHttpHeaders
  bytes: number
  sha256: string
  ms: number
}

/** A list read as it comes and hashed, never held. */
function list(url: string, userAgent: string, simulator: ApiServerSimulator): Promise<Received> {
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { 'user-agent': userAgent, accept: 'application/json' } }, res => {
      const hash = createHash('sha256')
      let bytes = 0
      let sentAtFirstByte = -1
      res.on('data', (chunk: Buffer) => {
        if (sentAtFirstByte < 0) sentAtFirstByte = simulator.hugeLists.sent.at(-1)?.bytes ?? 0
        hash.update(chunk)
        bytes += chunk.length
      })
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          sentAtFirstByte,
          headers: res.headers,
          bytes,
          sha256: hash.digest('hex'),
          ms: performance.now() - started,
        })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
  })
}

async function start(t: Test, maxListBytes: number, overrides: Parameters<typeof hubConfig>[1] = {}) {
  const simulator = await ApiServerSimulator.start()
  const captured = capturingLogger()
  const hub = await startHub(hubConfig([simulator.url], { maxListBytes, ...overrides }), { logger: captured.logger })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  return { simulator, hub, captured }
}

const warnings = (text: string, message: RegExp) =>
  text
    .split('\n')
    .filter(line => line.includes('"level":40'))
    .filter(line => message.test(line)).length

t.test('a list over the cap is relayed as it streams: whole, not cached, logged once, counted', async t => {
  const { simulator, hub, captured } = await start(t, cap)
  const configmaps: HugeListSpec = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', bytes: hugeBytes }
  simulator.hugeLists.set(configmaps)
  const path = '/api/v1/namespaces/default/configmaps'

  // kubelet's lists of ConfigMaps are recorded: without the cap the hub would read the whole body first
  const got = await list(`${hub.proxyUrl}${path}`, 'kubelet/v1.24.0 (linux/amd64) kubernetes/abc', simulator)
  const sent = simulator.hugeLists.sent.at(-1)!
  t.equal(got.status, 200)
  t.equal(got.bytes, HugeLists.length(configmaps), 'every byte of the list reached the client')
  t.equal(got.sha256, sent.sha256, 'byte for byte as the apiserver sent it')
  // held whole, the client would have had nothing before the simulator's last byte
  t.ok(got.sentAtFirstByte < hugeBytes / 4, `the client had its first bytes when ${(got.sentAtFirstByte / MiB).toFixed(1)} MiB were sent`)
  t.comment(`${(got.bytes / MiB).toFixed(0)} MiB in ${got.ms.toFixed(0)} ms`)

  // a second one, with Content-Length this time (refused before a byte is held)
  simulator.hugeLists.set({ ...configmaps, bytes: 48 * MiB, contentLength: true })
  const second = await list(`${hub.proxyUrl}${path}`, 'kubelet/v1.24.0 (linux/amd64) kubernetes/abc', simulator)
  t.equal(second.sha256, simulator.hugeLists.sent.at(-1)!.sha256, 'a list announced over the cap is relayed byte for byte too')
  t.equal(second.headers['content-length'], String(HugeLists.length({ ...configmaps, bytes: 48 * MiB })), 'with its Content-Length')

  t.equal(warnings(captured.text(), /over --max-list-bytes/), 1, 'one warning for both')
  const metrics = await (await fetch(`${hub.adminUrl}/metrics`)).text()
  t.match(metrics, /outpost_lists_over_cap_total\{reader="relay"\} 2\b/, 'each counted')

  // nothing of it was kept: offline, the hub has no list of ConfigMaps to give
  await goDark({ simulator, hub })
  const offline = await fetch(`${hub.proxyUrl}${path}`, { headers: { 'user-agent': 'kubelet/v1.24.0', accept: 'application/json' } })
  const text = await offline.text()
  t.not(offline.status, 200, `offline, not answered from a cache (${offline.status})`)
  t.notMatch(text, /huge-0/, 'no object of the list')
})

t.test('a shared watch cache whose list is over the cap gives up: no list loop, the list is relayed', async t => {
  const { simulator, hub, captured } = await start(t, 4 * MiB)
  const services: HugeListSpec = { group: '', version: 'v1', resource: 'services', kind: 'Service', bytes: 24 * MiB }
  simulator.hugeLists.set(services)
  const url = `${hub.proxyUrl}/api/v1/services`
  // as client-go does: a 429 (the watch cache not initialized) is asked again after its Retry-After
  let got: Received | undefined
  for (let attempt = 0; attempt < 10; attempt++) {
    got = await list(url, 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/abc', simulator)
    if (got.status !== 429) break
    await new Promise(resolve => setTimeout(resolve, 1_000))
  }
  t.equal(got!.status, 200, 'the client gets the list')
  t.equal(got!.sha256, simulator.hugeLists.sent.at(-1)!.sha256, "the apiserver's, byte for byte")
  // the watch cache's own lists (the topology context lists Services too, metadata only)
  const hubLists = () =>
    simulator.countRequests(
      r => r.verb === 'list' && r.path === '/api/v1/services' && r.headers['user-agent'] === 'outpost/v0.1.0' && r.headers.accept === 'application/json',
    )
  await eventually(() => warnings(captured.text(), /watch cache given up/) === 1, 10_000, 'the watch cache to give up')
  // were it to try again, the watch cache would list within its backoff (0.8-1.6 s)
  await new Promise(resolve => setTimeout(resolve, 2_500))
  t.equal(hubLists(), 1, 'the watch cache listed once, and gave up')
  t.equal(warnings(captured.text(), /watch cache given up/), 1, 'logged once')
  const metrics = await (await fetch(`${hub.adminUrl}/metrics`)).text()
  t.match(metrics, /outpost_lists_over_cap_total\{reader="watch-cache"\} 1\b/, 'counted')
  // its next list goes straight to the relay, at once
  const again = await list(url, 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/abc', simulator)
  t.equal(again.status, 200, 'the next list is relayed at once')
  t.equal(hubLists(), 1, 'still no list of its own')
})

t.test('a gzipped list under the cap that inflates past it is relayed as gzip, not cached', async t => {
  const { simulator, hub } = await start(t, 1 * MiB)
  for (let i = 0; i < 300; i++)
    simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'default' }, data: { pad: 'y'.repeat(8 * 1024) } })
  const url = `${hub.proxyUrl}/api/v1/namespaces/default/configmaps`
  const headers = { 'user-agent': 'kubelet/v1.24.0', accept: 'application/json', 'accept-encoding': 'gzip' }
  const got = await new Promise<{ encoding?: string; body: Buffer }>((resolve, reject) => {
    http
      .get(url, { headers }, res => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => resolve({ encoding: res.headers['content-encoding'], body: Buffer.concat(chunks) }))
      })
      .on('error', reject)
  })
  t.equal(got.encoding, 'gzip', "the apiserver's gzip, untouched")
  t.ok(got.body.length < MiB, `${got.body.length} bytes as received: under the cap`)
  const list = JSON.parse(gunzipSync(got.body).toString())
  t.equal(list.items.length, 300, 'the whole list, over the cap once inflated')
  const metrics = await (await fetch(`${hub.adminUrl}/metrics`)).text()
  t.match(metrics, /outpost_lists_over_cap_total\{reader="relay"\} 1\b/, 'counted')
  await goDark({ simulator, hub })
  const offline = await fetch(url, { headers: { 'user-agent': 'kubelet/v1.24.0', accept: 'application/json' } })
  t.equal(offline.status, 503, 'not cached: offline there is nothing to answer it with')
})
