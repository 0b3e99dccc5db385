// The hub's own HTTPS serving certificate: a private CA kept next to it in certDir, and a serving
// certificate for the names local clients use to reach the apiserver (kubernetes.default.svc,
// the Service IP, 127.0.0.1). Re-running on every start is cheap: what is usable is kept as is.

import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto'
import { chmod, mkdir, readFile, stat } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import type { CertificateAndKey } from './authority.ts'
import { certificateInfo, defaultRenewFraction, renewalTime, writePemFile, type CertificateInfo } from './pem.ts'

export interface ServingCertificate {
  /** the serving certificate, PEM (the leaf only: clients trust `ca`) */
  cert: string
  /** its PKCS#8 PEM key */
  key: string
  /** the CA certificate, PEM */
  ca: string
  info: CertificateInfo
  /** true when the serving certificate was issued by this call */
  renewed: boolean
  /** why it was issued (missing, unreadable, lacks a SAN, due for renewal, …) */
  renewReason?: string
}

export interface SelfSignedOptions {
  certDir: string
  nodeName: string
  dnsNames: string[]
  ips: string[]
  now?: Date
  /** serving certificate lifetime (default 365) */
  validityDays?: number
  /** re-issue at this fraction of the serving certificate's lifetime (default 0.8) */
  renewFraction?: number
}

const dayMs = 24 * 60 * 60 * 1000
const caValidityDays = 3650

interface LoadedPair {
  pem: CertificateAndKey
  cert: X509Certificate
  key: KeyObject
}

/**
 * Loads <certDir>/ca.crt, ca.key, serving.crt, serving.key; creates what is missing: a private CA
 * (10 years, CN "outpost-ca@<node>") and a serving certificate (1 year) signed by it, with SANs
 * for every given DNS name and IP. The serving cert is re-issued (same CA) when it is missing,
 * unreadable, does not match the key, does not chain to the CA, lacks a requested SAN, or `now` is past its renewal time.
 * certDir is created 0700 (and chmod-ed to 0700 if it exists with wider mode); keys are 0600.
 * The CA itself is replaced only when it is unusable (missing, unreadable, not matching its key)
 * or would expire before a serving certificate issued now.
 */
export async function ensureSelfSignedServing(options: SelfSignedOptions): Promise<ServingCertificate> {
  const now = options.now ?? new Date()
  const validityMs = (options.validityDays ?? 365) * dayMs
  const fraction = options.renewFraction ?? defaultRenewFraction
  for (const ip of options.ips) if (net.isIP(ip) === 0) throw new Error(`not an IP address: ${JSON.stringify(ip)}`)
  const file = (name: string) => path.join(options.certDir, name)
  await mkdir(options.certDir, { recursive: true, mode: 0o700 })
  await narrowMode(options.certDir, 0o700)

  let ca = await loadPair(file('ca.crt'), file('ca.key'))
  // the X.509 library is loaded only to issue: a restart with usable files never pays its memory
  const issuing = async () => ({ x509: await import('@peculiar/x509'), ...(await import('./authority.ts')), ...(await import('./keys.ts')) })
  if (!ca || !ca.cert.ca || !ca.cert.checkPrivateKey(ca.key) || new Date(ca.cert.validTo).getTime() < now.getTime() + validityMs) {
    const { createCertificateAuthority, clockSkewAllowanceMs } = await issuing()
    const created = await createCertificateAuthority({
      commonName: `outpost-ca@${options.nodeName}`,
      notBefore: new Date(now.getTime() - clockSkewAllowanceMs),
      notAfter: new Date(now.getTime() + caValidityDays * dayMs),
    })
    await writePemFile(file('ca.key'), created.key, 0o600)
    await writePemFile(file('ca.crt'), created.cert, 0o644)
    ca = parsePair(created)
  } else {
    await narrowMode(file('ca.key'), 0o600)
  }

  const serving = await loadPair(file('serving.crt'), file('serving.key'))
  const problem = servingProblem(serving, ca.cert, options, now, fraction)
  if (!problem && serving) {
    await narrowMode(file('serving.key'), 0o600)
    return { ...serving.pem, ca: ca.pem.cert, info: certificateInfo(serving.pem.cert), renewed: false }
  }

  const { x509, generateKeyPair, privateKeyPem, issueCertificate, clockSkewAllowanceMs } = await issuing()
  const keys = await generateKeyPair()
  const cert = await issueCertificate(ca.pem, {
    subject: new x509.Name([{ CN: [`outpost@${options.nodeName}`] }]),
    publicKey: keys.publicKey,
    notBefore: new Date(now.getTime() - clockSkewAllowanceMs),
    notAfter: new Date(now.getTime() + validityMs),
    subjectAltNames: [...options.dnsNames.map(value => ({ type: 'dns' as const, value })), ...options.ips.map(value => ({ type: 'ip' as const, value }))],
    keyUsages: x509.KeyUsageFlags.digitalSignature,
    extendedKeyUsages: [x509.ExtendedKeyUsage.serverAuth],
  })
  const key = await privateKeyPem(keys.privateKey)
  // key first: a crash between the two writes leaves a mismatch, which the next start re-issues
  await writePemFile(file('serving.key'), key, 0o600)
  await writePemFile(file('serving.crt'), cert, 0o644)
  return { cert, key, ca: ca.pem.cert, info: certificateInfo(cert), renewed: true, renewReason: problem }
}

/** Why the serving certificate must be (re-)issued, or undefined when it is good to keep. */
function servingProblem(serving: LoadedPair | undefined, ca: X509Certificate, options: SelfSignedOptions, now: Date, fraction: number): string | undefined {
  if (!serving) return 'missing or unreadable'
  const { cert, key } = serving
  if (!cert.checkPrivateKey(key)) return 'does not match its key'
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return 'not signed by the CA'
  const missingDns = options.dnsNames.find(name => cert.checkHost(name, { subject: 'never', wildcards: false }) === undefined)
  if (missingDns !== undefined) return `lacks the DNS name ${missingDns}`
  const missingIp = options.ips.find(ip => cert.checkIP(ip) === undefined)
  if (missingIp !== undefined) return `lacks the IP address ${missingIp}`
  const notBefore = new Date(cert.validFrom)
  if (now < notBefore) return 'not valid yet'
  if (now >= renewalTime({ notBefore, notAfter: new Date(cert.validTo) }, fraction)) return 'due for renewal'
  return undefined
}

/** Both files parsed, or undefined when either is missing or does not parse. */
async function loadPair(certFile: string, keyFile: string): Promise<LoadedPair | undefined> {
  const [cert, key] = await Promise.all([readIfExists(certFile), readIfExists(keyFile)])
  if (cert === undefined || key === undefined) return undefined
  try {
    return parsePair({ cert, key })
  } catch {
    return undefined
  }
}

function parsePair(pem: CertificateAndKey): LoadedPair {
  return { pem, cert: new X509Certificate(pem.cert), key: createPrivateKey(pem.key) }
}

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

/** chmod to `mode` when group or others have any access (files written elsewhere, old installs). */
async function narrowMode(file: string, mode: 0o700 | 0o600): Promise<void> {
  if (((await stat(file)).mode & 0o077) !== 0) await chmod(file, mode)
}
