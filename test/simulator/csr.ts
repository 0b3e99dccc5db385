// CertificateSigningRequests as the apiserver's registry treats them (pkg/registry/certificates):
// creation validates the request and records who asked; the approval subresource changes only the
// conditions. Signing is kube-controller-manager's job: see signer.ts.

import * as x509 from '@peculiar/x509'
import '../../certs/keys.ts' // @peculiar/x509's crypto provider
import type { ResourceStrategy } from './cluster.ts'
import { invalid, now } from './objects.ts'
import type { ResourceEntry } from './resources.ts'

/** The key usage bit or extended key usage OID behind each `spec.usages` value (k8s.io/api/certificates/v1). */
export const usageMeanings: Record<string, { keyUsage?: x509.KeyUsageFlags; extendedKeyUsage?: string }> = {
  signing: { keyUsage: x509.KeyUsageFlags.digitalSignature },
  'digital signature': { keyUsage: x509.KeyUsageFlags.digitalSignature },
  'content commitment': { keyUsage: x509.KeyUsageFlags.nonRepudiation },
  'key encipherment': { keyUsage: x509.KeyUsageFlags.keyEncipherment },
  'key agreement': { keyUsage: x509.KeyUsageFlags.keyAgreement },
  'data encipherment': { keyUsage: x509.KeyUsageFlags.dataEncipherment },
  'cert sign': { keyUsage: x509.KeyUsageFlags.keyCertSign },
  'crl sign': { keyUsage: x509.KeyUsageFlags.cRLSign },
  'encipher only': { keyUsage: x509.KeyUsageFlags.encipherOnly },
  'decipher only': { keyUsage: x509.KeyUsageFlags.decipherOnly },
  any: { extendedKeyUsage: '2.5.29.37.0' },
  'server auth': { extendedKeyUsage: x509.ExtendedKeyUsage.serverAuth },
  'client auth': { extendedKeyUsage: x509.ExtendedKeyUsage.clientAuth },
  'code signing': { extendedKeyUsage: x509.ExtendedKeyUsage.codeSigning },
  'email protection': { extendedKeyUsage: x509.ExtendedKeyUsage.emailProtection },
  's/mime': { extendedKeyUsage: x509.ExtendedKeyUsage.emailProtection },
  'ipsec end system': { extendedKeyUsage: '1.3.6.1.5.5.7.3.5' },
  'ipsec tunnel': { extendedKeyUsage: '1.3.6.1.5.5.7.3.6' },
  'ipsec user': { extendedKeyUsage: '1.3.6.1.5.5.7.3.7' },
  timestamping: { extendedKeyUsage: x509.ExtendedKeyUsage.timeStamping },
  'ocsp signing': { extendedKeyUsage: x509.ExtendedKeyUsage.ocspSigning },
  'microsoft sgc': { extendedKeyUsage: '1.3.6.1.4.1.311.10.3.3' },
  'netscape sgc': { extendedKeyUsage: '2.16.840.1.113730.4.1' },
}

const signerNameRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+\/[A-Za-z0-9][-A-Za-z0-9_.]*(\/[A-Za-z0-9][-A-Za-z0-9_.]*)*$/
const minExpirationSeconds = 600

/** spec.request (base64 of a PEM "CERTIFICATE REQUEST") parsed; throws with the apiserver's message. */
export function parseRequest(request: unknown): x509.Pkcs10CertificateRequest {
  const pem = typeof request === 'string' ? Buffer.from(request, 'base64').toString('latin1') : ''
  const block = x509.PemConverter.decodeWithHeaders(pem)[0]
  if (!block || block.type !== 'CERTIFICATE REQUEST') throw new Error('PEM block type must be CERTIFICATE REQUEST')
  return new x509.Pkcs10CertificateRequest(block.rawData)
}

/** What the apiserver rejects on create, as [field, reason, detail]; the signature is checked by the signer. */
function createProblem(spec: any): [string, string, string] | undefined {
  try {
    parseRequest(spec.request)
  } catch (err) {
    return ['spec.request', 'FieldValueInvalid', `Invalid value: []byte{...}: ${(err as Error).message}`]
  }
  if (!spec.signerName) return ['spec.signerName', 'FieldValueRequired', 'Required value']
  if (typeof spec.signerName !== 'string' || !signerNameRe.test(spec.signerName)) {
    return [
      'spec.signerName',
      'FieldValueInvalid',
      `Invalid value: ${JSON.stringify(spec.signerName)}: must be a fully qualified domain and path of the form 'example.com/signer-name'`,
    ]
  }
  if (!Array.isArray(spec.usages) || spec.usages.length === 0) return ['spec.usages', 'FieldValueRequired', 'Required value: usages must be provided']
  const unknown = spec.usages.findIndex((u: unknown) => typeof u !== 'string' || !(u in usageMeanings))
  if (unknown !== -1) {
    const supported = Object.keys(usageMeanings)
      .map(u => JSON.stringify(u))
      .join(', ')
    return [`spec.usages[${unknown}]`, 'FieldValueNotSupported', `Unsupported value: ${JSON.stringify(spec.usages[unknown])}: supported values: ${supported}`]
  }
  const seconds = spec.expirationSeconds
  if (seconds !== undefined && seconds !== null && (!Number.isInteger(seconds) || seconds < minExpirationSeconds)) {
    return [
      'spec.expirationSeconds',
      'FieldValueInvalid',
      `Invalid value: ${JSON.stringify(seconds)}: may not specify a duration less than 600 seconds (10 minutes)`,
    ]
  }
  return undefined
}

/** What an approval update may not do, as [field, reason, detail]. */
function approvalProblem(prev: any[], next: any[]): [string, string, string] | undefined {
  const isTrue = (c: any, type: string) => c?.type === type && c.status !== 'False'
  if (next.some(c => isTrue(c, 'Approved')) && next.some(c => isTrue(c, 'Denied'))) {
    return ['status.conditions', 'FieldValueInvalid', 'Invalid value: "Approved": Approved and Denied conditions are mutually exclusive']
  }
  for (const type of ['Approved', 'Denied', 'Failed']) {
    if (prev.some(c => c?.type === type) && !next.some(c => c?.type === type)) {
      return ['status.conditions', 'FieldValueForbidden', `Forbidden: updates may not remove a condition of type "${type}"`]
    }
  }
  return undefined
}

export const csrStrategy: ResourceStrategy = {
  prepareCreate(entry: ResourceEntry, obj: any, user): any {
    const spec = { ...(obj.spec ?? {}) }
    const problem = createProblem(spec)
    if (problem) throw invalid(entry, obj.metadata.name, ...problem)
    if (user) {
      // the requester is whoever sent it, whatever the body claims
      spec.username = user.username
      spec.groups = user.groups
      delete spec.uid
      delete spec.extra
    }
    return { ...obj, spec, status: {} }
  },

  updateSubresource(entry: ResourceEntry, _subresource: string, prev: any, incoming: any): any {
    const stamp = now()
    const conditions = (incoming.status?.conditions ?? []).map((c: any) => ({ lastUpdateTime: stamp, lastTransitionTime: stamp, ...c }))
    const problem = approvalProblem(prev.status?.conditions ?? [], conditions)
    if (problem) throw invalid(entry, prev.metadata.name, ...problem)
    return { ...prev, status: { ...prev.status, conditions } }
  },
}
