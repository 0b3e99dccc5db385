// Clients that do not read (issue 31): a list or watch the client takes nothing of is ended after
// --stall-timeout, as the apiserver ends a slow watcher, and the hub writes an initial state or a
// list as the client takes it instead of holding a copy per client. A client that reads gets all.
import t from 'tap'
import net from 'node:net'
import { startHarness, eventually } from './helpers/hub.ts'

const objectCount = 1_500
// about 12 MB of slices: more than loopback's socket buffers hold, so a client that does not read leaves most of it in the hub
const padding = 'x'.repeat(8 * 1024)
const flanneld = 'flanneld/v0.26.7 (linux/amd64) kubernetes/$Format'
const stallTimeoutMs = 1_000

const slice = (i: number, generation = 0) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: `slice-${i}`, namespace: 'default', annotations: { padding, generation: String(generation) } },
  addressType: 'IPv4',
  endpoints: [],
})

const h = await startHarness({ config: { stallTimeoutMs, maxWatchBacklogBytes: 1024 * 1024 } })
t.teardown(() => h.close())
for (let i = 0; i < objectCount; i++) h.simulator.create(slice(i))
const port = new URL(h.url).port

/** A GET on a raw socket whose answer is not read until resume(), which reads it to the end. */
function unreadRequest(path: string, userAgent = flanneld): { resume(): Promise<Buffer> } {
  const socket = net.connect(Number(port), '127.0.0.1')
  socket.write(`GET ${path} HTTP/1.1\r\nHost: outpost\r\nUser-Agent: ${userAgent}\r\nConnection: close\r\n\r\n`)
  socket.pause()
  return {
    resume() {
      const chunks: Buffer[] = []
      return new Promise(resolve => {
        socket.on('data', chunk => chunks.push(chunk))
        socket.on('close', () => resolve(Buffer.concat(chunks)))
        socket.resume()
      })
    },
  }
}

async function openWatches(source = 'cache'): Promise<number> {
  const text = await (await fetch(`${h.hub.adminUrl}/metrics`)).text()
  const line = new RegExp(`^outpost_open_watches\\{component="flanneld",source="${source}"\\} (\\d+)`, 'gm')
  return [...text.matchAll(line)].reduce((sum, m) => sum + Number(m[1]), 0)
}

async function slowClientsEnded(response: string, why: string): Promise<number> {
  const text = await (await fetch(`${h.hub.adminUrl}/metrics`)).text()
  return Number(new RegExp(`^outpost_slow_clients_ended_total\\{response="${response}",why="${why}"\\} (\\d+)`, 'm').exec(text)?.[1])
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))
const slices = '/apis/discovery.k8s.io/v1/endpointslices'
const listPath = `${slices}?resourceVersion=0`

// the shared watch cache of slices has them all before the clients come
await eventually(
  async () => {
    const res = await fetch(`${h.url}${listPath}`, { headers: { 'user-agent': flanneld } })
    const list = (await res.json()) as { items?: unknown[] }
    return res.status === 200 && list.items?.length === objectCount
  },
  30_000,
  'all slices listed',
)

t.test('a list its client does not read is cut off after --stall-timeout; one that reads gets it whole', async t => {
  const unread = unreadRequest(listPath)
  await sleep(stallTimeoutMs * 3)
  const got = await unread.resume()
  const head = got.subarray(0, got.indexOf('\r\n\r\n')).toString()
  const length = Number(/content-length: (\d+)/i.exec(head)?.[1])
  const body = got.length - head.length - 4
  t.match(head, /^HTTP\/1.1 200/, 'the list was answered')
  t.ok(length > 10 * 1024 * 1024, `a list of ${length} bytes`)
  t.ok(body < length, `cut off after ${body} of ${length} bytes: a truncated body, never taken as whole`)
  t.equal(await slowClientsEnded('list', 'stalled'), 1, 'counted in outpost_slow_clients_ended_total')

  const res = await fetch(`${h.url}${listPath}`, { headers: { 'user-agent': flanneld } })
  const list = (await res.json()) as { items: unknown[] }
  t.equal(list.items.length, objectCount, 'a client that reads gets every item')
})

