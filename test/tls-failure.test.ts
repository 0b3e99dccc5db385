// A hub that cannot trust the apiserver, or that the apiserver refuses, is misconfigured, not
// offline: one error line naming the fix, and readyz telling it apart from an apiserver out of reach.
import t from 'tap'
import { request } from 'undici'
import { ApiServerSimulator } from './simulator/index.ts'
import { startHub } from '../lib/hub.ts'
import type { Hub } from '../lib/hub.ts'
import { capturingLogger, eventually, freePort, hubConfig } from './helpers/hub.ts'
import { createTestPki, writeKubeconfig } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const pki = await createTestPki()

async function readyz(hub: Hub): Promise<{ status: number; text: string }> {
  const res = await request(`${hub.adminUrl}/v1/readyz`)
  return { status: res.statusCode, text: await res.body.text() }
}

function lines(text: string): { level: number; msg: string }[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map(l => JSON.parse(l))
}

/**
 * Waits until the health checker has probed `rounds` more times (as the simulator saw), or, with no
 * simulator to count them, about as long: time for more error lines, were there any. A slow box
 * probes less often, which only makes "one line" easier, never a false failure.
 */
async function probedAgain(simulator: ApiServerSimulator | undefined, hub: Hub, rounds: number): Promise<void> {
  if (!simulator) return new Promise(resolve => setTimeout(resolve, rounds * 100 + 500))
  const probes = () => simulator.requests.filter(r => r.url.startsWith('/readyz')).length
  const before = probes()
  await eventually(() => probes() >= before + rounds, 20_000, `${rounds} more probes`)
}

t.test('an HTTPS --server and no --kubeconfig: the cluster CA is unknown, one error says to give it, readyz says the apiserver cannot be verified', async t => {
  const simulator = await ApiServerSimulator.start({ tls: { key: pki.server.key, cert: pki.server.cert } })
  const { logger, text } = capturingLogger()
  const hub = await startHub(hubConfig([simulator.url]), { logger })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  await eventually(() => hub.health.state === 'offline', 20_000, 'the hub to give up on the apiserver')
  const ready = await readyz(hub)
  t.equal(ready.status, 503, 'not ready: nothing cached, nothing from the cloud')
  t.match(ready.text, `cannot authenticate / verify the apiserver: ${simulator.url}: UNABLE_TO_VERIFY_LEAF_SIGNATURE`, ready.text)
  t.match(ready.text, /give --kubeconfig with the cluster's CA/, 'readyz names the fix')
  t.notMatch(ready.text, /apiserver unreachable/, 'not told as an outage')

  // the TLS handshake fails before any request: probes are not in the simulator's log, so wait out rounds
  await probedAgain(undefined, hub, 10)
  const logged = lines(text())
  const errors = logged.filter(l => l.level === 50)
  t.equal(errors.length, 1, `one error line for many failed probes: ${JSON.stringify(errors)}`)
  t.match(errors[0]?.msg, `apiserver ${simulator.url}: UNABLE_TO_VERIFY_LEAF_SIGNATURE`)
  t.match(errors[0]?.msg, /give --kubeconfig with the cluster's CA/)
  t.notOk(
    logged.some(l => l.level < 50 && /apiserver .* down/.test(l.msg)),
    'no "apiserver down" line',
  )

  const res = await request(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps`, { headers: { 'user-agent': 'kubelet/v1.24.0' } })
  const status = (await res.body.json()) as { message: string }
  t.equal(res.statusCode, 503)
  t.match(status.message, /^cannot authenticate \/ verify the apiserver: /, "a client's 503 says it too")
})

t.test('credentials the apiserver refuses (401 on the probe): one error says so, readyz apart from unreachable', async t => {
  const simulator = await ApiServerSimulator.start({ tls: { key: pki.server.key, cert: pki.server.cert }, tokens: ['the-right-one'] })
  const kubeconfig = await writeKubeconfig(tempDir(t, 'outpost-kubeconfig-'), { server: simulator.url, ca: pki.ca.cert, token: 'a-revoked-one', inline: true })
  const { logger, text } = capturingLogger()
  const hub = await startHub(hubConfig([], { kubeconfig }), { logger })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  await eventually(() => hub.health.state === 'offline', 20_000, 'the hub to give up on the apiserver')
  await probedAgain(simulator, hub, 5)
  const errors = lines(text()).filter(l => l.level === 50)
  t.equal(errors.length, 1, `one error line for many refused probes: ${JSON.stringify(errors)}`)
  t.match(errors[0]?.msg, /refused the node's credentials: 401 Unauthorized/)
  t.match(errors[0]?.msg, /check the client certificate or token in --kubeconfig/)
  const ready = await readyz(hub)
  t.match(ready.text, `cannot authenticate / verify the apiserver: ${simulator.url}: the apiserver refused the node's credentials: 401`, ready.text)
})

t.test('an apiserver out of reach is an outage: readyz says unreachable, and nothing is logged as an error', async t => {
  const server = `http://127.0.0.1:${await freePort()}` // nothing listens
  const { logger, text } = capturingLogger()
  const hub = await startHub(hubConfig([server]), { logger })
  t.teardown(() => hub.close())
  await eventually(() => hub.health.state === 'offline', 20_000, 'offline')
  const ready = await readyz(hub)
  t.match(ready.text, `apiserver unreachable: ${server}: connect ECONNREFUSED`, ready.text)
  t.notMatch(ready.text, /cannot authenticate/)
  await probedAgain(undefined, hub, 5)
  t.same(
    lines(text()).filter(l => l.level >= 50),
    [],
    'an outage is info, not an error',
  )
})

t.test('an address without a scheme (YurtHub --server-addr) that answers plain HTTP: named as such, in one line', async t => {
  const simulator = await ApiServerSimulator.start() // plain HTTP
  const address = new URL(simulator.url).host
  const { logger, text } = capturingLogger()
  const hub = await startHub(hubConfig([`https://${address}`]), { logger })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  await eventually(() => hub.health.state === 'offline', 20_000, 'the hub to give up on the apiserver')
  const ready = await readyz(hub)
  t.equal(ready.status, 503)
  t.match(ready.text, `https://${address}: it answered the TLS handshake in plain HTTP (ERR_SSL_WRONG_VERSION_NUMBER)`, ready.text)
  t.match(ready.text, `answers plain HTTP: give --server http://${address}`, 'readyz names the fix')
  t.match(ready.text, 'the apiserver is given as https and speaks plain HTTP', 'said as a scheme mistake')
  t.notMatch(ready.text, /SSL routines|ssl3_|openssl|cluster's CA|authenticate \/ verify/, 'no OpenSSL dump, and not taken for a certificate problem')
  t.ok(
    ready.text.split('\n').every(line => line === '' || /^(not ready:|- )/.test(line)),
    `each problem on a line of its own:\n${ready.text}`,
  )

  await probedAgain(undefined, hub, 3)
  const errors = lines(text()).filter(l => l.level === 50)
  t.equal(errors.length, 1, 'one error line')
  t.match(errors[0]?.msg, `answers plain HTTP: give --server http://${address}`)
  t.notMatch(errors[0]?.msg, /\n|SSL routines/, 'in one line, without the library dump')
})
