import t from 'tap'
import { X509Certificate, createPrivateKey } from 'node:crypto'
import * as x509 from '@peculiar/x509'
import { Agent, request } from 'undici'
import { createCertificateRequest } from '../certs/csr.ts'
import { certificateInfo } from '../certs/pem.ts'
import { nodeClientCertificate, nodeServingCertificate, requestCertificate, type ApiCaller } from '../certs/signing-request.ts'
import { createTestPki } from './helpers/pki.ts'
import { ApiServerSimulator, type SimulatorOptions } from './simulator/index.ts'
import { request as simRequest, watch } from './simulator/testclient.ts'

const csrPath = '/apis/certificates.k8s.io/v1/certificatesigningrequests'

async function sim(t: { teardown(fn: () => unknown): void }, options: SimulatorOptions = {}): Promise<ApiServerSimulator> {
  const s = await ApiServerSimulator.start(options)
  t.teardown(() => s.close())
  return s
}

/** An ApiCaller over undici: JSON in and out, TLS material and a bearer token when given. */
function caller(
  t: { teardown(fn: () => unknown): void },
  baseUrl: string,
  creds: { ca?: string; cert?: string; key?: string; token?: string } = {},
): ApiCaller {
  const dispatcher = new Agent({ connect: { ca: creds.ca, cert: creds.cert, key: creds.key } })
  t.teardown(() => dispatcher.close())
  return async (method, path, body) => {
    const headers: Record<string, string> = { accept: 'application/json' }
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (creds.token) headers.authorization = `Bearer ${creds.token}`
    const res = await request(baseUrl + path, { method, headers, dispatcher, body: body === undefined ? undefined : JSON.stringify(body) })
    const text = await res.body.text()
    return { statusCode: res.statusCode, body: text === '' ? undefined : JSON.parse(text) }
  }
}

async function waitFor<T>(check: () => T, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 5))
  }
}

/** The first CSR the simulator holds, once there is one. */
const firstCsr = (s: ApiServerSimulator) => waitFor(() => s.list('certificates.k8s.io/v1', 'CertificateSigningRequest')[0], 'a CSR')

const nodeRequest = () => createCertificateRequest({ commonName: 'system:node:edge-1', organizations: ['system:nodes'] })

t.test('auto-approved: the certificate has the asked subject and chains to the simulator signer', async t => {
  const s = await sim(t, { autoApproveCsr: true })
  const { csr, key } = await nodeRequest()
  const pem = await requestCertificate(caller(t, s.url), {
    csr,
    ...nodeClientCertificate,
    namePrefix: 'node-csr-',
    expirationSeconds: 3600,
    pollIntervalMs: 10,
  })

  const info = certificateInfo(pem)
  t.equal(info.subject, 'O=system:nodes, CN=system:node:edge-1')
  const cert = new X509Certificate(pem)
  const ca = new X509Certificate(s.signerCa.cert)
  t.ok(cert.checkIssued(ca) && cert.verify(ca.publicKey), 'signed by simulator.signerCa')
  t.ok(cert.checkPrivateKey(createPrivateKey(key)), 'for the requested key')
  t.equal(info.notAfter.getTime() - info.notBefore.getTime(), (3600 + 300) * 1000, 'expirationSeconds (backdated 5 minutes)')
  const leaf = new x509.X509Certificate(pem)
  t.same(leaf.getExtension(x509.ExtendedKeyUsageExtension)?.usages, [x509.ExtendedKeyUsage.clientAuth])
  t.equal(leaf.getExtension(x509.KeyUsagesExtension)?.usages, x509.KeyUsageFlags.digitalSignature)

  const [stored] = s.list('certificates.k8s.io/v1', 'CertificateSigningRequest')
  t.match(stored, {
    metadata: { name: /^node-csr-[a-z0-9]{5}$/ },
    spec: {
      signerName: nodeClientCertificate.signerName,
      usages: ['digital signature', 'client auth'],
      username: 'system:anonymous',
      groups: ['system:unauthenticated'],
      expirationSeconds: 3600,
    },
    status: { conditions: [{ type: 'Approved', status: 'True', reason: 'AutoApproved' }] },
  })
})

