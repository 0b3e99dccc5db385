// The HTTPS port's certificate, from one of three places, kept current without a restart:
// - files (--tls-cert-file / --tls-private-key-file), re-read when they change on disk;
// - self-signed: the hub's own CA in --cert-dir signs it (certs/selfsigned.ts), re-issued at 80 %;
// - csr: the cluster signs it (signer kubernetes.io/kubelet-serving), so pods that trust the
//   cluster CA trust the hub; requested again at 80 % of its lifetime.
import os from 'node:os'
import path from 'node:path'
import { readFile } from 'node:fs/promises'
import type { Logger } from 'pino'
import type { HubConfig } from '../config.ts'
import { certificateMatchesKey, readCertificateAndKey, renewalDelay, repeat, requestNodeCertificate } from './node-certificates.ts'
import { certificateInfo, renewalTime } from '../../certs/pem.ts'
import type { CertificateInfo } from '../../certs/pem.ts'
import { ensureSelfSignedServing } from '../../certs/selfsigned.ts'
import { nodeServingCertificate } from '../../certs/signing-request.ts'
import type { ApiCaller } from '../../certs/signing-request.ts'

export interface ServingMaterial {
  cert: Buffer
  key: Buffer
  info: CertificateInfo
}

/** The names in-cluster clients use for the apiserver, which the hub stands in for. */
export const kubernetesNames = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local']

export const servingCertificateFile = 'outpost-serving-current.pem'

/** This host's addresses, for the IP SANs when --node-ip is not given. */
function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter(a => a !== undefined && !a.internal && !a.address.startsWith('fe80:'))
    .map(a => a!.address)
}

export interface ServingOptions {
  config: Pick<HubConfig, 'tlsCertFile' | 'tlsKeyFile' | 'servingCert' | 'certDir' | 'nodeName' | 'nodeIps' | 'advertiseAddress' | 'podAddress'>
  log: Logger
  /** the apiserver, as the node (csr) */
  api: ApiCaller
  /** how often files given by flag are re-read (default 5 s) */
  reloadIntervalMs?: number
  csrPollIntervalMs?: number
}

export class ServingCertificates {
  private current: ServingMaterial | undefined
  private readonly abort = new AbortController()
  /** what the HTTPS port waits for, for /v1/readyz */
  pending = ''
  private failed = false

  constructor(private readonly options: ServingOptions) {}

  get source(): string {
    return this.options.config.tlsCertFile ? 'files' : this.options.config.servingCert
  }

  /**
   * The names the certificate is for. The apiserver's own names (kubernetes.default.svc, …) only
   * ever go into a certificate from the hub's private CA: a cluster signer that issued them to a
   * node would let that node impersonate the apiserver to every pod that trusts the cluster CA.
   */
  get names(): { dnsNames: string[]; ips: string[] } {
    const { nodeName, nodeIps, advertiseAddress, podAddress } = this.options.config
    const apiserverNames = this.source === 'csr' ? [] : kubernetesNames
    // the address the filters send pods to (masterservice and its kin) must verify too
    const ips = new Set([
      '127.0.0.1',
      '::1',
      ...(nodeIps.length > 0 ? nodeIps : hostAddresses()),
      ...(advertiseAddress ? [advertiseAddress] : []),
      ...(podAddress ? [podAddress] : []),
    ])
    return { dnsNames: [...apiserverNames, 'localhost', nodeName], ips: [...ips] }
  }

  /** The certificate to serve with now; with csr and nothing stored, waits until it is issued. */
  async first(): Promise<ServingMaterial> {
    this.current = await this.obtain(true)
    return this.current
  }

  /** Renewals (or file changes) from now on go to `use`. */
  start(use: (material: ServingMaterial) => void): void {
    const delay = () => (this.source === 'files' ? (this.options.reloadIntervalMs ?? 5000) : renewalDelay(this.current?.info, this.failed))
    repeat(this.abort.signal, delay, async () => {
      try {
        const next = await this.obtain(false)
        this.failed = false
        if (next === this.current) return
        this.current = next
        this.options.log.info({ source: this.source, subject: next.info.subject, notAfter: next.info.notAfter.toISOString() }, 'serving certificate renewed')
        use(next)
      } catch (error) {
        this.failed = true
        this.options.log.warn({ source: this.source, err: (error as Error).message }, 'serving certificate renewal failed, will retry')
      }
    })
  }

  stop(): void {
    this.abort.abort(new Error('hub stopping'))
  }

  /** The current material, a new one when due (or changed on disk), or at start whatever is usable. */
  private async obtain(starting: boolean): Promise<ServingMaterial> {
    const { config } = this.options
    if (config.tlsCertFile && config.tlsKeyFile) {
      const cert = await readFile(config.tlsCertFile)
      const key = await readFile(config.tlsKeyFile)
      if (this.current && cert.equals(this.current.cert) && key.equals(this.current.key)) return this.current
      if (!certificateMatchesKey(cert, key)) throw new Error(`${config.tlsCertFile} does not match ${config.tlsKeyFile}`)
      return { cert, key, info: certificateInfo(cert) }
    }
    if (config.servingCert === 'self-signed') {
      const issued = await ensureSelfSignedServing({ certDir: config.certDir, nodeName: config.nodeName, ...this.names })
      if (!issued.renewed && this.current) return this.current
      if (issued.renewed)
        this.options.log.info({ reason: issued.renewReason, notAfter: issued.info.notAfter.toISOString() }, 'self-signed serving certificate issued')
      return { cert: Buffer.from(issued.cert), key: Buffer.from(issued.key), info: issued.info }
    }
    const file = path.join(config.certDir, servingCertificateFile)
    if (starting) {
      const stored = await readCertificateAndKey(file, new Date())
      if (stored) return { ...stored, info: certificateInfo(stored.cert) }
    } else if (this.current && Date.now() < renewalTime(this.current.info).getTime()) {
      return this.current
    }
    return this.requestServingCertificate(file)
  }

  private async requestServingCertificate(file: string): Promise<ServingMaterial> {
    this.pending = `serving certificate: CSR (signer ${nodeServingCertificate.signerName}) not issued yet; approve it with kubectl certificate approve`
    this.options.log.info({ signer: nodeServingCertificate.signerName }, 'requesting the serving certificate (CSR), waiting for it to be approved and issued')
    try {
      const pair = await requestNodeCertificate(this.options.api, {
        nodeName: this.options.config.nodeName,
        profile: nodeServingCertificate,
        namePrefix: 'outpost-serving-',
        file,
        ...this.names,
        pollIntervalMs: this.options.csrPollIntervalMs ?? 2000,
        signal: this.abort.signal,
      })
      const material = { ...pair, info: certificateInfo(pair.cert) }
      this.options.log.info({ subject: material.info.subject, notAfter: material.info.notAfter.toISOString() }, 'serving certificate issued by the cluster')
      return material
    } finally {
      this.pending = ''
    }
  }
}
