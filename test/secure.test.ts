// The HTTPS port (issue 6), on real sockets with real TLS: the generated certificate and its SANs,
// TLS 1.2+, file modes, who may use the port (bearer tokens forwarded untouched, client
// certificates from --client-ca-file acting as the node, everyone else 401), kubectl, certificate
// files replaced on disk, slow clients on both ports, and the plain port's loopback-only bind.
import t from 'tap'
import type { Test } from 'tap'
import { X509Certificate } from 'node:crypto'
import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import tls from 'node:tls'
import type { Duplex } from 'node:stream'
import WebSocket from 'ws'
import { ApiServerSimulator } from './simulator/index.ts'
import { startHub } from '../lib/hub.ts'
import { capturingLogger, eventually, hubConfig, quietLogger, startHarness } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { createTestPki, writeKubeconfig } from './helpers/pki.ts'
import type { Pem } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { kubectl } from './helpers/kubectl.ts'

const mode = async (file: string) => (await stat(file)).mode & 0o777

// the caller's token and the hub's own (in its kubeconfig); the simulator names users after 6 chars
const userToken = 'usrtok-1c9f0e2a7b'
const hubToken = 'hubtok-5d3a8c1e42'
const userIdentity = `token:${userToken.slice(0, 6)}`
const hubIdentity = `token:${hubToken.slice(0, 6)}`

// --- raw HTTP/1.1 over a socket: every byte on the wire is the test's ----------------------------

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** Dechunks a chunked body; undefined while incomplete. */
function dechunk(data: Buffer): Buffer | undefined {
  const parts: Buffer[] = []
  let at = 0
  for (;;) {
    const eol = data.indexOf('\r\n', at)
    if (eol < 0) return undefined
    const size = parseInt(data.subarray(at, eol).toString('latin1'), 16)
    if (size === 0) return data.length >= eol + 4 ? Buffer.concat(parts) : undefined
    if (data.length < eol + 2 + size + 2) return undefined
    parts.push(data.subarray(eol + 2, eol + 2 + size))
    at = eol + 2 + size + 2
  }
}

/** One response from the start of `data`; undefined while incomplete (or, once ended, never). */
function parseResponse(data: Buffer, ended: boolean): RawResponse | undefined {
  const end = data.indexOf('\r\n\r\n')
  if (end < 0) return undefined
  const [statusLine, ...lines] = data.subarray(0, end).toString('latin1').split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const status = Number(statusLine.split(' ')[1])
  const rest = data.subarray(end + 4)
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length'])
    return rest.length >= length ? { status, headers, body: rest.subarray(0, length).toString() } : undefined
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const body = dechunk(rest)
    return body ? { status, headers, body: body.toString() } : undefined
  }
  return ended ? { status, headers, body: rest.toString() } : undefined
}

/** The next response on `socket`; its listeners are removed after, so the socket can carry another. */
function readResponse(socket: Duplex, timeoutMs = 20_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let data = Buffer.alloc(0)
    const finish = (error: Error | undefined, response?: RawResponse) => {
      clearTimeout(timer)
      socket.off('data', onData).off('end', onEnd).off('close', onEnd).off('error', onError)
      if (error) reject(error)
      else resolve(response!)
    }
    const onData = (chunk: Buffer) => {
      data = Buffer.concat([data, chunk])
      const response = parseResponse(data, false)
      if (response) finish(undefined, response)
    }
    const onEnd = () => {
      const response = parseResponse(data, true)
      finish(response ? undefined : new Error(`connection ended without a whole response: ${JSON.stringify(data.toString('latin1').slice(0, 200))}`), response)
    }
    const onError = (error: Error) => finish(error)
    const timer = setTimeout(() => finish(new Error(`no response within ${timeoutMs} ms`)), timeoutMs)
    socket.on('data', onData).on('end', onEnd).on('close', onEnd).on('error', onError)
  })
}

/**
 * Everything the peer sends until it closes the connection, and how long that took from `since`;
 * a peer that has not closed within `giveUpMs` is cut here (ms: Infinity), so a test fails, not hangs.
 */
