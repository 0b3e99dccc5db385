// Reading certificates (what a renewal decision needs) and writing PEM files so that a crash never
// leaves a torn key or certificate behind.

import { X509Certificate, randomBytes } from 'node:crypto'
import { open, rename, unlink } from 'node:fs/promises'
import path from 'node:path'
import { durableMkdir, syncDir } from '../lib/durable-dirs.ts'

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
export function firstCertificatePem(pem: string | Buffer): string {
  const match = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(pem.toString())
  if (!match) throw new Error('no CERTIFICATE PEM block')
  return match[0]
}

/**
 * Subject, validity and SANs of the first certificate of a PEM bundle; throws when there is none.
 * Read with node:crypto: what the hub does with certificates every day needs no X.509 library
 * (@peculiar/x509 costs ~20 MB of memory and is loaded only to issue one).
 */
export function certificateInfo(pem: string | Buffer): CertificateInfo {
  const cert = new X509Certificate(firstCertificatePem(pem))
  const names = (cert.subjectAltName ?? '').split(', ').filter(Boolean)
  return {
    // node lists the RDNs one per line, in the certificate's order
    subject: cert.subject.split('\n').join(', '),
    notBefore: new Date(cert.validFrom),
    notAfter: new Date(cert.validTo),
    dnsNames: names.filter(n => n.startsWith('DNS:')).map(n => n.slice(4)),
    ips: names.filter(n => n.startsWith('IP Address:')).map(n => canonicalIp(n.slice(11))),
  }
}

function canonicalIp(ip: string): string {
  return ip.includes(':') ? new URL(`http://[${ip}]`).hostname.slice(1, -1) : ip
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
  await durableMkdir(dir)
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
  await syncDir(dir)
}
