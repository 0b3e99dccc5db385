import t from 'tap'
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { once } from 'node:events'
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import tls from 'node:tls'
import * as x509 from '@peculiar/x509'
import { certificateInfo, renewalTime, writePemFile } from '../certs/pem.ts'
import { ensureSelfSignedServing } from '../certs/selfsigned.ts'
import { createCertificateRequest } from '../certs/csr.ts'

const dnsNames = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local']
const ips = ['127.0.0.1', '10.96.0.1']
const dayMs = 24 * 60 * 60 * 1000

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-certs-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

const modeOf = async (file: string) => (await stat(file)).mode & 0o777

/** A TLS server with `cert`/`key`; resolves the handshake of a client trusting `ca`, or rejects with its error. */
async function withTlsServer(t: { teardown(fn: () => unknown): void }, cert: string, key: string): Promise<(ca: string, servername?: string) => Promise<void>> {
  const server = tls.createServer({ cert, key }, socket => socket.end())
  server.on('tlsClientError', () => {})
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise(resolve => server.close(resolve)))
  const port = (server.address() as { port: number }).port
  return async (ca, servername) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, servername })
    try {
      await once(socket, 'secureConnect')
    } finally {
      socket.destroy()
    }
  }
}

t.test('a new cert dir gets a CA and a serving certificate that TLS clients accept for every SAN', async t => {
  const certDir = path.join(await tempDir(t), 'pki', 'outpost')
  const served = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips })
  t.equal(served.renewed, true)
  t.same(served.info.dnsNames, dnsNames)
  t.same(served.info.ips, ips)
  t.equal(served.info.subject, 'CN=outpost@edge-1')
  t.equal(certificateInfo(served.ca).subject, 'CN=outpost-ca@edge-1')
  t.match(served.key, /^-----BEGIN PRIVATE KEY-----\n/)

  t.equal(await modeOf(certDir), 0o700, 'cert dir 0700')
  for (const [name, mode] of [
    ['ca.key', 0o600],
    ['serving.key', 0o600],
    ['ca.crt', 0o644],
    ['serving.crt', 0o644],
  ] as const) {
    t.equal(await modeOf(path.join(certDir, name)), mode, `${name} ${mode.toString(8)}`)
  }
  t.equal(await readFile(path.join(certDir, 'serving.crt'), 'utf8'), served.cert)
  t.equal(await readFile(path.join(certDir, 'ca.crt'), 'utf8'), served.ca)

  const handshake = await withTlsServer(t, served.cert, served.key)
  for (const name of dnsNames) await t.resolves(handshake(served.ca, name), `servername ${name}`)
  await t.resolves(handshake(served.ca), '127.0.0.1 by IP (the IP SAN)')
  await t.rejects(handshake(served.ca, 'kubernetes.example.com'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }, 'a name outside the SANs')
  const other = await ensureSelfSignedServing({ certDir: path.join(await tempDir(t), 'other'), nodeName: 'edge-2', dnsNames, ips })
  await t.rejects(handshake(other.ca, 'kubernetes'), { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' }, 'another CA is not trusted')
})

t.test('certificate contents: CA and serving extensions, validity, serial numbers', async t => {
  const now = new Date('2030-01-01T00:00:00Z')
  const served = await ensureSelfSignedServing({ certDir: path.join(await tempDir(t), 'pki'), nodeName: 'edge-1', dnsNames, ips, now })
  const ca = new x509.X509Certificate(served.ca)
  const leaf = new x509.X509Certificate(served.cert)

  const caConstraints = ca.getExtension(x509.BasicConstraintsExtension)
  t.ok(caConstraints?.ca && caConstraints.critical, 'CA: basicConstraints CA=true, critical')
  t.equal(ca.getExtension(x509.KeyUsagesExtension)?.usages, x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign)
  t.equal(ca.notAfter.getTime() - ca.notBefore.getTime(), 3650 * dayMs + 5 * 60 * 1000, 'CA: 10 years (plus the clock skew allowance)')

  t.equal(leaf.getExtension(x509.BasicConstraintsExtension)?.ca, false)
  t.equal(leaf.getExtension(x509.KeyUsagesExtension)?.usages, x509.KeyUsageFlags.digitalSignature)
  t.same(leaf.getExtension(x509.ExtendedKeyUsageExtension)?.usages, [x509.ExtendedKeyUsage.serverAuth])
  t.equal(leaf.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId, ca.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId, 'AKI = the CA SKI')
  t.ok(leaf.getExtension(x509.SubjectKeyIdentifierExtension), 'SKI')
  t.equal(leaf.notBefore.getTime(), now.getTime() - 5 * 60 * 1000, 'backdated 5 minutes')
  t.equal(leaf.notAfter.getTime(), now.getTime() + 365 * dayMs, '1 year')
  t.ok(await leaf.verify({ publicKey: ca.publicKey, signatureOnly: true }), 'signed by the CA')
  for (const cert of [ca, leaf]) t.match(cert.serialNumber, /^[0-7][0-9a-f]{31}$/, 'random positive serial number')
  t.not(ca.serialNumber, leaf.serialNumber)
})