function untilClosed(socket: Duplex, since: number, giveUpMs = 20_000): Promise<{ data: Buffer; ms: number }> {
  return new Promise(resolve => {
    const chunks: Buffer[] = []
    let gaveUp = false
    const timer = setTimeout(() => {
      gaveUp = true
      socket.destroy()
    }, giveUpMs)
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', () => {})
    socket.once('close', () => {
      clearTimeout(timer)
      resolve({ data: Buffer.concat(chunks), ms: gaveUp ? Infinity : Date.now() - since })
    })
  })
}

function requestText(method: string, target: string, headers: Record<string, string | number> = {}, body = '', keepAlive = false): string {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: kubernetes.default.svc', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)]
  if (!keepAlive) lines.push('Connection: close')
  if (body && headers['Content-Length'] === undefined && headers['Transfer-Encoding'] === undefined) lines.push(`Content-Length: ${Buffer.byteLength(body)}`)
  return `${lines.join('\r\n')}\r\n\r\n${body}`
}

function connectTls(port: number, options: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...options })
    socket.once('secureConnect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}

function connectPlain(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}

interface HttpsRequest {
  method?: string
  path: string
  headers?: Record<string, string | number>
  body?: string
  /** client certificate, CA, servername, … */
  tls?: tls.ConnectionOptions
}

/** One request on a fresh TLS connection to the HTTPS port. */
async function httpsRequest(port: number, ca: string, request: HttpsRequest): Promise<RawResponse> {
  const socket = await connectTls(port, { ca, servername: 'kubernetes.default.svc', ...request.tls })
  try {
    socket.write(requestText(request.method ?? 'GET', request.path, request.headers, request.body))
    return await readResponse(socket)
  } finally {
    socket.destroy()
  }
}

/** The body of a Status-shaped (JSON) answer. */
function statusOf(response: RawResponse): any {
  if (!/application\/json/.test(response.headers['content-type'] ?? '')) throw new Error(`not JSON: ${response.headers['content-type']}`)
  return JSON.parse(response.body)
}

function portOf(url: string): number {
  return Number(new URL(url).port)
}

/** The simulator's log entries for `target` (exact path and query). */
function seen(simulator: ApiServerSimulator, target: string) {
  return simulator.requests.filter(r => r.url === target)
}

// --- WebSocket upgrades, with the ws client --------------------------------------------------------

type WsOutcome = { socket: WebSocket } | { status: number; body: string }

function openWebSocket(url: string, options: WebSocket.ClientOptions): Promise<WsOutcome> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options)
    ws.once('open', () => resolve({ socket: ws }))
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      res.on('error', reject)
    })
    ws.once('error', reject)
  })
}

async function echoes(ws: WebSocket, text: string): Promise<boolean> {
  const reply = new Promise<string>(resolve => ws.once('message', data => resolve(data.toString())))
  ws.send(text)
  return (await reply) === text
}

// --- the main hub: generated certificate, a client CA, a token of its own ---------------------------

interface Setup {
  h: Harness
  port: number
  certDir: string
  ca: string
  pki: Awaited<ReturnType<typeof createTestPki>>
}

async function mainHub(t: Test): Promise<Setup> {
  const dir = tempDir(t, 'outpost-secure-')
  const pki = await createTestPki()
  const clientCaFile = path.join(dir, 'client-ca.crt')
  await writeFile(clientCaFile, pki.ca.cert)
  // an existing directory readable by all: the hub must narrow it to 0700
  const certDir = path.join(dir, 'pki')
  await mkdir(certDir)
  await chmod(certDir, 0o755)
  // the server in the kubeconfig is not used: the harness gives --server
  const kubeconfig = await writeKubeconfig(path.join(dir, 'node'), { server: 'http://127.0.0.1:9', token: hubToken, inline: true })
  const h = await startHarness({
    simulator: { tokens: [userToken, hubToken] },
    config: { securePort: 0, certDir, clientCaFile, kubeconfig, nodeIps: ['10.96.0.1'] },
  })
  t.teardown(() => h.close())
  const secureUrl = await h.hub.secureUrl!
  t.match(secureUrl, /^https:\/\/127\.0\.0\.1:\d+$/)
  const ca = await readFile(path.join(certDir, 'ca.crt'), 'utf8')
  return { h, port: portOf(secureUrl), certDir, ca, pki }
}

