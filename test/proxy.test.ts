// The forwarding path end to end: real sockets, the simulator behind the hub.
import t from 'tap'
import { request } from 'undici'
import { gunzipSync } from 'node:zlib'
import { once } from 'node:events'
import net from 'node:net'
import path from 'node:path'
import { WebSocket } from 'ws'
import { ApiServerSimulator } from './simulator/index.ts'
import { startHub } from '../lib/hub.ts'
import { startHarness, hubConfig, quietLogger, eventually } from './helpers/hub.ts'
import { createTestPki, writeKubeconfig } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const configMap = (name: string, data: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'default', labels: { app: 'proxy-test' } },
  data,
})

/** Reads a JSON watch body line by line. */
async function* watchEvents(body: AsyncIterable<Buffer>): AsyncGenerator<{ type: string; object: any }> {
  let buffered = ''
  for await (const chunk of body) {
    buffered += chunk.toString()
    let newline
    while ((newline = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, newline)
      buffered = buffered.slice(newline + 1)
      if (line.trim()) yield JSON.parse(line)
    }
  }
}

t.test('responses reach the client unchanged: status, headers, body bytes', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  for (const p of [
    '/apis/discovery.k8s.io/v1/endpointslices',
    '/api/v1/namespaces/default/services/svc-ud1',
    '/api/v1/namespaces/default/services/nope',
    '/api/v1/nodes?labelSelector=apps.openyurt.io%2Fnodepool%3Dshanghai',
    '/version',
  ]) {
    const direct = await request(h.simulator.url + p)
    const directBody = Buffer.from(await direct.body.arrayBuffer())
    const viaHub = await request(h.url + p)
    const hubBody = Buffer.from(await viaHub.body.arrayBuffer())
    t.equal(viaHub.statusCode, direct.statusCode, `${p}: status`)
    t.equal(viaHub.headers['content-type'], direct.headers['content-type'], `${p}: content-type`)
    // lists of what node components watch all day are the shared watch cache's: the same bytes
    if (!/endpointslices$|nodes\?/.test(p)) t.ok(viaHub.headers['audit-id'], `${p}: apiserver headers pass through`)
    t.same(hubBody.toString(), directBody.toString(), `${p}: body bytes`)
  }
})

t.test('a gzip list reaches the client gzip-encoded, as the apiserver sent it', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  for (let i = 0; i < 300; i++) h.simulator.create(configMap(`bulk-${i}`, { blob: 'x'.repeat(600) }))
  const res = await request(`${h.url}/api/v1/namespaces/default/configmaps`, { headers: { 'accept-encoding': 'gzip' } })
  t.equal(res.headers['content-encoding'], 'gzip')
  const list = JSON.parse(gunzipSync(Buffer.from(await res.body.arrayBuffer())).toString())
  t.equal(list.items.length, 300)
})

t.test('credentials: the hub adds its token; a client token is kept', async t => {
  const dir = tempDir(t, 'outpost-proxy-')
  const simulator = await ApiServerSimulator.start({ tokens: ['node-token', 'user-token'] })
  const kubeconfig = await writeKubeconfig(dir, { server: simulator.url, token: 'node-token', inline: false })
  const hub = await startHub(hubConfig([], { kubeconfig }), { logger: quietLogger() })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })

  const anonymous = await request(`${hub.proxyUrl}/api/v1/namespaces`)
  t.equal(anonymous.statusCode, 200, 'no Authorization: forwarded with the node token')
  await anonymous.body.dump()
  t.equal(simulator.requests.at(-1)?.headers.authorization, 'Bearer node-token')

  const user = await request(`${hub.proxyUrl}/api/v1/namespaces`, { headers: { authorization: 'Bearer user-token' } })
  t.equal(user.statusCode, 200)
  await user.body.dump()
  t.equal(simulator.requests.at(-1)?.headers.authorization, 'Bearer user-token', 'client token kept')

  const wrong = await request(`${hub.proxyUrl}/api/v1/namespaces`, { headers: { authorization: 'Bearer wrong' } })
  t.equal(wrong.statusCode, 401, 'a bad client token is not replaced by the node token')
  const status = (await wrong.body.json()) as any
  t.equal(status.kind, 'Status')
})

