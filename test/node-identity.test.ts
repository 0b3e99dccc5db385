// Only the node acts as the node: a local client without credentials of its own is sent upstream
// with the node's, so it may not ask the apiserver to treat it as someone else (impersonation,
// front-proxy identity headers), and a client with its own token, wherever it carries it, is
// relayed as itself.
import net from 'node:net'
import t from 'tap'
import type { Test } from 'tap'
import { request } from 'undici'
import { eventually, freePort, goDark, startHarness } from './helpers/hub.ts'
import { writeKubeconfig } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const nodeToken = 'node-token-0001'
const podToken = 'pod-token-0002'

async function harness(t: Test) {
  // a simulator that checks tokens, and a hub holding the node's
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  // removed when the test ends: it holds a kubeconfig with the node's token
  const dir = tempDir(t, 'outpost-identity-')
  const kubeconfig = await writeKubeconfig(dir, { server: url, token: nodeToken, inline: true })
  const h = await startHarness({ simulator: { port, tokens: [nodeToken, podToken] }, config: { kubeconfig, servers: [] } })
  t.teardown(() => h.close())
  return h
}

const sent = (h: Awaited<ReturnType<typeof harness>>, pathPrefix: string) => h.simulator.requests.filter(r => r.path.startsWith(pathPrefix))

t.test('impersonation with the node credential is refused; with a token of its own it is the apiserver’s to decide', async t => {
  const h = await harness(t)
  for (const header of ['impersonate-user', 'impersonate-group', 'impersonate-uid', 'impersonate-extra-scopes']) {
    const res = await request(`${h.url}/api/v1/namespaces/kube-system/secrets?probe=${header}`, { headers: { [header]: 'system:masters' } })
    const status = (await res.body.json()) as { kind: string; reason: string; code: number; message: string }
    t.equal(res.statusCode, 403, `${header}: 403`)
    t.match(status, { kind: 'Status', reason: 'Forbidden', code: 403, message: new RegExp(header) })
  }
  t.equal(h.simulator.requests.filter(r => r.query.probe !== undefined).length, 0, 'none reached the apiserver')

  const own = await request(`${h.url}/api/v1/namespaces?own=1`, { headers: { authorization: `Bearer ${podToken}`, 'impersonate-user': 'someone' } })
  await own.body.dump()
  const relayed = h.simulator.requests.find(r => r.query.own === '1')
  t.equal(relayed?.user, `token:${podToken.slice(0, 6)}`, 'relayed with the client’s own token')
  t.equal(relayed?.headers['impersonate-user'], 'someone', 'and its impersonation, for the apiserver to authorize')
})

t.test('front-proxy identity headers never reach the apiserver', async t => {
  const h = await harness(t)
  const res = await request(`${h.url}/api/v1/namespaces?remote=1`, {
    headers: { 'x-remote-user': 'admin', 'x-remote-group': 'system:masters', 'x-remote-extra-scopes': 'all' },
  })
  t.equal(res.statusCode, 200)
  await res.body.dump()
  const relayed = h.simulator.requests.find(r => r.query.remote === '1')
  t.equal(relayed?.user, `token:${nodeToken.slice(0, 6)}`, 'sent as the node')
  t.same(
    Object.keys(relayed?.headers ?? {}).filter(n => n.startsWith('x-remote-')),
    [],
    'without X-Remote-*',
  )
})

t.test('offline, impersonation gets the same 403, not the node’s cached view', async t => {
  const h = await harness(t)
  const list = `${h.url}/api/v1/namespaces/default/configmaps`
  const kubelet = { 'user-agent': 'kubelet/v1.33.0' }
  await (await request(list, { headers: kubelet })).body.dump()
  await goDark(h)
  const cached = await request(list, { headers: kubelet })
  await cached.body.dump()
  t.equal(cached.statusCode, 200, 'the node’s own read is answered from the cache')
  const res = await request(list, { headers: { ...kubelet, 'impersonate-user': 'someone' } })
  t.equal(res.statusCode, 403)
  t.match(await res.body.json(), { kind: 'Status', reason: 'Forbidden' })
})

t.test('a WebSocket whose token travels as a subprotocol is relayed as the token’s owner, not as the node', async t => {
  const h = await harness(t)
  const token = Buffer.from(podToken).toString('base64url')
  const socket = net.connect(Number(new URL(h.url).port), '127.0.0.1')
  t.teardown(() => socket.destroy())
  await new Promise(resolve => socket.once('connect', resolve))
  socket.write(
    [
      'GET /api/v1/namespaces/default/pods/p/exec?command=sh&ws=1 HTTP/1.1',
      'Host: x',
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      `Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.${token}, v4.channel.k8s.io`,
      'X-Remote-User: admin',
      '',
      '',
    ].join('\r\n'),
  )
  const relayed = (await eventually(() => h.simulator.requests.find(r => r.query.ws === '1'), 10_000, 'the upgrade to reach the apiserver'))!
  t.equal(relayed.headers.authorization, undefined, 'the hub added no credential of the node')
  t.match(String(relayed.headers['sec-websocket-protocol']), `base64url.bearer.authorization.k8s.io.${token}`, 'the client’s token travels on')
  t.equal(relayed.headers['x-remote-user'], undefined, 'no front-proxy identity')
  t.equal(sent(h, '/api/v1/namespaces/default/pods/p/exec').length, 1)
})
