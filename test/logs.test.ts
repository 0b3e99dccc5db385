// What an operator reads in the logs: one JSON line per request at debug, state changes at info, and
// never a bearer token, a certificate or key, or a Secret's data, whatever the traffic.
import t from 'tap'
import { request } from 'undici'
import { startDemoCluster } from './simulator/demo.ts'
import { startHub } from '../lib/hub.ts'
import { capturingLogger, eventually, hubConfig } from './helpers/hub.ts'
import { createTestPki, writeKubeconfig } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'

/** The PEM body lines of a certificate or key: any one of them in a log is a leak. */
const pemLines = (pem: string) => pem.split('\n').filter(l => l.length > 40 && !l.startsWith('-----'))

t.test('logs: a line per request, state changes at info, and no credentials or Secret data', async t => {
  const pki = await createTestPki()
  const nodeToken = 'node-token-5f2c9a7e1b3d'
  const userToken = 'user-token-8e4b6d0c2a91'
  const simulator = await startDemoCluster({
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    tokens: [nodeToken, userToken],
  })
  const secretValue = 'hunter2-do-not-log-9c1f'
  simulator.create({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'db', namespace: 'default' },
    data: { password: Buffer.from(secretValue).toString('base64') },
  })
  const kubeconfig = await writeKubeconfig(tempDir(t, 'outpost-logs-'), {
    server: simulator.url,
    ca: pki.ca.cert,
    cert: pki.client.cert,
    key: pki.client.key,
    token: nodeToken,
    inline: false,
  })

  const captured = capturingLogger()
  const hub = await startHub(hubConfig([], { kubeconfig }), { logger: captured.logger })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  await eventually(() => hub.topology.known, 10_000, 'topology')
  const kubelet = { 'user-agent': 'kubelet/v1.32.0' }
  const send = async (url: string, init: Parameters<typeof request>[1] = {}) => {
    const res = await request(`${hub.proxyUrl}${url}`, init)
    await res.body.dump()
    return res.statusCode
  }

  let requests = 0
  const counted = async (url: string, init?: Parameters<typeof request>[1]) => {
    requests++
    return send(url, init)
  }
  t.equal(await counted('/api/v1/namespaces/default/secrets', { headers: kubelet }), 200, 'kubelet lists Secrets (cached)')
  t.equal(await counted('/api/v1/namespaces/default/secrets/db', { headers: kubelet }), 200)
  t.equal(await counted('/api/v1/pods', { headers: { authorization: `Bearer ${userToken}` } }), 200, 'a client with its own token')
  t.equal(await counted('/api/v1/pods', { headers: { authorization: 'Bearer wrong-token-0000000000' } }), 401, 'a bad token, refused upstream')
  t.equal(
    await counted('/api/v1/namespaces/default/secrets', {
      method: 'POST',
      headers: { ...kubelet, 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'new' }, stringData: { token: secretValue } }),
    }),
    201,
  )
  await (await request(`${hub.adminUrl}/debug/cache/kubelet/secrets.v1.core/default/db`)).body.dump()

  simulator.setFault('refuse')
  await eventually(() => hub.health.state === 'offline', 10_000, 'offline')
  t.equal(await counted('/api/v1/namespaces/default/secrets/db', { headers: kubelet }), 200, 'offline, from the cache')
  t.equal(
    await counted('/api/v1/namespaces/default/secrets', {
      method: 'POST',
      headers: { ...kubelet, authorization: `Bearer ${userToken}`, 'content-type': 'application/json' },
      body: '{}',
    }),
    503,
  )
  simulator.setFault('none')
  await eventually(() => hub.health.state === 'online', 10_000, 'online')
  await hub.close()

  const text = captured.text()
  const lines = text
    .trim()
    .split('\n')
    .map(line => JSON.parse(line))
  t.ok(lines.length > 0 && lines.every(l => typeof l.level === 'number' && typeof l.msg === 'string'), 'every line is JSON with a level and a message')
  const requestLines = lines.filter(l => l.msg === 'request')
  t.ok(requestLines.length >= requests, `a debug line per proxied request (${requestLines.length} for ${requests})`)
  t.match(
    requestLines.find(l => l.code === 401),
    { level: 20, component: '', verb: 'list', resource: 'pods', source: 'cloud' },
  )
  t.ok(
    requestLines.some(l => l.source === 'cache' && l.resource === 'secrets' && l.verb === 'get'),
    'offline answers are logged too',
  )
  const info = lines.filter(l => l.level === 30).map(l => l.msg as string)
  for (const change of [/^cache loaded$/, /^cloud offline/, /^cloud online$/, /^topology changed$/]) {
    t.ok(
      info.some(m => change.test(m)),
      `state change at info: ${change}`,
    )
  }

  for (const secret of [nodeToken, userToken, 'wrong-token-0000000000', secretValue, Buffer.from(secretValue).toString('base64')]) {
    t.notOk(text.includes(secret), `never logged: ${secret.slice(0, 10)}…`)
  }
  for (const line of [...pemLines(pki.client.cert), ...pemLines(pki.client.key), ...pemLines(pki.ca.cert)]) {
    if (text.includes(line)) t.fail(`a PEM line of a certificate or key was logged: ${line.slice(0, 12)}…`)
  }
  t.notMatch(text, /BEGIN [A-Z ]*(PRIVATE KEY|CERTIFICATE)/, 'no PEM block')
  t.notMatch(text, /authorization/i, 'no Authorization header, under any name')
})
