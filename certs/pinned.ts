// A serving certificate that nobody signs: made in memory when a hub starts leading its pool, and
// published on the pool's Lease, where the followers read it and trust exactly it (pinned). The
// Lease is the apiserver's, written with a node's credentials: no CA to run, distribute or rotate.

import { X509Certificate } from 'node:crypto'
import type { CertificateAndKey } from './authority.ts'

const dayMs = 24 * 60 * 60 * 1000

/** A self-signed serving certificate for these IPs, valid for `validityDays` (default 365). */
export async function createPinnedCertificate(options: { commonName: string; ips: string[]; validityDays?: number }): Promise<CertificateAndKey> {
  // loaded only to issue one, as in selfsigned.ts: @peculiar/x509 is some MiB of memory a hub that never leads does not need
  const [x509, { clockSkewAllowanceMs }, { ecdsaP256, generateKeyPair, privateKeyPem, randomSerialNumber, withNewline }] = await Promise.all([
    import('@peculiar/x509'),
    import('./authority.ts'),
    import('./keys.ts'),
  ])
  const keys = await generateKeyPair()
  const now = Date.now()
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialNumber(),
    name: [{ CN: [options.commonName] }],
    notBefore: new Date(now - clockSkewAllowanceMs),
    notAfter: new Date(now + (options.validityDays ?? 365) * dayMs),
    signingAlgorithm: ecdsaP256,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(options.ips.map(ip => ({ type: 'ip' as const, value: ip }))),
    ],
  })
  return { cert: withNewline(cert.toString('pem')), key: await privateKeyPem(keys.privateKey) }
}

/** SHA-256 fingerprint of a PEM certificate, as Node's TLS reports a peer's (`AB:CD:…`); undefined when it does not parse. */
export function fingerprint256(pem: string): string | undefined {
  try {
    return new X509Certificate(pem).fingerprint256
  } catch {
    return undefined
  }
}