t.test('kept while fresh, re-issued near expiry, on a missing SAN and over a corrupted file', async t => {
  const certDir = path.join(await tempDir(t), 'pki')
  const start = new Date()
  const first = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips, now: start })

  const again = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips, now: new Date(start.getTime() + 100 * dayMs) })
  t.equal(again.renewed, false, 'a fresh certificate is kept')
  t.equal(again.cert, first.cert, 'same bytes')
  t.equal(again.key, first.key)

  const renewAt = renewalTime(first.info)
  t.equal(renewAt.getTime(), first.info.notBefore.getTime() + 0.8 * (first.info.notAfter.getTime() - first.info.notBefore.getTime()))
  const late = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips, now: new Date(renewAt.getTime() + 1000) })
  t.equal(late.renewed, true, 'past its renewal time: re-issued')
  t.equal(late.renewReason, 'due for renewal')
  t.not(late.cert, first.cert)
  t.not(late.key, first.key, 'with a new key')
  t.equal(late.ca, first.ca, 'by the same CA')

  const wider = await ensureSelfSignedServing({
    certDir,
    nodeName: 'edge-1',
    dnsNames: [...dnsNames, 'outpost.local'],
    ips,
    now: new Date(renewAt.getTime() + 2000),
  })
  t.equal(wider.renewed, true, 'a requested DNS name it lacks: re-issued')
  t.match(wider.renewReason, /outpost\.local/)
  t.ok(wider.info.dnsNames.includes('outpost.local'))
  const withIp = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips: [...ips, '::1'], now: new Date(renewAt.getTime() + 3000) })
  t.equal(withIp.renewReason, 'lacks the IP address ::1')

  await writeFile(path.join(certDir, 'serving.crt'), '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n')
  const repaired = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips })
  t.equal(repaired.renewed, true, 'a corrupted serving.crt is replaced')
  t.equal(repaired.ca, first.ca)
  t.equal(new X509Certificate(await readFile(path.join(certDir, 'serving.crt'))).checkPrivateKey(createPrivateKey(repaired.key)), true)

  const otherKey = await createCertificateRequest({ commonName: 'x' })
  await writeFile(path.join(certDir, 'serving.key'), otherKey.key)
  t.equal((await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips })).renewReason, 'does not match its key')
  t.same((await readdir(certDir)).sort(), ['ca.crt', 'ca.key', 'serving.crt', 'serving.key'], 'no temp files left behind')
})

t.test('a lost CA is replaced and the serving certificate with it; modes too wide are narrowed', async t => {
  const certDir = path.join(await tempDir(t), 'pki')
  await mkdir(certDir, { mode: 0o755 })
  await chmod(certDir, 0o755)
  const first = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips })
  t.equal(await modeOf(certDir), 0o700, 'an existing 0755 dir is narrowed to 0700')

  await chmod(path.join(certDir, 'serving.key'), 0o644)
  const kept = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips })
  t.equal(kept.renewed, false)
  t.equal(await modeOf(path.join(certDir, 'serving.key')), 0o600, 'a kept key readable by others is narrowed to 0600')

  await writeFile(path.join(certDir, 'ca.key'), 'garbage')
  const replaced = await ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips })
  t.not(replaced.ca, first.ca, 'an unusable CA is replaced')
  t.equal(replaced.renewed, true)
  t.equal(replaced.renewReason, 'not signed by the CA')

  await t.rejects(ensureSelfSignedServing({ certDir, nodeName: 'edge-1', dnsNames, ips: ['not-an-ip'] }), /not an IP address/)
})

t.test('certificateInfo reads the first certificate of a bundle; writePemFile is atomic with the asked mode', async t => {
  const dir = await tempDir(t)
  const served = await ensureSelfSignedServing({ certDir: path.join(dir, 'pki'), nodeName: 'edge-1', dnsNames, ips })
  const bundle = served.key + served.cert + served.ca
  t.equal(certificateInfo(bundle).subject, 'CN=outpost@edge-1', 'keys skipped, first certificate read')
  t.equal(certificateInfo(Buffer.from(served.ca)).subject, 'CN=outpost-ca@edge-1')
  t.throws(() => certificateInfo(served.key), /no CERTIFICATE/)
  t.throws(() => renewalTime(served.info, 1.5), RangeError)

  const file = path.join(dir, 'new', 'deeper', 'client.crt')
  await writePemFile(file, served.cert, 0o644)
  t.equal(await readFile(file, 'utf8'), served.cert)
  t.equal(await modeOf(file), 0o644)
  t.equal(await modeOf(path.dirname(file)), 0o700, 'a missing directory is created 0700')
  await writePemFile(file, served.ca, 0o600)
  t.equal(await readFile(file, 'utf8'), served.ca, 'replaced')
  t.equal(await modeOf(file), 0o600)
  t.same(await readdir(path.dirname(file)), ['client.crt'], 'no temp file left')
})
