// PKCS#10 certificate requests for the node's certificates, built like kubelet's: the subject
// carries the identity (CN = user, O = groups), SANs are requested in the extensionRequest.

import net from 'node:net'
import * as x509 from '@peculiar/x509'
import { ecdsaP256, generateKeyPair, privateKeyPem, withNewline } from './keys.ts'

export interface CertificateRequestOptions {
  commonName: string
  organizations?: string[]
  dnsNames?: string[]
  ips?: string[]
}

/** A fresh ECDSA P-256 key (PKCS#8 PEM) and a PEM "CERTIFICATE REQUEST" for it. */
export async function createCertificateRequest(options: CertificateRequestOptions): Promise<{ csr: string; key: string }> {
  for (const ip of options.ips ?? []) if (net.isIP(ip) === 0) throw new Error(`not an IP address: ${JSON.stringify(ip)}`)
  const keys = await generateKeyPair()
  // Go's pkix.Name order (O before CN), so the subject reads as kubelet's does
  const name = new x509.Name([...(options.organizations ?? []).map(o => ({ O: [o] })), { CN: [options.commonName] }])
  const altNames: x509.JsonGeneralName[] = [
    ...(options.dnsNames ?? []).map(value => ({ type: 'dns' as const, value })),
    ...(options.ips ?? []).map(value => ({ type: 'ip' as const, value })),
  ]
  const request = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys,
    signingAlgorithm: ecdsaP256,
    extensions: altNames.length > 0 ? [new x509.SubjectAlternativeNameExtension(altNames)] : [],
  })
  return { csr: withNewline(request.toString('pem')), key: await privateKeyPem(keys.privateKey) }
}
