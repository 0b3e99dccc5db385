// Test PKI: a CA, a server certificate for 127.0.0.1/localhost and a kubelet-style client
// certificate (CN system:node:kind-worker2, O system:nodes), ECDSA P-256, as PEM strings Node's tls
// accepts (keys PKCS#8). Plus a kubeconfig writer that puts the material inline or in files.

import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import * as x509 from '@peculiar/x509'
import { stringify } from 'yaml'

export interface Pem {
  cert: string
  key: string
}

export interface TestPki {
  ca: Pem
  server: Pem
  client: Pem
}

const crypto = globalThis.crypto
x509.cryptoProvider.set(crypto)

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }

let serial = 1
function nextSerial(): string {
  // positive, unique within a process
  return (serial++).toString(16).padStart(4, '0')
}

async function keyPair(): Promise<CryptoKeyPair> {
  return (await crypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as CryptoKeyPair
}

/** PEM ending in a newline, so bundles can be made by concatenation */
function withNewline(pem: string): string {
  return pem.endsWith('\n') ? pem : `${pem}\n`
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const pkcs8 = await crypto.subtle.exportKey('pkcs8', key)
  return withNewline(x509.PemConverter.encode(pkcs8, 'PRIVATE KEY'))
}

function validity(): { notBefore: Date; notAfter: Date } {
  const now = Date.now()
  return { notBefore: new Date(now - 60 * 60 * 1000), notAfter: new Date(now + 24 * 60 * 60 * 1000) }
}

export async function createTestPki(): Promise<TestPki> {
  const caKeys = await keyPair()
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name: 'CN=outpost-test-ca',
    ...validity(),
    signingAlgorithm: algorithm,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  })

  const issue = (subject: string, extensions: x509.Extension[]) => issueFrom(caCert, caKeys.privateKey, new x509.Name(subject), extensions)

  const server = await issue('CN=localhost', [
    new x509.SubjectAlternativeNameExtension([
      { type: 'ip', value: '127.0.0.1' },
      { type: 'dns', value: 'localhost' },
    ]),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
  ])
  const client = await issue('CN=system:node:kind-worker2, O=system:nodes', [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth])])

  return {
    ca: { cert: withNewline(caCert.toString('pem')), key: await privateKeyPem(caKeys.privateKey) },
    server,
    client,
  }
}

export interface KubeconfigSpec {
  server: string
  /** CA certificate, PEM */
  ca?: string
  /** client certificate and key, PEM */
  cert?: string
  key?: string
  token?: string
  /** true: `*-data` fields and `token`; false: files next to the kubeconfig, referenced by relative path, and `tokenFile` */
  inline: boolean
}

/** Writes `<dir>/kubeconfig` (plus, unless inline, its files under `<dir>/pki/`) and returns its path. */
export async function writeKubeconfig(dir: string, spec: KubeconfigSpec): Promise<string> {
  const cluster: Record<string, unknown> = { server: spec.server }
  const user: Record<string, unknown> = {}
  const b64 = (pem: string): string => Buffer.from(pem).toString('base64')

  if (spec.inline) {
    if (spec.ca) cluster['certificate-authority-data'] = b64(spec.ca)
    if (spec.cert) user['client-certificate-data'] = b64(spec.cert)
    if (spec.key) user['client-key-data'] = b64(spec.key)
    if (spec.token) user.token = spec.token
  } else {
    await mkdir(path.join(dir, 'pki'), { recursive: true })
    const put = async (name: string, content: string, mode = 0o600): Promise<string> => {
      await writeFile(path.join(dir, 'pki', name), content, { mode })
      return path.join('pki', name) // relative: resolved against the kubeconfig's directory
    }
    if (spec.ca) cluster['certificate-authority'] = await put('ca.crt', spec.ca, 0o644)
    if (spec.cert) user['client-certificate'] = await put('client.crt', spec.cert, 0o644)
    if (spec.key) user['client-key'] = await put('client.key', spec.key)
    if (spec.token) user.tokenFile = await put('token', `${spec.token}\n`)
  }

  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'outpost',
    clusters: [{ name: 'test', cluster }],
    users: [{ name: 'node', user }],
    contexts: [{ name: 'outpost', context: { cluster: 'test', user: 'node' } }],
    preferences: {},
  }
  await mkdir(dir, { recursive: true })
  const file = path.join(dir, 'kubeconfig')
  await writeFile(file, stringify(config), { mode: 0o600 })
  return file
}

/**
 * A client certificate of `ca` (a CA from createTestPki) for any subject: a node's
 * (`system:node:<name>`, O `system:nodes`), or anything else a test presents to a port that must
 * refuse it.
 */
export async function issueClientCertificate(ca: Pem, commonName: string, organizations: string[] = []): Promise<Pem> {
  const caCert = new x509.X509Certificate(ca.cert)
  const caKey = await crypto.subtle.importKey('pkcs8', x509.PemConverter.decodeFirst(ca.key), algorithm, false, ['sign'])
  const subject = new x509.Name([{ CN: [commonName] }, ...(organizations.length > 0 ? [{ O: organizations }] : [])])
  return issueFrom(caCert, caKey, subject, [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth])])
}

/** A leaf certificate of the CA for `subject`, with a fresh key: the extensions every leaf has, and these. */
async function issueFrom(caCert: x509.X509Certificate, caKey: CryptoKey, subject: x509.Name, extensions: x509.Extension[]): Promise<Pem> {
  const keys = await keyPair()
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: nextSerial(),
    subject,
    issuer: caCert.subject,
    ...validity(),
    signingAlgorithm: algorithm,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
      ...extensions,
    ],
  })
  return { cert: withNewline(cert.toString('pem')), key: await privateKeyPem(keys.privateKey) }
}