t.test('HTTPS port with the generated certificate', async t => {
  const { h, port, certDir, ca, pki } = await mainHub(t)

  t.test('the certificate verifies against <certDir>/ca.crt for every SAN, and for nothing else', async t => {
    for (const servername of ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local']) {
      const socket = await connectTls(port, { ca, servername })
      t.ok(socket.authorized, `servername ${servername}`)
      socket.destroy()
    }
    // by IP: no SNI is sent, and the identity check is against the IP SANs
    const byIp = await connectTls(port, { ca })
    t.ok(byIp.authorized, 'connecting to 127.0.0.1 by IP')
    t.match(byIp.getPeerCertificate().subjectaltname, /IP Address:127\.0\.0\.1\b/)
    byIp.destroy()

    await t.rejects(
      connectTls(port, { ca, servername: 'not-the-apiserver.example' }),
      { code: 'ERR_TLS_CERT_ALTNAME_INVALID' },
      'a name not in the certificate',
    )
    await t.rejects(
      connectTls(port, { ca: pki.ca.cert, servername: 'kubernetes' }),
      { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' },
      'another CA does not verify it',
    )
  })

  t.test('TLS 1.2 and 1.3 are served, TLS 1.1 and 1.0 refused', async t => {
    const tls12 = await connectTls(port, { ca, servername: 'kubernetes', maxVersion: 'TLSv1.2' })
    t.equal(tls12.getProtocol(), 'TLSv1.2')
    tls12.destroy()
    const tls13 = await connectTls(port, { ca, servername: 'kubernetes' })
    t.equal(tls13.getProtocol(), 'TLSv1.3')
    tls13.destroy()

    // OpenSSL 3 offers TLS 1.1 and below only at security level 0. A control server that accepts
    // them proves this client really offers them, so the hub's refusal below is the hub's.
    const old = { ciphers: 'DEFAULT:@SECLEVEL=0', rejectUnauthorized: false }
    const control = tls.createServer({ key: pki.server.key, cert: pki.server.cert, minVersion: 'TLSv1', ciphers: old.ciphers }, s => s.end())
    control.on('tlsClientError', () => {})
    await new Promise<void>(resolve => control.listen(0, '127.0.0.1', resolve))
    t.teardown(() => control.close())
    const controlPort = (control.address() as net.AddressInfo).port
    for (const version of ['TLSv1.1', 'TLSv1'] as const) {
      const accepted = await connectTls(controlPort, { ...old, minVersion: version, maxVersion: version })
      t.equal(accepted.getProtocol(), version, `control: the client can speak ${version}`)
      accepted.destroy()
      await t.rejects(
        connectTls(port, { ...old, minVersion: version, maxVersion: version }),
        { code: /PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL/ },
        `the hub refuses ${version}`,
      )
    }
  })

  t.test('certDir is 0700, the keys 0600', async t => {
    t.equal(await mode(certDir), 0o700, 'an existing 0755 certDir was narrowed')
    t.equal(await mode(path.join(certDir, 'ca.key')), 0o600)
    t.equal(await mode(path.join(certDir, 'serving.key')), 0o600)
  })

  t.test('anonymous requests and upgrades get the hub 401, never reaching the apiserver', async t => {
    const target = '/api/v1/namespaces/default/configmaps/anonymous-check'
    const response = await httpsRequest(port, ca, { path: target })
    t.equal(response.status, 401)
    const status = statusOf(response)
    t.match(status, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', code: 401 })
    t.match(status.message, /bearer token or a client certificate/)
    t.equal(seen(h.simulator, target).length, 0, 'not forwarded')

    // Authorization that is not a bearer token (basic auth) is refused as well
    const basic = await httpsRequest(port, ca, { path: target, headers: { Authorization: `Basic ${Buffer.from('admin:admin').toString('base64')}` } })
    t.equal(basic.status, 401)
    t.match(statusOf(basic), { kind: 'Status', reason: 'Unauthorized', code: 401 })
    t.equal(seen(h.simulator, target).length, 0, 'not forwarded')

    const exec = '/api/v1/namespaces/default/pods/x/exec?command=anonymous'
    const ws = await openWebSocket(`wss://127.0.0.1:${port}${exec}`, { ca })
    t.ok('status' in ws, 'the upgrade was not accepted')
    if ('status' in ws) {
      t.equal(ws.status, 401)
      t.match(JSON.parse(ws.body), { kind: 'Status', reason: 'Unauthorized', code: 401 })
    }
    t.equal(seen(h.simulator, exec).length, 0, 'the upgrade was not forwarded')
  })

  t.test('a bearer token goes to the apiserver untouched; a wrong one gets the apiserver 401', async t => {
    const target = '/api/v1/namespaces/default/configmaps/token-check'
    const response = await httpsRequest(port, ca, { path: target, headers: { Authorization: `Bearer ${userToken}` } })
    t.equal(response.status, 404, 'the apiserver answered (no such configmap)')
    t.match(statusOf(response), { kind: 'Status', reason: 'NotFound' })
    const logged = seen(h.simulator, target)
    t.equal(logged.length, 1)
    t.equal(logged[0]?.headers.authorization, `Bearer ${userToken}`)
    t.equal(logged[0]?.user, userIdentity)

    const wrongTarget = '/api/v1/namespaces/default/configmaps/wrong-token-check'
    const wrong = await httpsRequest(port, ca, { path: wrongTarget, headers: { Authorization: 'Bearer not-a-token-anyone-knows' } })
    t.equal(wrong.status, 401)
    t.match(statusOf(wrong), { kind: 'Status', reason: 'Unauthorized', code: 401, message: 'Unauthorized' }, "the apiserver's Status, not the hub's")
    const wrongLogged = seen(h.simulator, wrongTarget)
    t.equal(wrongLogged.length, 1, 'forwarded')
    t.equal(wrongLogged[0]?.headers.authorization, 'Bearer not-a-token-anyone-knows')
    t.equal(wrongLogged[0]?.user, undefined, 'refused by the apiserver')

    const exec = '/api/v1/namespaces/default/pods/x/exec?command=token'
    const ws = await openWebSocket(`wss://127.0.0.1:${port}${exec}`, { ca, headers: { Authorization: `Bearer ${userToken}` } })
    t.ok('socket' in ws, 'the upgrade with a token is spliced through')
    if ('socket' in ws) {
      t.ok(await echoes(ws.socket, 'hello'), 'bytes flow both ways')
      ws.socket.close()
    }
    t.equal(seen(h.simulator, exec)[0]?.user, userIdentity)
    t.equal(seen(h.simulator, exec)[0]?.headers.authorization, `Bearer ${userToken}`)
  })

  t.test('a client certificate from --client-ca-file acts as the node; one from another CA gets 401', async t => {
    const trusted: Pem = pki.client
    const target = '/api/v1/namespaces/default/configmaps/client-cert-check'
    const response = await httpsRequest(port, ca, { path: target, tls: { cert: trusted.cert, key: trusted.key } })
    t.equal(response.status, 404, 'the apiserver answered')
    const logged = seen(h.simulator, target)
    t.equal(logged.length, 1)
    t.equal(logged[0]?.user, hubIdentity, "forwarded with the hub's credentials")
    t.equal(logged[0]?.headers.authorization, `Bearer ${hubToken}`)

    const exec = '/api/v1/namespaces/default/pods/x/exec?command=client-cert'
    const ws = await openWebSocket(`wss://127.0.0.1:${port}${exec}`, { ca, cert: trusted.cert, key: trusted.key })
    t.ok('socket' in ws, 'an upgrade with a trusted client certificate is spliced through')
    if ('socket' in ws) {
      t.ok(await echoes(ws.socket, 'hello'))
      ws.socket.close()
    }
    t.equal(seen(h.simulator, exec)[0]?.user, hubIdentity, "the upgrade too goes with the hub's credentials")

    const other = await createTestPki()
    const strangerTarget = '/api/v1/namespaces/default/configmaps/stranger-check'
    const stranger = await httpsRequest(port, ca, { path: strangerTarget, tls: { cert: other.client.cert, key: other.client.key } })
    t.equal(stranger.status, 401)
    t.match(statusOf(stranger), { kind: 'Status', reason: 'Unauthorized', code: 401, message: /client certificate signed by --client-ca-file/ })
    t.equal(seen(h.simulator, strangerTarget).length, 0, 'not forwarded')

    const strangerExec = '/api/v1/namespaces/default/pods/x/exec?command=stranger'
    const strangerWs = await openWebSocket(`wss://127.0.0.1:${port}${strangerExec}`, { ca, cert: other.client.cert, key: other.client.key })
    t.equal('status' in strangerWs ? strangerWs.status : 101, 401)
    t.equal(seen(h.simulator, strangerExec).length, 0)

    // a token wins over a trusted certificate: the caller said who it is
    const bothTarget = '/api/v1/namespaces/default/configmaps/both-check'
    await httpsRequest(port, ca, { path: bothTarget, headers: { Authorization: `Bearer ${userToken}` }, tls: { cert: trusted.cert, key: trusted.key } })
    t.equal(seen(h.simulator, bothTarget)[0]?.user, userIdentity)
  })

  t.test('kubectl over HTTPS with the generated CA and a token', async t => {
    h.simulator.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web-over-https', namespace: 'default' },
      spec: { containers: [{ name: 'web', image: 'nginx' }] },
    })
    const server = `https://127.0.0.1:${port}`
    const caFile = path.join(certDir, 'ca.crt')
    const before = h.simulator.requests.length

    const byIp = await kubectl(server, ['--certificate-authority', caFile, '--token', userToken, 'get', 'pods', '-A'])
    t.equal(byIp.code, 0, byIp.stderr)
    t.match(byIp.stdout, /default\s+web-over-https/)

    const byName = await kubectl(server, [
      '--certificate-authority',
      caFile,
      '--tls-server-name',
      'kubernetes.default.svc',
      '--token',
      userToken,
      'get',
      'pods',
      '-A',
    ])
    t.equal(byName.code, 0, byName.stderr)
    t.match(byName.stdout, /default\s+web-over-https/)

    const fromKubectl = h.simulator.requests.slice(before).filter(r => String(r.headers['user-agent']).startsWith('kubectl'))
    t.ok(fromKubectl.length >= 2)
    t.ok(
      fromKubectl.every(r => r.user === userIdentity && r.headers.authorization === `Bearer ${userToken}`),
      "kubectl's token reached the apiserver",
    )

    // (not without any credentials: on a 401 kubectl then prompts for a username on stdin)
    const wrong = await kubectl(server, ['--certificate-authority', caFile, '--token', 'not-a-token-anyone-knows', 'get', 'pods', '-A'])
    t.not(wrong.code, 0, 'with a token the apiserver does not know kubectl is refused')
    t.match(wrong.stderr, /Unauthorized|must be logged in/)
  })
})

