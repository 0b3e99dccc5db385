// kube-controller-manager's CSR controllers, for the simulator: csrapproving (here: approve on
// creation when autoApproveCsr says so) and csrsigning (an approved request of a kubernetes.io
// signer gets its certificate from the signing CA, or a Failed condition when it does not meet
// the signer's rules). Both react to store events, after the write that caused them.

import * as x509 from '@peculiar/x509'
import { notFound } from '../../lib/api/status.ts'
import { clockSkewAllowanceMs, issueCertificate, type CertificateAndKey } from '../../certs/authority.ts'
import type { Cluster } from './cluster.ts'
import { parseRequest, usageMeanings } from './csr.ts'
import { ApiError } from './errors.ts'
import { now } from './objects.ts'
import type { ResourceEntry } from './resources.ts'

export type AutoApprove = boolean | ((csr: any) => boolean)

const defaultDurationSeconds = 365 * 24 * 60 * 60

/** Each kubernetes.io signer's rules (k8s.io/kubernetes pkg/apis/certificates/v1/helpers.go): why a request fails them. */
const signerRules: Record<string, (request: x509.Pkcs10CertificateRequest, usages: string[]) => string | undefined> = {
  'kubernetes.io/kube-apiserver-client-kubelet': (request, usages) =>
    nodeSubjectProblem(request) ?? (altNames(request).length > 0 ? 'subjectAltNames are not allowed' : undefined) ?? usagesProblem(usages, 'client auth'),
  'kubernetes.io/kubelet-serving': (request, usages) => {
    const names = altNames(request)
    if (names.some(n => n.type !== 'dns' && n.type !== 'ip')) return 'only DNS and IP subjectAltNames are allowed'
    return nodeSubjectProblem(request) ?? (names.length === 0 ? 'DNS or IP subjectAltName is required' : undefined) ?? usagesProblem(usages, 'server auth')
  },
  'kubernetes.io/kube-apiserver-client': (_request, usages) => usagesProblem(usages, 'client auth'),
  'kubernetes.io/legacy-unknown': () => undefined,
}

function altNames(request: x509.Pkcs10CertificateRequest): readonly x509.GeneralName[] {
  const san = request.extensions.find((e): e is x509.SubjectAlternativeNameExtension => e instanceof x509.SubjectAlternativeNameExtension)
  return san?.names.items ?? []
}

function nodeSubjectProblem(request: x509.Pkcs10CertificateRequest): string | undefined {
  const o = request.subjectName.getField('O')
  if (o.length !== 1 || o[0] !== 'system:nodes') return 'subject organization is not system:nodes'
  if (!(request.subjectName.getField('CN')[0] ?? '').startsWith('system:node:')) return 'subject common name does not begin with system:node:'
  return undefined
}

/** `required` must be there; besides it only digital signature and key encipherment. */
function usagesProblem(usages: string[], required: string): string | undefined {
  const allowed = new Set(['digital signature', 'key encipherment', required])
  if (!usages.includes(required) || usages.some(u => !allowed.has(u))) return `usages did not match [${[...allowed].join(' ')}]`
  return undefined
}

function hasCondition(csr: any, type: string): boolean {
  return (csr.status?.conditions ?? []).some((c: any) => c?.type === type && c.status !== 'False')
}

export class CsrController {
  private readonly entry: ResourceEntry
  /** uids of requests being signed, so a burst of events signs once */
  private readonly signing = new Set<string>()
  private readonly unsubscribe: () => void
  private stopped = false

  constructor(
    private readonly cluster: Cluster,
    readonly signerCa: CertificateAndKey,
    private readonly autoApprove: AutoApprove,
  ) {
    this.entry = cluster.registry.byGVR('certificates.k8s.io', 'v1', 'certificatesigningrequests')!
    this.unsubscribe = cluster.store.subscribe(event => {
      if (event.storageKey !== this.entry.storageKey || event.type === 'DELETED') return
      // later, so the write that caused this is answered and seen by every watcher first
      setImmediate(() => {
        try {
          this.reconcile(event.object.metadata.name, event.type === 'ADDED')
        } catch {
          // a throwing autoApproveCsr callback must not take the simulator down
        }
      })
    })
  }

