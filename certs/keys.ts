// Keys and serial numbers. outpost generates one key type, ECDSA P-256 through WebCrypto: small,
// fast to generate and sign with, and accepted by every Kubernetes component. @peculiar/x509 uses
// the same WebCrypto, so keys pass between the two without conversion.

import * as x509 from '@peculiar/x509'

const webcrypto = globalThis.crypto
x509.cryptoProvider.set(webcrypto)

/** key generation, import and signing parameters (ECDSA P-256 with SHA-256) */
export const ecdsaP256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }

export async function generateKeyPair(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ecdsaP256, true, ['sign', 'verify'])) as CryptoKeyPair
}

/** PEM text ends in a newline, so bundles can be made by concatenation. */
export function withNewline(pem: string): string {
  return pem.endsWith('\n') ? pem : `${pem}\n`
}

/** PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), what Node's tls and Go's tls.LoadX509KeyPair read. */
export async function privateKeyPem(key: CryptoKey): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', key)
  return withNewline(x509.PemConverter.encode(pkcs8, 'PRIVATE KEY'))
}

/** A PKCS#8 PEM ECDSA P-256 private key, usable for signing; throws for anything else. */
export async function importSigningKey(pem: string): Promise<CryptoKey> {
  const block = x509.PemConverter.decodeWithHeaders(pem).find(b => b.type === 'PRIVATE KEY')
  if (!block) throw new Error('no PKCS#8 "PRIVATE KEY" PEM block')
  try {
    return await webcrypto.subtle.importKey('pkcs8', block.rawData, ecdsaP256, false, ['sign'])
  } catch (err) {
    throw new Error(`not an ECDSA P-256 private key: ${(err as Error).message}`)
  }
}

/**
 * A random 127-bit serial number in hex. The first byte is 0x01..0x7f: positive, and minimally
 * encoded in DER, which Go's x509 parser insists on.
 */
export function randomSerialNumber(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16))
  bytes[0] = bytes[0] & 0x7f || 0x01
  return Buffer.from(bytes).toString('hex')
}