t.test('a watch whose client does not read its initial state is ended after --stall-timeout', async t => {
  const unread = unreadRequest(`${slices}?watch=true&resourceVersion=0`)
  await eventually(async () => (await openWatches()) === 1, 10_000, 'the watch open')
  await eventually(async () => (await openWatches()) === 0, 10_000, 'the watch ended by the hub while its client still does not read')
  const events = (await unread.resume())
    .toString()
    .split('\n')
    .filter(line => line.startsWith('{"type":"ADDED"')).length
  t.ok(events < objectCount, `the client got ${events} of ${objectCount} initial events before the hub ended it`)
  t.equal(await slowClientsEnded('watch', 'stalled'), 1, 'counted in outpost_slow_clients_ended_total')

  // a reading client gets all of them: the state is written as it takes it, not cut short
  const res = await fetch(`${h.url}${slices}?watch=true&resourceVersion=0&timeoutSeconds=3`, { headers: { 'user-agent': flanneld } })
  const text = await res.text()
  t.equal(text.split('\n').filter(line => line.startsWith('{"type":"ADDED"')).length, objectCount, 'a reading client gets every initial event')
})

t.test('a watch that stops reading its events is ended once it falls behind', async t => {
  const unread = unreadRequest(`${slices}?watch=true`)
  await eventually(async () => (await openWatches()) === 1, 10_000, 'the watch open')
  for (let i = 0; i < objectCount; i++) h.simulator.update(slice(i, 1))
  await eventually(async () => (await openWatches()) === 0, 15_000, 'the watch ended by the hub')
  await unread.resume()
  t.pass('the hub ended the watch of a client that fell behind')
  t.ok((await slowClientsEnded('watch', 'backlog')) + (await slowClientsEnded('watch', 'stalled')) >= 2, 'counted, past its backlog or stalled')
})

t.test('a relayed watch whose client stops reading is ended after --stall-timeout', async t => {
  const configMap = (i: number, generation: number) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `config-${i}`, namespace: 'default' },
    data: { padding, generation: String(generation) },
  })
  for (let i = 0; i < 100; i++) h.simulator.create(configMap(i, 0))
  const unread = unreadRequest('/api/v1/namespaces/default/configmaps?watch=true')
  await eventually(async () => (await openWatches('cloud')) === 1, 10_000, 'the relayed watch open')
  for (let round = 1; round <= 15; round++) for (let i = 0; i < 100; i++) h.simulator.update(configMap(i, round))
  await eventually(async () => (await openWatches('cloud')) === 0, 15_000, 'the relayed watch ended by the hub')
  await unread.resume()
  t.pass('the hub ended the relayed watch of a client that stopped reading')
  t.ok((await slowClientsEnded('watch', 'backlog')) + (await slowClientsEnded('watch', 'stalled')) >= 3, 'counted')
})

t.test('a relayed list (a client the hub neither caches nor filters for) whose client stops reading is cut off after --stall-timeout', async t => {
  for (let i = 0; i < objectCount; i++) {
    h.simulator.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `secret-${i}`, namespace: 'default' }, stringData: { padding } })
  }
  const before = await slowClientsEnded('list', 'stalled')
  const unread = unreadRequest('/api/v1/namespaces/default/secrets', 'python-requests/2.31.0')
  await eventually(async () => (await slowClientsEnded('list', 'stalled')) === before + 1, 15_000, 'the relayed list cut off')
  const got = await unread.resume()
  const head = got.subarray(0, got.indexOf('\r\n\r\n')).toString()
  t.match(head, /^HTTP\/1.1 200/, 'the apiserver’s answer was relayed')
  const length = /content-length: (\d+)/i.exec(head)?.[1]
  const whole = length ? got.length - head.length - 4 === Number(length) : got.subarray(-5).toString() === '0\r\n\r\n'
  t.notOk(whole, `and cut short (${length ? `${got.length - head.length - 4} of ${length} bytes` : 'no end of the chunked body'})`)
})