t.test('writes pass through with their bodies; oversized bodies are a 413 Status', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const created = await request(`${h.url}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(configMap('written', { k: 'v' })),
  })
  t.equal(created.statusCode, 201)
  await created.body.dump()
  t.same(h.simulator.get('v1', 'ConfigMap', 'default', 'written')?.data, { k: 'v' })

  const patched = await request(`${h.url}/api/v1/namespaces/default/configmaps/written`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ data: { k: 'patched' } }),
  })
  t.equal(patched.statusCode, 200)
  await patched.body.dump()
  t.same(h.simulator.get('v1', 'ConfigMap', 'default', 'written')?.data, { k: 'patched' })

  const huge = await request(`${h.url}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(configMap('huge', { blob: 'x'.repeat(4 * 1024 * 1024) })),
  })
  t.equal(huge.statusCode, 413)
  const status = (await huge.body.json()) as any
  t.equal(status.kind, 'Status')
  t.equal(status.reason, 'RequestEntityTooLarge')
  t.equal(h.simulator.get('v1', 'ConfigMap', 'default', 'huge'), undefined, 'nothing written')
})

t.test('a watch with nothing to say still gets its headers at once, then its events', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const rv = h.simulator.currentResourceVersion()
  const abort = new AbortController()
  t.teardown(() => abort.abort())
  const res = await request(`${h.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}`, {
    signal: abort.signal,
    headersTimeout: 3_000,
  })
  t.equal(res.statusCode, 200, 'headers arrived with no event sent')
  t.match(res.headers['content-type'], /application\/json/)
  const events = watchEvents(res.body)
  h.simulator.create(configMap('late'))
  const first = await events.next()
  t.equal(first.value?.type, 'ADDED')
  t.equal(first.value?.object.metadata.name, 'late')
})

t.test('an upstream that drops ends the client stream cleanly', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const rv = h.simulator.currentResourceVersion()
  const res = await request(`${h.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}`)
  const events = watchEvents(res.body)
  h.simulator.create(configMap('before-drop'))
  t.equal((await events.next()).value?.object.metadata.name, 'before-drop')
  h.simulator.dropStreams()
  const end = await events.next()
  t.equal(end.done, true, 'the stream ended without an error')
})

t.test('200 watch connect/disconnect cycles leave no upstream connection open', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const rv = h.simulator.currentResourceVersion()
  // the hub's own Node and Service watches (service topology) stay open throughout
  const ownWatches = () => h.simulator.requests.filter(r => r.url.includes('watch=true') && String(r.headers['user-agent']).startsWith('outpost/'))
  await eventually(() => ownWatches().length >= 2, 10_000, 'the hub to start its own watches')
  const baseline = h.simulator.openConnections()
  for (let i = 0; i < 200; i++) {
    const abort = new AbortController()
    const res = await request(`${h.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}`, {
      signal: abort.signal,
    })
    t.equal(res.statusCode, 200, `watch ${i}`, { diagnostic: false })
    abort.abort()
    await res.body.dump().catch(() => {})
  }
  await eventually(() => h.simulator.openConnections() <= baseline, 10_000, 'upstream connections to close')
  t.ok(h.simulator.openConnections() <= baseline, `no connection left behind (${baseline} are the hub's own watches)`)
})

