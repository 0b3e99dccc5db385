// A certificate authority as PEM strings: creating one, and issuing certificates with it. Shared by
// the hub's self-signed serving certificate and the apiserver simulator's CSR signer.

import * as x509 from '@peculiar/x509'
import { ecdsaP256, generateKeyPair, importSigningKey, privateKeyPem, randomSerialNumber, withNewline } from './keys.ts'
import { firstCertificatePem } from './pem.ts'

export interface CertificateAndKey {
  /** PEM */
  cert: string
  /** PKCS#8 PEM */
  key: string
}

/** Certificates start this far in the past, so a peer whose clock is behind accepts them. */
export const clockSkewAllowanceMs = 5 * 60 * 1000

export async function createCertificateAuthority(options: { commonName: string; notBefore: Date; notAfter: Date }): Promise<CertificateAndKey> {
  const keys = await generateKeyPair()
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialNumber(),
    name: [{ CN: [options.commonName] }],
    notBefore: options.notBefore,
    notAfter: options.notAfter,
    signingAlgorithm: ecdsaP256,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  })
  return { cert: withNewline(cert.toString('pem')), key: await privateKeyPem(keys.privateKey) }
}

export interface IssueOptions {
  /** a Name built from JSON (`[{ CN: [name] }]`) or taken from a request: no DN escaping to get wrong */
  subject: x509.Name
  publicKey: CryptoKey | x509.PublicKey
  notBefore: Date
  /** clamped to the CA's own notAfter: a certificate never outlives its issuer */
  notAfter: Date
  subjectAltNames?: x509.JsonGeneralName[]
  keyUsages: x509.KeyUsageFlags
  extendedKeyUsages: x509.ExtendedKeyUsageType[]
}

/** A leaf certificate (CA=false) signed by `ca`, as PEM. */
export async function issueCertificate(ca: CertificateAndKey, options: IssueOptions): Promise<string> {
  const caCert = new x509.X509Certificate(firstCertificatePem(ca.cert))
  const signingKey = await importSigningKey(ca.key)
  const notAfter = options.notAfter.getTime() > caCert.notAfter.getTime() ? caCert.notAfter : options.notAfter
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(options.keyUsages, true),
    await authorityKeyIdentifier(caCert),
    await x509.SubjectKeyIdentifierExtension.create(options.publicKey),
  ]
  if (options.extendedKeyUsages.length > 0) extensions.push(new x509.ExtendedKeyUsageExtension(options.extendedKeyUsages))
  if (options.subjectAltNames && options.subjectAltNames.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(options.subjectAltNames))
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialNumber(),
    subject: options.subject,
    issuer: caCert.subjectName,
    notBefore: options.notBefore,
    notAfter,
    signingAlgorithm: ecdsaP256,
    publicKey: options.publicKey,
    signingKey,
    extensions,
  })
  return withNewline(cert.toString('pem'))
}

/**
 * The CA's own subject key identifier when it has one: OpenSSL only accepts an issuer whose SKI
 * equals the AKI, and a CA made elsewhere may not have derived its SKI as @peculiar/x509 would.
 */
async function authorityKeyIdentifier(caCert: x509.X509Certificate): Promise<x509.AuthorityKeyIdentifierExtension> {
  const ski = caCert.getExtension(x509.SubjectKeyIdentifierExtension)
  return ski ? new x509.AuthorityKeyIdentifierExtension(ski.keyId) : x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey)
}
