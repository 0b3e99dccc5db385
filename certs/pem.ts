// Reading certificates (what a renewal decision needs) and writing PEM files so that a crash never
// leaves a torn key or certificate behind.

import { randomBytes } from 'node:crypto'
import { mkdir, open, rename, unlink } from 'node:fs/promises'
import path from 'node:path'
import * as x509 from '@peculiar/x509'
import './keys.ts' // @peculiar/x509's crypto provider

export interface CertificateInfo {
  /** RFC 4514-style, e.g. `CN=system:node:edge-1, O=system:nodes` */
  subject: string
  notBefore: Date
  notAfter: Date
  dnsNames: string[]
  /** canonical text form (IPv6 compressed) */
  ips: string[]
}

export const defaultRenewFraction = 0.8

/** The first CERTIFICATE block of a PEM text (other blocks, such as keys, are skipped). */
export function firstCertificate(pem: string | Buffer): x509.X509Certificate {
  const block = x509.PemConverter.decodeWithHeaders(pem.toString()).find(b => b.type === 'CERTIFICATE')
  if (!block) throw new Error('no CERTIFICATE PEM block')
  return new x509.X509Certificate(block.rawData)
}

/** Subject, validity and SANs of the first certificate of a PEM bundle; throws when there is none. */
export function certificateInfo(pem: string | Buffer): CertificateInfo {
  const cert = firstCertificate(pem)
  const names = cert.getExtension(x509.SubjectAlternativeNameExtension)?.names.items ?? []
  return {
    subject: cert.subject,
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
    dnsNames: names.filter(n => n.type === 'dns').map(n => n.value),
    ips: names.filter(n => n.type === 'ip').map(n => n.value),
  }
}

/** When a certificate should be renewed: at `fraction` (default 0.8) of its lifetime, like kubelet's rotation. */
export function renewalTime(info: Pick<CertificateInfo, 'notBefore' | 'notAfter'>, fraction = defaultRenewFraction): Date {
  if (!(fraction > 0 && fraction <= 1)) throw new RangeError(`renewal fraction must be in (0, 1], got ${fraction}`)
  const start = info.notBefore.getTime()
  return new Date(start + (info.notAfter.getTime() - start) * fraction)
}

/**
 * Atomic write: a temp file in the same directory (created with `mode`, fsync-ed), renamed over
 * `file`, then the directory fsync-ed so the rename survives a power cut. A missing directory is
 * created 0700.
 */
export async function writePemFile(file: string, pem: string, mode: 0o600 | 0o644): Promise<void> {
  const dir = path.dirname(file)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`)
  try {
    const handle = await open(tmp, 'wx', mode)
    try {
      await handle.chmod(mode) // the umask may have narrowed a 0644 certificate
      await handle.writeFile(pem)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(tmp, file)
  } catch (err) {
    await unlink(tmp).catch(() => {})
    throw err
  }
  const dirHandle = await open(dir, 'r')
  try {
    await dirHandle.sync()
  } finally {
    await dirHandle.close()
  }
}