// --- certificate files replaced on disk --------------------------------------------------------------

t.test('files mode: replaced certificate files serve new connections; an open one keeps working', async t => {
  const dir = tempDir(t, 'outpost-secure-files-')
  const [first, second] = await Promise.all([createTestPki(), createTestPki()])
  const certFile = path.join(dir, 'tls.crt')
  const keyFile = path.join(dir, 'tls.key')
  // replaced the way an operator's tooling (or a kubelet-style rotation) does: write aside, rename over
  const install = async (pem: Pem) => {
    await writeFile(`${keyFile}.new`, pem.key, { mode: 0o600 })
    await writeFile(`${certFile}.new`, pem.cert)
    await rename(`${keyFile}.new`, keyFile)
    await rename(`${certFile}.new`, certFile)
  }
  await install(first.server)
  const simulator = await ApiServerSimulator.start({ tokens: [userToken, hubToken] })
  t.teardown(() => simulator.close())
  const kubeconfig = await writeKubeconfig(path.join(dir, 'node'), { server: 'http://127.0.0.1:9', token: hubToken, inline: true })
  const captured = capturingLogger()
  const hub = await startHub(
    hubConfig([simulator.url], { securePort: 0, tlsCertFile: certFile, tlsKeyFile: keyFile, certDir: path.join(dir, 'pki'), kubeconfig }),
    {
      logger: captured.logger,
      timing: { reloadIntervalMs: 100 },
    },
  )
  t.teardown(() => hub.close())
  const port = portOf(await hub.secureUrl!)
  const ca = first.ca.cert + second.ca.cert
  const fingerprintOf = (pem: Pem) => new X509Certificate(pem.cert).fingerprint256
  const served = async () => {
    const socket = await connectTls(port, { ca })
    const fingerprint = socket.getPeerCertificate().fingerprint256
    socket.destroy()
    return fingerprint
  }

  t.equal(await served(), fingerprintOf(first.server), 'the first certificate is served')
  const open = await connectTls(port, { ca })
  t.teardown(() => open.destroy())
  const ask = async (target: string) => {
    open.write(requestText('GET', target, { Authorization: `Bearer ${userToken}` }, '', true))
    return readResponse(open)
  }
  t.equal((await ask('/api/v1/namespaces/default/configmaps/before')).status, 404, 'a keep-alive connection before the change')

  await install(second.server)
  await eventually(async () => (await served()) === fingerprintOf(second.server), 15_000, 'new connections to get the new certificate')
  t.pass('new connections get the new certificate')

  t.equal(open.getPeerCertificate().fingerprint256, fingerprintOf(first.server))
  const after = await ask('/api/v1/namespaces/default/configmaps/after')
  t.equal(after.status, 404, 'the connection opened before keeps working')
  t.equal(seen(simulator, '/api/v1/namespaces/default/configmaps/after')[0]?.user, userIdentity)

  // a half-written rotation (key of one, certificate of another) is not taken: the last good pair stays
  const mark = captured.text().length
  await writeFile(keyFile, first.server.key)
  // the hub has re-read the files and done something about them: refused them (or swapped them in)
  const since = () => captured.text().slice(mark)
  await eventually(() => /serving certificate renewal failed|serving certificate renewed/.test(since()), 15_000, 'the hub to re-read the changed files')
  t.match(since(), /serving certificate renewal failed/, 'the mismatched pair is refused (logged)')
  t.notMatch(since(), /serving certificate renewed/, 'nothing was swapped in')
  t.equal(await served(), fingerprintOf(second.server), 'a mismatched pair on disk is not served: the last good one is')
})

