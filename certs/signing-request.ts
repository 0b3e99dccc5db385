// The Kubernetes CSR flow (certificates.k8s.io/v1), independent of how the hub talks HTTP: create a
// CertificateSigningRequest, then wait until a signer has issued the certificate or someone has
// refused it. Polling rather than watching: one GET per interval is all a single pending request
// needs, and it survives apiserver restarts without resourceVersion bookkeeping.

import { setTimeout as sleep } from 'node:timers/promises'

export interface ApiCaller {
  (method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ statusCode: number; body: any }>
}

export interface SigningProfile {
  signerName: string
  usages: readonly string[]
}

/** The node's client certificate, as kubelet asks for it (ECDSA keys need no `key encipherment`). */
export const nodeClientCertificate: SigningProfile = { signerName: 'kubernetes.io/kube-apiserver-client-kubelet', usages: ['digital signature', 'client auth'] }

/** The node's serving certificate, as kubelet asks for it. */
export const nodeServingCertificate: SigningProfile = { signerName: 'kubernetes.io/kubelet-serving', usages: ['digital signature', 'server auth'] }

export interface CertificateRequestFlowOptions {
  /** PEM "CERTIFICATE REQUEST" */
  csr: string
  signerName: string
  usages: readonly string[]
  /** metadata.generateName of the CertificateSigningRequest */
  namePrefix: string
  expirationSeconds?: number
  /** default 1000 */
  pollIntervalMs?: number
  signal?: AbortSignal
}

const collectionPath = '/apis/certificates.k8s.io/v1/certificatesigningrequests'
const defaultPollIntervalMs = 1000

/**
 * Creates a certificates.k8s.io/v1 CertificateSigningRequest (generateName `<namePrefix>`, spec.request = base64 PEM,
 * signerName, usages, expirationSeconds when given), then polls GET …/certificatesigningrequests/<name> every pollIntervalMs
 * until status.certificate is set (returns the PEM chain as a string) or a Denied/Failed condition appears (throws with
 * the condition's reason and message), or the AbortSignal fires. Non-2xx answers throw an Error naming the code and the
 * Status message; transient failures while polling (network errors, 5xx) are retried, not fatal.
 */
export async function requestCertificate(api: ApiCaller, options: CertificateRequestFlowOptions): Promise<string> {
  const { signal } = options
  signal?.throwIfAborted()
  const spec: Record<string, unknown> = {
    request: Buffer.from(options.csr).toString('base64'),
    signerName: options.signerName,
    usages: [...options.usages],
  }
  if (options.expirationSeconds !== undefined) spec.expirationSeconds = options.expirationSeconds
  const created = await api('POST', collectionPath, {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: { generateName: options.namePrefix },
    spec,
  })
  if (!isSuccess(created.statusCode)) throw apiFailure('creating a CertificateSigningRequest', created)
  const name = created.body?.metadata?.name
  if (typeof name !== 'string' || name === '') throw new Error('creating a CertificateSigningRequest: the answer has no metadata.name')

  const objectPath = `${collectionPath}/${encodeURIComponent(name)}`
  let csr: any = created.body
  for (;;) {
    const certificate = outcome(name, csr)
    if (certificate !== undefined) return certificate
    await sleep(options.pollIntervalMs ?? defaultPollIntervalMs, undefined, { signal })
    csr = await poll(api, objectPath, name, signal)
  }
}

/** The issued certificate (PEM), undefined while pending; throws when denied or failed. */
function outcome(name: string, csr: any): string | undefined {
  for (const condition of csr?.status?.conditions ?? []) {
    if ((condition?.type === 'Denied' || condition?.type === 'Failed') && condition.status !== 'False') {
      const verb = condition.type === 'Denied' ? 'denied' : 'failed'
      throw new Error(`CertificateSigningRequest ${name} ${verb}: ${condition.reason ?? ''}: ${condition.message ?? ''}`)
    }
  }
  const certificate = csr?.status?.certificate
  if (typeof certificate === 'string' && certificate !== '') return Buffer.from(certificate, 'base64').toString('utf8')
  return undefined
}

/** The object, or undefined after a transient failure (network error, 429, 5xx) worth another try. */
async function poll(api: ApiCaller, objectPath: string, name: string, signal: AbortSignal | undefined): Promise<any> {
  let answer: { statusCode: number; body: any }
  try {
    answer = await api('GET', objectPath)
  } catch {
    signal?.throwIfAborted()
    return undefined
  }
  if (isSuccess(answer.statusCode)) return answer.body
  if (answer.statusCode === 429 || answer.statusCode >= 500) return undefined
  throw apiFailure(`reading CertificateSigningRequest ${name}`, answer)
}

function isSuccess(statusCode: number): boolean {
  return statusCode >= 200 && statusCode < 300
}

function apiFailure(doing: string, answer: { statusCode: number; body: any }): Error {
  const message = typeof answer.body?.message === 'string' ? answer.body.message : typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body)
  return new Error(`${doing}: the apiserver answered ${answer.statusCode}: ${message}`)
}