t.test('a serving certificate carries the requested SANs', async t => {
  const s = await sim(t, { autoApproveCsr: true })
  const { csr } = await createCertificateRequest({ commonName: 'system:node:edge-1', organizations: ['system:nodes'], dnsNames: ['edge-1'], ips: ['10.0.0.7'] })
  const pem = await requestCertificate(caller(t, s.url), { csr, ...nodeServingCertificate, namePrefix: 'serving-', pollIntervalMs: 10 })
  const info = certificateInfo(pem)
  t.same([info.dnsNames, info.ips], [['edge-1'], ['10.0.0.7']])
  t.ok(Math.abs(info.notAfter.getTime() - info.notBefore.getTime() - (365 * 86400 + 300) * 1000) < 2000, 'one year by default')
  t.same(new x509.X509Certificate(pem).getExtension(x509.ExtendedKeyUsageExtension)?.usages, [x509.ExtendedKeyUsage.serverAuth])
})

t.test('without auto-approval the flow waits for approveCsr; watchers see ADDED, approval, certificate', async t => {
  const s = await sim(t)
  const events = await watch(`${s.url}${csrPath}?watch=true&resourceVersion=${s.currentResourceVersion()}`)
  t.teardown(() => events.close())
  const { csr } = await nodeRequest()
  let settled = false
  const flow = requestCertificate(caller(t, s.url), { csr, ...nodeClientCertificate, namePrefix: 'node-csr-', pollIntervalMs: 10 }).finally(
    () => (settled = true),
  )
  const pending = await firstCsr(s)
  const name = pending.metadata.name
  const polls = () => s.requests.filter(r => r.method === 'GET' && r.url === `${csrPath}/${name}`).length
  await waitFor(() => polls() >= 3, 'polling')
  t.equal(settled, false, 'still waiting while nobody approves')

  const approved = s.approveCsr(name)
  t.match(approved.status.conditions, [{ type: 'Approved', status: 'True', reason: 'SimulatorApprove', lastUpdateTime: /Z$/ }])
  t.equal(certificateInfo(await flow).subject, 'O=system:nodes, CN=system:node:edge-1')

  const added = await events.next()
  const approval = await events.next()
  const signed = await events.next()
  t.match([added.type, approval.type, signed.type], ['ADDED', 'MODIFIED', 'MODIFIED'])
  t.equal(approval.object.status.certificate, undefined)
  t.ok(signed.object.status.certificate, 'the certificate arrives in its own MODIFIED')
  t.ok(Number(signed.object.metadata.resourceVersion) > Number(approval.object.metadata.resourceVersion))
})

t.test('denyCsr makes the flow throw with the message; Approved and Denied exclude each other', async t => {
  const s = await sim(t)
  const { csr } = await nodeRequest()
  const flow = requestCertificate(caller(t, s.url), { csr, ...nodeClientCertificate, namePrefix: 'node-csr-', pollIntervalMs: 10 })
  const pending = await firstCsr(s)
  s.denyCsr(pending.metadata.name, 'no new nodes today')
  await t.rejects(flow, /denied: SimulatorDeny: no new nodes today/)
  let refusal: unknown
  try {
    s.approveCsr(pending.metadata.name)
  } catch (err) {
    refusal = err
  }
  t.match(refusal, { status: { code: 422, reason: 'Invalid', message: /Approved and Denied conditions are mutually exclusive/ } })
})

t.test('the approval subresource over HTTP, as kubectl certificate approve uses it', async t => {
  const s = await sim(t)
  const discovery = await simRequest(`${s.url}/apis/certificates.k8s.io/v1`)
  t.same(
    discovery.json.resources.map((r: any) => r.name),
    ['certificatesigningrequests', 'certificatesigningrequests/approval', 'certificatesigningrequests/status'],
  )
  t.match(discovery.json.resources[0], { kind: 'CertificateSigningRequest', namespaced: false, shortNames: ['csr'] })

  const { csr } = await nodeRequest()
  const api = caller(t, s.url)
  const flow = requestCertificate(api, { csr, ...nodeClientCertificate, namePrefix: 'node-csr-', pollIntervalMs: 10 })
  const pending = await firstCsr(s)
  const conditions = [{ type: 'Approved', status: 'True', reason: 'KubectlApprove', message: 'This CSR was approved by kubectl certificate approve.' }]
  const put = await simRequest(`${s.url}${csrPath}/${pending.metadata.name}/approval`, {
    method: 'PUT',
    body: { ...pending, spec: { ...pending.spec, usages: ['client auth'] }, status: { conditions } },
  })
  t.equal(put.status, 200)
  t.match(put.json.status.conditions, conditions)
  t.same(put.json.spec.usages, pending.spec.usages, 'the approval changes only the conditions')
  t.ok(certificateInfo(await flow))
})

