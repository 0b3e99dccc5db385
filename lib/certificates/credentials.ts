// The node's credentials towards the apiserver, kept current for as long as the hub runs:
// - from --kubeconfig: re-read with the files it names every few seconds, because kubelet rotates
//   kubelet-client-current.pem in place (a symlink swap fs.watch would miss), and swapped in when
//   they changed and the new certificate matches its key;
// - from --bootstrap-kubeconfig: a client certificate got by CSR with the bootstrap token, kept in
//   --cert-dir, and renewed by CSR with the node's own identity at 80 % of its lifetime.
// Never logs a credential: subjects and expiry dates only.
import { createHash } from 'node:crypto'
import path from 'node:path'
import type { Logger } from 'pino'
import { loadKubeconfig } from '../upstream/kubeconfig.ts'
import type { UpstreamCredentials } from '../upstream/kubeconfig.ts'
import type { HubConfig } from '../config.ts'
import { certificateInfo, renewalTime } from '../../certs/pem.ts'
import { nodeClientCertificate } from '../../certs/signing-request.ts'
import type { ApiCaller } from '../../certs/signing-request.ts'
import { certificateMatchesKey, readCertificateAndKey, renewalDelay, repeat, requestNodeCertificate } from './node-certificates.ts'

/** The bootstrapped client certificate and its key, one PEM file, as kubelet keeps its own. */
export const clientCertificateFile = 'outpost-client-current.pem'

function fingerprint(credentials: UpstreamCredentials): string {
  const hash = createHash('sha256')
  for (const part of [credentials.ca, credentials.cert, credentials.key, credentials.token]) hash.update(part ?? '').update('\0')
  return hash.digest('hex')
}

function describeCertificate(cert: Buffer | undefined): Record<string, string> {
  if (!cert) return {}
  const info = certificateInfo(cert)
  return { subject: info.subject, notAfter: info.notAfter.toISOString() }
}

export interface NodeCredentialsOptions {
  config: Pick<HubConfig, 'kubeconfig' | 'bootstrapKubeconfig' | 'certDir' | 'nodeName'>
  log: Logger
  /** how often the kubeconfig and its files are re-read (default 5 s) */
  reloadIntervalMs?: number
  /** how often a pending CSR is polled (default 2 s) */
  csrPollIntervalMs?: number
}

/**
 * Emits nothing and knows no HTTP: `start` is given the way to reach the apiserver (for renewals)
 * and the function that takes new credentials into use.
 */
export class NodeCredentials {
  private readonly abort = new AbortController()
  private current: UpstreamCredentials = {}
  private lastProblem = ''

  private constructor(
    private readonly options: NodeCredentialsOptions,
    private readonly mode: 'kubeconfig' | 'bootstrap' | 'none',
  ) {}

  /**
   * The credentials to start with. With a bootstrap kubeconfig and no usable stored certificate,
   * this waits until the CSR is issued (as kubelet does), using `bootstrapApi` with the token.
   */
  static async load(
    options: NodeCredentialsOptions,
    bootstrapApi: (bootstrap: UpstreamCredentials) => { api: ApiCaller; close(): Promise<void> },
  ): Promise<{ source: NodeCredentials; credentials: UpstreamCredentials }> {
    const { config, log } = options
    if (config.kubeconfig || !config.bootstrapKubeconfig) {
      const source = new NodeCredentials(options, config.kubeconfig ? 'kubeconfig' : 'none')
      source.current = config.kubeconfig ? await loadKubeconfig(config.kubeconfig) : {}
      return { source, credentials: source.current }
    }
    const source = new NodeCredentials(options, 'bootstrap')
    const bootstrap = await loadKubeconfig(config.bootstrapKubeconfig)
    let pair = await readCertificateAndKey(source.certificateFile, new Date())
    if (pair) {
      log.info({ file: source.certificateFile, ...describeCertificate(pair.cert) }, 'node client certificate loaded')
    } else {
      const client = bootstrapApi(bootstrap)
      try {
        pair = await source.requestClientCertificate(client.api)
      } finally {
        await client.close()
      }
    }
    source.current = { server: bootstrap.server, ca: bootstrap.ca, insecureSkipTLSVerify: bootstrap.insecureSkipTLSVerify, ...pair }
    return { source, credentials: source.current }
  }

  private get certificateFile(): string {
    return path.join(this.options.config.certDir, clientCertificateFile)
  }

  private async requestClientCertificate(api: ApiCaller): Promise<{ cert: Buffer; key: Buffer }> {
    const { nodeName } = this.options.config
    this.options.log.info(
      { signer: nodeClientCertificate.signerName, node: nodeName },
      'requesting the node client certificate (CSR), waiting for it to be issued',
    )
    const pair = await requestNodeCertificate(api, {
      nodeName,
      profile: nodeClientCertificate,
      namePrefix: 'outpost-client-',
      file: this.certificateFile,
      pollIntervalMs: this.options.csrPollIntervalMs ?? 2000,
      signal: this.abort.signal,
    })
    this.options.log.info({ file: this.certificateFile, ...describeCertificate(pair.cert) }, 'node client certificate issued')
    return pair
  }

  /** Keeps the credentials current: `use` takes new ones; `api` reaches the apiserver as the node. */
  start(use: (credentials: UpstreamCredentials) => void, api: ApiCaller): void {
    const signal = this.abort.signal
    if (this.mode === 'kubeconfig')
      repeat(
        signal,
        () => this.options.reloadIntervalMs ?? 5000,
        () => this.reload(use),
      )
    if (this.mode === 'bootstrap') {
      let failed = false
      const certificate = () => (this.current.cert ? certificateInfo(this.current.cert) : undefined)
      repeat(
        signal,
        () => renewalDelay(certificate(), failed),
        async () => {
          const info = certificate()
          if (!info || Date.now() < renewalTime(info).getTime()) return
          try {
            this.current = { ...this.current, ...(await this.requestClientCertificate(api)) }
            failed = false
            use(this.current)
          } catch (error) {
            failed = true
            this.problem(`renewing the node client certificate failed, will retry: ${(error as Error).message}`)
          }
        },
      )
    }
  }

  stop(): void {
    this.abort.abort(new Error('hub stopping'))
  }

  private async reload(use: (credentials: UpstreamCredentials) => void): Promise<void> {
    const file = this.options.config.kubeconfig!
    let next: UpstreamCredentials
    try {
      next = await loadKubeconfig(file)
    } catch (error) {
      this.problem(`kubeconfig ${file} unusable, keeping the credentials in use: ${(error as Error).message}`)
      return
    }
    if (fingerprint(next) === fingerprint(this.current)) return
    if (next.cert && next.key && !certificateMatchesKey(next.cert, next.key)) {
      this.problem(`kubeconfig ${file}: the client certificate does not match its key (a rotation half-written?); keeping the credentials in use`)
      return
    }
    this.current = next
    this.lastProblem = ''
    this.options.log.info({ kubeconfig: file, ...describeCertificate(next.cert) }, 'node credentials changed on disk; new requests use them')
    use(next)
  }

  private problem(message: string): void {
    if (message === this.lastProblem) return
    this.lastProblem = message
    this.options.log.warn(message)
  }
}