// --- slow and oversized clients ------------------------------------------------------------------------

t.test('slow clients and large bodies, on the plain and the HTTPS port', async t => {
  const dir = tempDir(t, 'outpost-secure-slow-')
  const headerTimeoutMs = 500
  const maxRequestBytes = 1024
  // a certDir that does not exist yet: created 0700
  const certDir = path.join(dir, 'not', 'yet')
  const kubeconfig = await writeKubeconfig(path.join(dir, 'node'), { server: 'http://127.0.0.1:9', token: hubToken, inline: true })
  const h = await startHarness({
    simulator: { tokens: [userToken, hubToken] },
    config: { securePort: 0, certDir, kubeconfig, headerTimeoutMs, maxRequestBytes, nodeIps: ['10.96.0.1'] },
  })
  t.teardown(() => h.close())
  const securePort = portOf(await h.hub.secureUrl!)
  const plainPort = portOf(h.url)
  const ca = await readFile(path.join(certDir, 'ca.crt'), 'utf8')
  t.equal(await mode(certDir), 0o700, 'a new certDir is created 0700')
  t.equal(await mode(path.join(certDir, 'serving.key')), 0o600)

  const ports: { name: string; connect: () => Promise<Duplex>; auth: Record<string, string> }[] = [
    { name: 'plain', connect: () => connectPlain(plainPort), auth: {} },
    { name: 'HTTPS', connect: () => connectTls(securePort, { ca, servername: 'kubernetes' }), auth: { Authorization: `Bearer ${userToken}` } },
  ]
  t.test('a client that never finishes the TLS handshake is cut off after the header timeout too', async t => {
    // no HTTP has been spoken, so no 408 can be: the connection just closes
    for (const [what, bytes] of [
      ['nothing at all', Buffer.alloc(0)],
      ['half a ClientHello', Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])],
    ] as const) {
      const socket = await connectPlain(securePort)
      const start = Date.now()
      const closed = untilClosed(socket, start)
      if (bytes.length > 0) socket.write(bytes)
      const { data, ms } = await closed
      t.equal(data.length, 0, `${what}: nothing answered`)
      t.ok(ms >= headerTimeoutMs - 50, `${what}: not before the timeout (${ms} ms)`)
      // Node's default handshakeTimeout is 120 s: closed by the hub, not cut by untilClosed's give-up (20 s)
      t.ok(Number.isFinite(ms), `${what}: the hub closed it`)
    }
  })

  t.test('plain: a connection that sends nothing gets a 408 and is closed', async t => {
    const socket = await connectPlain(plainPort)
    const { data, ms } = await untilClosed(socket, Date.now())
    t.equal(parseResponse(data, true)?.status, 408)
    t.ok(Number.isFinite(ms), `the hub closed it (${ms} ms)`)
  })

  for (const { name, connect, auth } of ports) {
    t.test(`${name}: half the request headers, then nothing: 408 and the socket closed`, async t => {
      const socket = await connect()
      const start = Date.now()
      const closed = untilClosed(socket, start)
      socket.write('GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: kubernetes\r\nAccept: application/json\r\n')
      const { data, ms } = await closed
      const response = parseResponse(data, true)
      t.equal(response?.status, 408, data.toString('latin1').slice(0, 120))
      t.match(JSON.parse(response?.body ?? '{}'), { kind: 'Status', code: 408, reason: 'Timeout' })
      t.ok(ms >= headerTimeoutMs - 50, `not before the header timeout (${ms} ms)`)
      // Node's own check interval would be 30 s; the hub's is at most 1 s: closed by the hub, not
      // cut by untilClosed's give-up (20 s)
      t.ok(Number.isFinite(ms), 'the hub closed it')
    })

    t.test(`${name}: a body that stops short of its content-length: 408`, async t => {
      const socket = await connect()
      const closed = untilClosed(socket, Date.now())
      const target = `/api/v1/namespaces/default/configmaps?case=stalled-${name}`
      socket.write(requestText('POST', target, { ...auth, 'Content-Type': 'application/json', 'Content-Length': 100 }, '{"kind":"C', true))
      const { data } = await closed
      const response = parseResponse(data, true)
      t.equal(response?.status, 408, data.toString('latin1').slice(0, 120))
      t.match(JSON.parse(response?.body ?? '{}'), { kind: 'Status', code: 408, reason: 'Timeout' })
      t.match(response?.headers.connection, /close/i)
      t.equal(seen(h.simulator, target).length, 0, 'nothing half-read was forwarded')
    })

    t.test(`${name}: a body over maxRequestBytes: 413`, async t => {
      const big = 'x'.repeat(maxRequestBytes + 1)
      const declaredTarget = `/api/v1/namespaces/default/configmaps?case=declared-${name}`
      const socket = await connect()
      socket.write(requestText('POST', declaredTarget, { ...auth, 'Content-Type': 'application/json' }, big))
      const declared = await readResponse(socket)
      socket.destroy()
      t.equal(declared.status, 413)
      t.match(JSON.parse(declared.body), { kind: 'Status', code: 413, reason: 'RequestEntityTooLarge' })

      // chunked: no length to refuse up front, counted as it arrives
      const chunkedTarget = `/api/v1/namespaces/default/configmaps?case=chunked-${name}`
      const chunkedSocket = await connect()
      const chunked = `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`
      chunkedSocket.write(requestText('POST', chunkedTarget, { ...auth, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' }, chunked))
      const counted = await readResponse(chunkedSocket)
      chunkedSocket.destroy()
      t.equal(counted.status, 413)
      t.match(JSON.parse(counted.body), { kind: 'Status', code: 413, reason: 'RequestEntityTooLarge' })
      t.equal(seen(h.simulator, declaredTarget).length + seen(h.simulator, chunkedTarget).length, 0, 'neither was forwarded')
    })
  }
})

// --- the plain port's bind address ---------------------------------------------------------------------

t.test('the plain port refuses a non-loopback bind unless insecureAllowRemote', async t => {
  const simulator = await ApiServerSimulator.start()
  t.teardown(() => simulator.close())
  await t.rejects(startHub(hubConfig([simulator.url], { bindAddress: '0.0.0.0' }), { logger: quietLogger() }), /--bind-address 0\.0\.0\.0 is not loopback/)

  const hub = await startHub(hubConfig([simulator.url], { bindAddress: '0.0.0.0', insecureAllowRemote: true }), { logger: quietLogger() })
  t.teardown(() => hub.close())
  t.match(hub.proxyUrl, /^http:\/\/0\.0\.0\.0:\d+$/)
  const socket = await connectPlain(portOf(hub.proxyUrl))
  socket.write(requestText('GET', '/version'))
  const response = await readResponse(socket)
  socket.destroy()
  t.equal(response.status, 200)
  t.match(JSON.parse(response.body), { gitVersion: String })
})