t.test('malformed requests are 422 Invalid; requests the signer refuses end Failed', async t => {
  const s = await sim(t, { autoApproveCsr: true })
  const api = caller(t, s.url)
  const { csr } = await nodeRequest()
  const post = (spec: Record<string, unknown>) =>
    api('POST', csrPath, { apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', metadata: { name: 'x' }, spec })
  const good = { request: Buffer.from(csr).toString('base64'), signerName: nodeClientCertificate.signerName, usages: ['client auth'] }
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ ...good, request: Buffer.from('garbage').toString('base64') }, 'spec.request', /PEM block type must be CERTIFICATE REQUEST/],
    [
      { ...good, request: Buffer.from('-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n').toString('base64') },
      'spec.request',
      /Invalid value/,
    ],
    [{ ...good, signerName: undefined }, 'spec.signerName', /Required value/],
    [{ ...good, signerName: 'no-domain' }, 'spec.signerName', /fully qualified/],
    [{ ...good, usages: [] }, 'spec.usages', /usages must be provided/],
    [{ ...good, usages: ['client auth', 'flying'] }, 'spec.usages[1]', /Unsupported value: "flying"/],
    [{ ...good, expirationSeconds: 599 }, 'spec.expirationSeconds', /less than 600 seconds/],
  ]
  for (const [spec, field, message] of cases) {
    const answer = await post(spec)
    t.equal(answer.statusCode, 422, field)
    t.match(answer.body, {
      kind: 'Status',
      reason: 'Invalid',
      message: `CertificateSigningRequest.certificates.k8s.io "x" is invalid: ${field}: `,
      details: { causes: [{ field }] },
    })
    t.match(answer.body.message, message)
  }
  await t.rejects(
    requestCertificate(api, { csr: 'garbage', ...nodeClientCertificate, namePrefix: 'bad-' }),
    /the apiserver answered 422: .*PEM block type must be CERTIFICATE REQUEST/,
  )

  const notANode = await createCertificateRequest({ commonName: 'system:node:edge-1', organizations: ['developers'] })
  await t.rejects(
    requestCertificate(api, { csr: notANode.csr, ...nodeClientCertificate, namePrefix: 'node-csr-', pollIntervalMs: 10 }),
    /failed: SignerValidationFailure: subject organization is not system:nodes/,
  )
  const noSans = await nodeRequest()
  await t.rejects(
    requestCertificate(api, { csr: noSans.csr, ...nodeServingCertificate, namePrefix: 'serving-', pollIntervalMs: 10 }),
    /DNS or IP subjectAltName is required/,
  )
})

t.test('over TLS: a bootstrap token creates the CSR, the issued client certificate then authenticates as the node', async t => {
  const pki = await createTestPki()
  const s = await sim(t, {
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    tokens: ['bootstrap-abcdef'],
    signerCa: pki.ca,
    autoApproveCsr: csr => csr.spec.username.startsWith('token:'),
  })
  t.equal(s.signerCa, pki.ca)
  const { csr, key } = await nodeRequest()
  const cert = await requestCertificate(caller(t, s.url, { ca: pki.ca.cert, token: 'bootstrap-abcdef' }), {
    csr,
    ...nodeClientCertificate,
    namePrefix: 'node-csr-',
    pollIntervalMs: 10,
  })
  const [stored] = s.list('certificates.k8s.io/v1', 'CertificateSigningRequest')
  t.match(stored.spec, { username: 'token:bootst', groups: ['system:authenticated'] }, 'spec.username is the authenticated requester')

  const asNode = caller(t, s.url, { ca: pki.ca.cert, cert, key })
  t.equal((await asNode('GET', '/api/v1/namespaces')).statusCode, 200)
  t.equal(s.requests.at(-1)?.user, 'system:node:edge-1', 'the request log names the certificate CN')
  t.equal((await caller(t, s.url, { ca: pki.ca.cert })('GET', '/api/v1/namespaces')).statusCode, 401)
  t.equal(s.requests.at(-1)?.user, 'system:anonymous')
  t.equal((await caller(t, s.url, { ca: pki.ca.cert, token: 'wrong' })('GET', '/api/v1/namespaces')).statusCode, 401)
  t.equal(s.requests.at(-1)?.user, undefined, 'refused credentials: no user')
})

