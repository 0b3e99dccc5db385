// The node's identity over time: client certificates rotated on disk (as kubelet does), a client
// certificate bootstrapped by CSR, and a serving certificate the cluster signs, all against the
// simulator, which signs approved CSRs like kube-controller-manager.
import t from 'tap'
import { readFile, stat, writeFile } from 'node:fs/promises'
import { once } from 'node:events'
import path from 'node:path'
import tls from 'node:tls'
import { request } from 'undici'
import { ApiServerSimulator } from './simulator/index.ts'
import { startHub } from '../lib/hub.ts'
import type { Hub } from '../lib/hub.ts'
import { capturingLogger, eventually, hubConfig, quietLogger } from './helpers/hub.ts'
import { createTestPki, writeKubeconfig } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { createCertificateRequest } from '../certs/csr.ts'
import { nodeClientCertificate, requestCertificate } from '../certs/signing-request.ts'
import { certificateInfo } from '../certs/pem.ts'
import { issueCertificate } from '../certs/authority.ts'
import { generateKeyPair, privateKeyPem } from '../certs/keys.ts'
import * as x509 from '@peculiar/x509'
import { clientCertificateFile } from '../lib/certificates/credentials.ts'
import { servingCertificateFile } from '../lib/certificates/serving.ts'

const fast = { reloadIntervalMs: 100, csrPollIntervalMs: 50 }
const mode = async (file: string) => (await stat(file)).mode & 0o777

/** Who the simulator says the latest request to `path` (through the hub) authenticated as. */
function lastUser(simulator: ApiServerSimulator, pathPrefix: string): string | undefined {
  return simulator.requests.filter(r => r.url.startsWith(pathPrefix)).at(-1)?.user
}

async function get(hub: Hub, path: string): Promise<number> {
  const res = await request(`${hub.proxyUrl}${path}`)
  await res.body.dump()
  return res.statusCode
}