  stop(): void {
    this.stopped = true
    this.unsubscribe()
  }

  /** Adds a condition through the approval subresource, as `kubectl certificate approve|deny` does. */
  decide(name: string, type: 'Approved' | 'Denied', reason: string, message: string): any {
    const csr = this.cluster.get(this.entry, '', name)
    if (!csr) throw new ApiError(notFound(this.entry.resource, this.entry.group, name))
    const conditions = [...(csr.status?.conditions ?? []), { type, status: 'True', reason, message }]
    return this.cluster.update(this.entry, { ...csr, status: { ...csr.status, conditions } }, { subresource: 'approval', programmatic: true })
  }

  private reconcile(name: string, created: boolean): void {
    const csr = this.stopped ? undefined : this.cluster.get(this.entry, '', name)
    if (!csr) return
    const decided = hasCondition(csr, 'Approved') || hasCondition(csr, 'Denied')
    if (created && !decided && (typeof this.autoApprove === 'function' ? this.autoApprove(csr) : this.autoApprove)) {
      this.decide(name, 'Approved', 'AutoApproved', 'Auto approved by the apiserver simulator (autoApproveCsr)')
      return // the approval's own event brings the signing
    }
    const signable = hasCondition(csr, 'Approved') && !hasCondition(csr, 'Failed') && !csr.status?.certificate
    if (!signable || !(csr.spec?.signerName in signerRules) || this.signing.has(csr.metadata.uid)) return
    this.signing.add(csr.metadata.uid)
    this.sign(csr)
      .then(outcome => this.record(csr.metadata.uid, name, outcome))
      .catch(err => this.record(csr.metadata.uid, name, { failure: `signing failed: ${(err as Error).message}` }))
      .finally(() => this.signing.delete(csr.metadata.uid))
  }

  private async sign(csr: any): Promise<{ certificate: string } | { failure: string }> {
    const request = parseRequest(csr.spec.request)
    if (!(await request.verify())) return { failure: 'the request is not signed by its own key' }
    const usages: string[] = csr.spec.usages
    const problem = signerRules[csr.spec.signerName](request, usages)
    if (problem) return { failure: problem }
    const start = Date.now()
    const seconds = Math.min(csr.spec.expirationSeconds ?? defaultDurationSeconds, defaultDurationSeconds)
    const certificate = await issueCertificate(this.signerCa, {
      subject: request.subjectName,
      publicKey: request.publicKey,
      notBefore: new Date(start - clockSkewAllowanceMs),
      notAfter: new Date(start + seconds * 1000),
      subjectAltNames: altNames(request).map(n => n.toJSON()),
      keyUsages: usages.reduce<number>((bits, u) => bits | (usageMeanings[u].keyUsage ?? 0), 0),
      extendedKeyUsages: usages.flatMap(u => usageMeanings[u].extendedKeyUsage ?? []),
    })
    return { certificate }
  }

  /** Writes the certificate or a Failed condition, unless the request changed meanwhile. */
  private record(uid: string, name: string, outcome: { certificate: string } | { failure: string }): void {
    const csr = this.stopped ? undefined : this.cluster.get(this.entry, '', name)
    if (!csr || csr.metadata.uid !== uid || csr.status?.certificate || !hasCondition(csr, 'Approved')) return
    const status =
      'certificate' in outcome
        ? { ...csr.status, certificate: Buffer.from(outcome.certificate).toString('base64') }
        : {
            ...csr.status,
            conditions: [
              ...csr.status.conditions,
              { type: 'Failed', status: 'True', reason: 'SignerValidationFailure', message: outcome.failure, lastUpdateTime: now() },
            ],
          }
    this.cluster.update(this.entry, { ...csr, status }, { subresource: 'status', programmatic: true })
  }
}
