// What the node's client credentials and the HTTPS port's certificate share: certificates got by
// CSR and kept with their key in one 0600 PEM file (kubelet's layout), and the timer loop that
// renews them at 80 % of their lifetime.
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { certificateInfo, renewalTime, writePemFile } from '../../certs/pem.ts'
import type { CertificateInfo } from '../../certs/pem.ts'
import { requestCertificate } from '../../certs/signing-request.ts'
import type { ApiCaller, SigningProfile } from '../../certs/signing-request.ts'

// setTimeout holds at most ~24.8 days; anything further away is looked at again at least this often.
const maxTimerMs = 60 * 60 * 1000
const retryMs = 30_000

/** Whether a certificate and key belong together; a rotation caught half-written does not. */
export function certificateMatchesKey(cert: Buffer, key: Buffer): boolean {
  try {
    return new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))
  } catch {
    return false
  }
}

/** A PEM file with the certificate (chain) and its key → the two parts, or undefined when unusable or expired. */
export async function readCertificateAndKey(file: string, now: Date): Promise<{ cert: Buffer; key: Buffer } | undefined> {
  let pem: string
  try {
    pem = await readFile(file, 'utf8')
  } catch {
    return undefined
  }
  const blocks = pem.match(/-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----\n?/g) ?? []
  const cert = Buffer.from(blocks.filter(b => b.includes('BEGIN CERTIFICATE')).join(''))
  const key = Buffer.from(blocks.filter(b => /BEGIN [A-Z ]*PRIVATE KEY/.test(b)).join(''))
  if (cert.length === 0 || key.length === 0 || !certificateMatchesKey(cert, key)) return undefined
  return certificateInfo(cert).notAfter > now ? { cert, key } : undefined
}

export interface NodeCertificateRequest {
  nodeName: string
  profile: SigningProfile
  /** metadata.generateName of the CertificateSigningRequest */
  namePrefix: string
  /** where the certificate and its key are kept */
  file: string
  dnsNames?: string[]
  ips?: string[]
  pollIntervalMs: number
  signal: AbortSignal
}

/** A certificate for this node (CN system:node:<node>, O system:nodes) by CSR, stored before it is returned. */
export async function requestNodeCertificate(api: ApiCaller, request: NodeCertificateRequest): Promise<{ cert: Buffer; key: Buffer }> {
  // the X.509 library is loaded only to make a request (see certs/pem.ts)
  const { createCertificateRequest } = await import('../../certs/csr.ts')
  const { csr, key } = await createCertificateRequest({
    commonName: `system:node:${request.nodeName}`,
    organizations: ['system:nodes'],
    dnsNames: request.dnsNames,
    ips: request.ips,
  })
  const cert = await requestCertificate(api, {
    csr,
    ...request.profile,
    namePrefix: request.namePrefix,
    pollIntervalMs: request.pollIntervalMs,
    signal: request.signal,
  })
  const chain = cert.endsWith('\n') ? cert : `${cert}\n`
  await writePemFile(request.file, chain + key, 0o600)
  return { cert: Buffer.from(chain), key: Buffer.from(key) }
}

/** Until renewal: sleep until 80 % of the lifetime; due already: at once; after a failure, every 30 s. */
export function renewalDelay(info: Pick<CertificateInfo, 'notBefore' | 'notAfter'> | undefined, failed: boolean): number {
  if (!info) return retryMs
  const ms = renewalTime(info).getTime() - Date.now()
  return ms > 0 ? ms : failed ? retryMs : 0
}

/** Runs `run` after `delay()` ms, then again, until `signal` aborts; the timer never holds the process open. */
export function repeat(signal: AbortSignal, delay: () => number, run: () => Promise<void>): void {
  let timer: NodeJS.Timeout | undefined
  const loop = () => {
    if (signal.aborted) return
    timer = setTimeout(() => void run().finally(loop), Math.min(delay(), maxTimerMs))
    timer.unref()
  }
  signal.addEventListener('abort', () => clearTimeout(timer), { once: true })
  loop()
}