t.test('client credentials replaced on disk are used by the next request while a watch stays open', async t => {
  const pki = await createTestPki()
  const simulator = await ApiServerSimulator.start({
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    signerCa: pki.ca,
    autoApproveCsr: true,
  })
  const dir = tempDir(t, 'outpost-rotate-')
  const kubeconfig = await writeKubeconfig(dir, { server: simulator.url, ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key, inline: false })
  const hub = await startHub(hubConfig([], { kubeconfig }), { logger: quietLogger(), timing: fast })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })

  t.equal(await get(hub, '/api/v1/namespaces'), 200)
  t.equal(lastUser(simulator, '/api/v1/namespaces'), 'system:node:kind-worker2', 'the kubeconfig’s certificate')

  const watch = await request(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps?watch=true`)
  t.equal(watch.statusCode, 200)
  let events = ''
  watch.body.on('data', chunk => (events += chunk.toString()))

  // kubelet's rotation: a new key and certificate, written over the old files
  const { csr, key } = await createCertificateRequest({ commonName: 'system:node:rotated', organizations: ['system:nodes'] })
  const cert = await requestCertificate((method, p, body) => hub.upstream.callJson(method, p, body), {
    csr,
    ...nodeClientCertificate,
    namePrefix: 'test-',
    pollIntervalMs: 50,
  })
  await writeFile(path.join(dir, 'pki', 'client.crt'), cert)
  await writeFile(path.join(dir, 'pki', 'client.key'), key)

  await eventually(
    async () => (await get(hub, '/api/v1/namespaces')) === 200 && lastUser(simulator, '/api/v1/namespaces') === 'system:node:rotated',
    10_000,
    'the rotated certificate in use',
  )
  t.pass('the next request goes with the new certificate')

  simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after-rotation', namespace: 'default' }, data: {} })
  await eventually(() => events.includes('after-rotation'), 10_000, 'an event on the watch opened before the rotation')
  t.pass('the watch opened before the rotation is still delivering')
  const watches = simulator.requests.filter(r => r.url.startsWith('/api/v1/namespaces/default/configmaps?watch=true'))
  t.equal(watches.length, 1, 'and it was never re-opened')
  watch.body.destroy()
})

t.test('a rotation caught half-written keeps the credentials in use', async t => {
  const pki = await createTestPki()
  const other = await createTestPki()
  const simulator = await ApiServerSimulator.start({ tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true } })
  const dir = tempDir(t, 'outpost-halfway-')
  const kubeconfig = await writeKubeconfig(dir, { server: simulator.url, ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key, inline: false })
  const captured = capturingLogger()
  const hub = await startHub(hubConfig([], { kubeconfig }), { logger: captured.logger, timing: fast })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  // the certificate is new, the key not yet: they do not belong together
  await writeFile(path.join(dir, 'pki', 'client.crt'), other.client.cert)
  // the hub has re-read the files and made up its mind (either way)
  const decided = /does not match its key|node credentials changed on disk/
  await eventually(() => decided.test(captured.text()), 10_000, 'the hub to re-read the half-written rotation')
  t.match(
    captured.text(),
    /client certificate does not match its key \(a rotation half-written\?\); keeping the credentials in use/,
    'the mismatch is noticed and logged',
  )
  t.notMatch(captured.text(), /node credentials changed on disk/, 'and the pair is not taken')
  t.equal(await get(hub, '/api/v1/namespaces'), 200, 'requests still authenticate')
  t.equal(lastUser(simulator, '/api/v1/namespaces'), 'system:node:kind-worker2', 'with the certificate and key that match')
})

t.test('bootstrap: the client certificate comes by CSR, is stored 0600, used, and kept across restarts', async t => {
  const pki = await createTestPki()
  const bootstrapToken = 'abcdef.0123456789abcdef'
  const simulator = await ApiServerSimulator.start({
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    tokens: [bootstrapToken],
    signerCa: pki.ca,
    autoApproveCsr: true,
  })
  t.teardown(() => simulator.close())
  const bootstrapKubeconfig = await writeKubeconfig(tempDir(t, 'outpost-bootstrap-'), {
    server: simulator.url,
    ca: pki.ca.cert,
    token: bootstrapToken,
    inline: true,
  })
  const certDir = path.join(tempDir(t, 'outpost-certs-'), 'pki')
  const config = hubConfig([], { bootstrapKubeconfig, certDir })

  const captured = capturingLogger()
  const hub = await startHub(config, { logger: captured.logger, timing: fast })
  const csrs = simulator.list('certificates.k8s.io/v1', 'CertificateSigningRequest')
  t.equal(csrs.length, 1, 'one CSR')
  t.match(csrs[0].spec, { signerName: 'kubernetes.io/kube-apiserver-client-kubelet', username: 'token:abcdef' }, 'made with the bootstrap token')
  t.equal(await get(hub, '/api/v1/pods'), 200)
  t.equal(lastUser(simulator, '/api/v1/pods'), 'system:node:kind-worker2', 'requests go as the node, with the issued certificate')
  t.notOk(
    simulator.requests.filter(r => r.url.startsWith('/api/v1/pods')).some(r => r.headers.authorization),
    'the bootstrap token is not used past the CSR',
  )
  const file = path.join(certDir, clientCertificateFile)
  t.equal(await mode(certDir), 0o700, 'cert dir 0700')
  t.equal(await mode(file), 0o600, 'certificate and key 0600')
  const stored = await readFile(file, 'utf8')
  t.match(certificateInfo(stored).subject, /CN=system:node:kind-worker2/)
  await hub.close()
  const logged = captured.text()
  t.match(logged, /node client certificate issued/, 'the bootstrap is logged')
  t.notOk(logged.includes(bootstrapToken) || logged.includes(bootstrapToken.split('.')[1]), 'but never the bootstrap token')
  const pemLines = stored.split('\n').filter(l => l.length > 40 && !l.startsWith('-----'))
  t.notOk(
    pemLines.some(l => logged.includes(l)),
    'nor the certificate or its key',
  )

  const again = await startHub({ ...config, cacheDir: tempDir(t, 'outpost-cache-') }, { logger: quietLogger(), timing: fast })
  t.teardown(() => again.close())
  t.equal(simulator.list('certificates.k8s.io/v1', 'CertificateSigningRequest').length, 1, 'a restart uses the stored certificate: no second CSR')
  t.equal(await get(again, '/api/v1/pods'), 200)
  t.equal(lastUser(simulator, '/api/v1/pods'), 'system:node:kind-worker2')
})

t.test('serving certificate by CSR: readyz says what it waits for; once approved the HTTPS port serves a cluster-signed certificate', async t => {
  const simulator = await ApiServerSimulator.start()
  simulator.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'kind-worker2', labels: { 'apps.openyurt.io/nodepool': 'shanghai' } } })
  const certDir = tempDir(t, 'outpost-serving-')
  const hub = await startHub(hubConfig([simulator.url], { securePort: 0, servingCert: 'csr', certDir }), { logger: quietLogger(), timing: fast })
  t.teardown(async () => {
    await hub.close()
    await simulator.close()
  })
  const readyz = async () => {
    const res = await request(`${hub.adminUrl}/v1/readyz`)
    return { status: res.statusCode, text: await res.body.text() }
  }
  const waiting = await eventually(
    async () => {
      const r = await readyz()
      return r.status === 503 && /CSR/.test(r.text) ? r.text : ''
    },
    10_000,
    'readyz naming the CSR',
  )
  t.match(waiting, /kubelet-serving/)

  const csr = await eventually(() => simulator.list('certificates.k8s.io/v1', 'CertificateSigningRequest')[0], 10_000, 'the CSR')
  t.match(csr.spec, { signerName: 'kubernetes.io/kubelet-serving' })
  simulator.approveCsr(csr.metadata.name)
  const url = new URL(await hub.secureUrl!)

  const socket = tls.connect({ host: '127.0.0.1', port: Number(url.port), ca: simulator.signerCa.cert, servername: 'kind-worker2' })
  await once(socket, 'secureConnect')
  t.ok(socket.authorized, 'trusted by whoever trusts the cluster CA, under the node name')
  const served = new x509.X509Certificate(socket.getPeerCertificate(true).raw)
  socket.destroy()
  const sanText = (names: x509.GeneralNames | undefined) => (names?.items ?? []).map(n => n.value)
  t.ok(sanText(served.getExtension(x509.SubjectAlternativeNameExtension)?.names).includes('kind-worker2'))
  t.notOk(
    sanText(served.getExtension(x509.SubjectAlternativeNameExtension)?.names).some(name => name.startsWith('kubernetes')),
    'the cluster signer is never asked for the apiserver names: an approved node could impersonate the apiserver to pods',
  )
  const asked = new x509.Pkcs10CertificateRequest(Buffer.from(csr.spec.request, 'base64').toString())
  const askedSans = asked.extensions.find(e => e.type === '2.5.29.17')
  t.ok(askedSans, 'the CSR asks for names')
  t.notOk(
    sanText(new x509.SubjectAlternativeNameExtension(askedSans!.rawData).names).some(name => name.startsWith('kubernetes')),
    'nor does the CSR ask for them',
  )
  t.equal((await readyz()).status, 200, 'ready once it serves')
  t.equal(await mode(path.join(certDir, servingCertificateFile)), 0o600)
})

t.test('bootstrap: a stored client certificate past 80 % of its life is renewed by CSR as the node, and used', async t => {
  const pki = await createTestPki()
  const simulator = await ApiServerSimulator.start({
    tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true },
    tokens: ['abcdef.0123456789abcdef'],
    signerCa: pki.ca,
    autoApproveCsr: true,
  })
  t.teardown(() => simulator.close())
  const bootstrapKubeconfig = await writeKubeconfig(tempDir(t, 'outpost-bootstrap-'), {
    server: simulator.url,
    ca: pki.ca.cert,
    token: 'abcdef.0123456789abcdef',
    inline: true,
  })
  const certDir = tempDir(t, 'outpost-certs-')
  // nine days into a ten-day certificate: still valid, due for renewal
  const keys = await generateKeyPair()
  const day = 24 * 60 * 60 * 1000
  const old = await issueCertificate(pki.ca, {
    subject: new x509.Name([{ O: ['system:nodes'] }, { CN: ['system:node:kind-worker2'] }]),
    publicKey: keys.publicKey,
    notBefore: new Date(Date.now() - 9 * day),
    notAfter: new Date(Date.now() + day),
    keyUsages: x509.KeyUsageFlags.digitalSignature,
    extendedKeyUsages: [x509.ExtendedKeyUsage.clientAuth],
  })
  const file = path.join(certDir, clientCertificateFile)
  await writeFile(file, old + (await privateKeyPem(keys.privateKey)), { mode: 0o600 })

  const hub = await startHub(hubConfig([], { bootstrapKubeconfig, certDir }), { logger: quietLogger(), timing: fast })
  t.teardown(() => hub.close())
  const csr = await eventually(() => simulator.list('certificates.k8s.io/v1', 'CertificateSigningRequest')[0], 10_000, 'a renewal CSR')
  t.equal(csr.spec.username, 'system:node:kind-worker2', 'asked for as the node, with the certificate being renewed')
  const renewed = await eventually(
    async () => {
      const pem = await readFile(file, 'utf8')
      return pem.startsWith(old) ? '' : pem
    },
    10_000,
    'the new certificate stored',
  )
  // (the test CA lives a day, which caps the new certificate's end; its start shows it is new)
  t.ok(certificateInfo(renewed).notBefore.getTime() > Date.now() - day, 'a certificate issued now')
  t.equal(await get(hub, '/api/v1/pods'), 200, 'requests go on with the new certificate')
  t.equal(lastUser(simulator, '/api/v1/pods'), 'system:node:kind-worker2')
})