t.test('failover: the first server refuses, the second serves', async t => {
  const dead = await ApiServerSimulator.start()
  await dead.setFault('refuse')
  const live = await ApiServerSimulator.start()
  live.create(configMap('on-live'))
  const hub = await startHub(hubConfig([dead.url, live.url]), { logger: quietLogger() })
  t.teardown(async () => {
    await hub.close()
    await Promise.all([dead.close(), live.close()])
  })
  const res = await request(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps/on-live`)
  t.equal(res.statusCode, 200)
  t.equal(((await res.body.json()) as any).metadata.name, 'on-live')
  const write = await request(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(configMap('failover-write')),
  })
  t.equal(write.statusCode, 201, 'a write whose first server refused is sent to the next')
  await write.body.dump()
})

t.test('every upstream down: 503 ServiceUnavailable Status, and the hub serves again when one returns', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  await h.simulator.setFault('refuse')
  const down = await request(`${h.url}/api/v1/namespaces/default/configmaps`)
  t.equal(down.statusCode, 503)
  const status = (await down.body.json()) as any
  t.match(status, { kind: 'Status', status: 'Failure', reason: 'ServiceUnavailable', code: 503 })
  t.match(status.message, /no apiserver reachable: http:\/\/127\.0\.0\.1:\d+: (connect |read |UND_ERR_SOCKET|ECONN)/, 'the message names the server and why')
  await h.simulator.setFault('none')
  const res = await eventually(async () => {
    const r = await request(`${h.url}/api/v1/namespaces/default/configmaps`)
    await r.body.dump()
    return r.statusCode === 200
  })
  t.ok(res, 'served after the apiserver came back')
})

t.test('upgrades: WebSocket and SPDY requests reach the apiserver and bytes flow both ways', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const wsUrl = h.url.replace('http', 'ws') + '/api/v1/namespaces/default/pods/p/exec?command=sh&stdin=true'
  const ws = new WebSocket(wsUrl, ['v4.channel.k8s.io'])
  await once(ws, 'open')
  ws.send('hello over websocket')
  const [echo] = await once(ws, 'message')
  t.equal(echo.toString(), 'hello over websocket')
  ws.close()
  t.ok(
    h.simulator.requests.some(r => r.url.startsWith('/api/v1/namespaces/default/pods/p/exec')),
    'upgrade reached the apiserver',
  )

  const socket = net.connect(Number(new URL(h.url).port), '127.0.0.1')
  t.teardown(() => socket.destroy())
  await once(socket, 'connect')
  socket.write(
    'POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n',
  )
  let received = ''
  socket.on('data', chunk => (received += chunk.toString('latin1')))
  await eventually(() => received.includes('\r\n\r\n'), 5_000, 'the 101 response')
  t.match(received, /^HTTP\/1\.1 101/)
  const afterHead = received.length
  socket.write('spdy-bytes')
  await eventually(() => received.slice(afterHead).includes('spdy-bytes'), 5_000, 'the echo')
  t.pass('SPDY bytes echoed')
})

t.test('an upstream that only speaks TLS is verified with the kubeconfig CA; client certificates identify the node', async t => {
  const pki = await createTestPki()
  const other = await createTestPki()
  const simulator = await ApiServerSimulator.start({
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    tokens: ['unused'],
  })
  const dir = tempDir(t, 'outpost-tls-')
  const good = await writeKubeconfig(path.join(dir, 'good'), {
    server: simulator.url,
    ca: pki.ca.cert,
    cert: pki.client.cert,
    key: pki.client.key,
    inline: true,
  })
  const wrongCa = await writeKubeconfig(path.join(dir, 'wrong'), { server: simulator.url, ca: other.ca.cert, inline: true })
  const hub = await startHub(hubConfig([], { kubeconfig: good }), { logger: quietLogger() })
  const badHub = await startHub(hubConfig([], { kubeconfig: wrongCa }), { logger: quietLogger() })
  t.teardown(async () => {
    await Promise.all([hub.close(), badHub.close()])
    await simulator.close()
  })
  const ok = await request(`${hub.proxyUrl}/api/v1/namespaces`)
  t.equal(ok.statusCode, 200, 'CA verified and client certificate accepted')
  await ok.body.dump()
  const refused = await request(`${badHub.proxyUrl}/api/v1/namespaces`)
  t.equal(refused.statusCode, 503, 'an apiserver whose certificate the CA does not sign is not trusted')
  const status = (await refused.body.json()) as any
  t.match(status.message, /certificate|self.signed|issuer/i)
})

t.test('requests the hub cannot parse get a Status, and the hub stays up', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const socket = net.connect(Number(new URL(h.url).port), '127.0.0.1')
  await once(socket, 'connect')
  let answer = ''
  socket.on('data', chunk => (answer += chunk.toString()))
  socket.end('GARBAGE\r\n\r\n')
  await once(socket, 'close')
  t.match(answer, /^HTTP\/1\.1 400/, 'bytes that are not HTTP get a 400')
  t.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).kind, 'Status')
  const res = await request(`${h.url}/api/v1/namespaces/%zz/configmaps`)
  const body = (await res.body.json()) as any
  t.equal(body.kind, 'Status', 'a malformed path is answered with a Status')
  const after = await request(`${h.url}/api/v1/namespaces`)
  t.equal(after.statusCode, 200, 'still serving')
  await after.body.dump()
})