t.test('polling survives an apiserver that refuses connections for a while; abort ends the wait', async t => {
  const s = await sim(t)
  const direct = caller(t, s.url)
  // every call that failed to reach the apiserver, by error code
  const failed: string[] = []
  const api: ApiCaller = async (method, path, body) => {
    try {
      return await direct(method, path, body)
    } catch (error) {
      failed.push((error as { code?: string }).code ?? String(error))
      throw error
    }
  }
  const { csr } = await nodeRequest()
  const flow = requestCertificate(api, { csr, ...nodeClientCertificate, namePrefix: 'node-csr-', pollIntervalMs: 10 })
  let settled = false
  flow.then(
    () => (settled = true),
    () => (settled = true),
  )
  const pending = await firstCsr(s)
  await s.setFault('refuse')
  await waitFor(() => failed.filter(code => code === 'ECONNREFUSED').length >= 3 || settled, 'three polls refused', 15_000)
  t.ok(failed.filter(code => code === 'ECONNREFUSED').length >= 3, `polls went on through the outage: ${failed.length} failed`)
  t.notOk(settled, 'and the flow still waits for the certificate')
  await s.setFault('none')
  s.approveCsr(pending.metadata.name)
  t.ok(certificateInfo(await flow), 'answered after the outage')

  const controller = new AbortController()
  const waiting = requestCertificate(api, { csr, ...nodeClientCertificate, namePrefix: 'node-csr-', pollIntervalMs: 10, signal: controller.signal })
  await waitFor(() => s.list('certificates.k8s.io/v1', 'CertificateSigningRequest').length === 2, 'the second CSR')
  controller.abort()
  await t.rejects(waiting, { name: 'AbortError' })
})

t.test('requestCertificate against a scripted caller: 5xx and network errors are retried, 4xx are not', async t => {
  const script: (() => { statusCode: number; body: any })[] = [
    () => ({ statusCode: 201, body: { metadata: { name: 'c1' } } }),
    () => ({ statusCode: 503, body: { message: 'etcd is down' } }),
    () => {
      throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
    },
    () => ({ statusCode: 200, body: { metadata: { name: 'c1' }, status: { certificate: Buffer.from('PEM').toString('base64') } } }),
  ]
  const calls: string[] = []
  const scripted: ApiCaller = async (method, path) => {
    calls.push(`${method} ${path}`)
    return script.shift()!()
  }
  t.equal(await requestCertificate(scripted, { csr: 'CSR', signerName: 'example.com/s', usages: ['client auth'], namePrefix: 'p-', pollIntervalMs: 1 }), 'PEM')
  t.same(calls, [`POST ${csrPath}`, ...Array(3).fill(`GET ${csrPath}/c1`)])

  const forbidden: ApiCaller = async () => ({
    statusCode: 403,
    body: { kind: 'Status', message: 'certificatesigningrequests is forbidden: User "x" cannot create' },
  })
  await t.rejects(
    requestCertificate(forbidden, { csr: 'CSR', signerName: 'example.com/s', usages: [], namePrefix: 'p-' }),
    /creating a CertificateSigningRequest: the apiserver answered 403: certificatesigningrequests is forbidden/,
  )
  let gets = 0
  const gone: ApiCaller = async method =>
    method === 'POST' ? { statusCode: 201, body: { metadata: { name: 'c2' } } } : (gets++, { statusCode: 404, body: { message: 'not found' } })
  await t.rejects(
    requestCertificate(gone, { csr: 'CSR', signerName: 'example.com/s', usages: [], namePrefix: 'p-', pollIntervalMs: 1 }),
    /reading CertificateSigningRequest c2: the apiserver answered 404/,
  )
  t.equal(gets, 1)
})
