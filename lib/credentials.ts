// The node's credentials towards the apiserver, kept current for as long as the hub runs:
// - from --kubeconfig: re-read with the files it names every few seconds, because kubelet rotates
//   kubelet-client-current.pem in place (a symlink swap fs.watch would miss), and swapped in when
//   they changed and the new certificate matches its key;
// - from --bootstrap-kubeconfig: a client certificate got by CSR with the bootstrap token, kept in
//   --cert-dir, and renewed by CSR with the node's own identity at 80 % of its lifetime.
// Never logs a credential: subjects and expiry dates only.
import { X509Certificate, createHash, createPrivateKey } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from 'pino'
import { loadKubeconfig } from './kubeconfig.ts'
import type { UpstreamCredentials } from './kubeconfig.ts'
import type { HubConfig } from './config.ts'
import { createCertificateRequest } from '../certs/csr.ts'
import { certificateInfo, renewalTime, writePemFile } from '../certs/pem.ts'
import { nodeClientCertificate, requestCertificate } from '../certs/signing-request.ts'
import type { ApiCaller } from '../certs/signing-request.ts'

/** The bootstrapped client certificate and its key, one PEM file, as kubelet keeps its own. */
export const clientCertificateFile = 'outpost-client-current.pem'

// setTimeout holds at most ~24.8 days; a renewal further away is re-checked at least this often.
const maxTimerMs = 60 * 60 * 1000

export function fingerprint(credentials: UpstreamCredentials): string {
  const hash = createHash('sha256')
  for (const part of [credentials.ca, credentials.cert, credentials.key, credentials.token]) hash.update(part ?? '').update('\0')
  return hash.digest('hex')
}

/** Whether a certificate and key belong together; a rotation caught half-written does not. */
export function certificateMatchesKey(cert: Buffer, key: Buffer): boolean {
  try {
    return new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))
  } catch {
    return false
  }
}

function describeCertificate(cert: Buffer | undefined): Record<string, string> {
  if (!cert) return {}
  const info = certificateInfo(cert)
  return { subject: info.subject, notAfter: info.notAfter.toISOString() }
}

/** A PEM file with the certificate (chain) and its key → the two parts, or undefined when unusable. */
export async function readCertificateAndKey(file: string, now: Date): Promise<{ cert: Buffer; key: Buffer } | undefined> {
  let pem: string
  try {
    pem = await readFile(file, 'utf8')
  } catch {
    return undefined
  }
  const blocks = pem.match(/-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----\n?/g) ?? []
  const cert = Buffer.from(blocks.filter(b => b.includes('BEGIN CERTIFICATE')).join(''))
  const key = Buffer.from(blocks.filter(b => /BEGIN [A-Z ]*PRIVATE KEY/.test(b)).join(''))
  if (cert.length === 0 || key.length === 0 || !certificateMatchesKey(cert, key)) return undefined
  return certificateInfo(cert).notAfter > now ? { cert, key } : undefined
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
  private timer: NodeJS.Timeout | undefined
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
    const stored = await readCertificateAndKey(source.certificateFile, new Date())
    if (stored) {
      log.info({ file: source.certificateFile, ...describeCertificate(stored.cert) }, 'node client certificate loaded')
      source.current = { server: bootstrap.server, ca: bootstrap.ca, insecureSkipTLSVerify: bootstrap.insecureSkipTLSVerify, ...stored }
      return { source, credentials: source.current }
    }
    const client = bootstrapApi(bootstrap)
    try {
      const issued = await source.requestClientCertificate(client.api)
      source.current = { server: bootstrap.server, ca: bootstrap.ca, insecureSkipTLSVerify: bootstrap.insecureSkipTLSVerify, ...issued }
    } finally {
      await client.close()
    }
    return { source, credentials: source.current }
  }

  private get certificateFile(): string {
    return path.join(this.options.config.certDir, clientCertificateFile)
  }

  private async requestClientCertificate(api: ApiCaller): Promise<{ cert: Buffer; key: Buffer }> {
    const { nodeName } = this.options.config
    const { csr, key } = await createCertificateRequest({ commonName: `system:node:${nodeName}`, organizations: ['system:nodes'] })
    this.options.log.info({ signer: nodeClientCertificate.signerName, node: nodeName }, 'requesting the node client certificate (CSR), waiting for it to be issued')
    const cert = await requestCertificate(api, {
      csr,
      ...nodeClientCertificate,
      namePrefix: 'outpost-client-',
      pollIntervalMs: this.options.csrPollIntervalMs ?? 2000,
      signal: this.abort.signal,
    })
    await writePemFile(this.certificateFile, `${cert.endsWith('\n') ? cert : `${cert}\n`}${key}`, 0o600)
    this.options.log.info({ file: this.certificateFile, ...describeCertificate(Buffer.from(cert)) }, 'node client certificate issued')
    return { cert: Buffer.from(cert), key: Buffer.from(key) }
  }

  /** Keeps the credentials current: `use` takes new ones; `api` reaches the apiserver as the node. */
  start(use: (credentials: UpstreamCredentials) => void, api: ApiCaller): void {
    if (this.mode === 'kubeconfig') this.schedule(() => this.reload(use), this.options.reloadIntervalMs ?? 5000)
    if (this.mode === 'bootstrap') this.scheduleRenewal(use, api)
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.abort.abort(new Error('hub stopping'))
  }

  private schedule(run: () => Promise<void>, delayMs: number): void {
    if (this.abort.signal.aborted) return
    this.timer = setTimeout(() => {
      void run().finally(() => this.schedule(run, delayMs))
    }, Math.min(delayMs, maxTimerMs))
    this.timer.unref()
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

  private scheduleRenewal(use: (credentials: UpstreamCredentials) => void, api: ApiCaller): void {
    let failed = false
    const renew = async () => {
      if (!this.current.cert || Date.now() < renewalTime(certificateInfo(this.current.cert)).getTime()) return
      try {
        const issued = await this.requestClientCertificate(api)
        this.current = { ...this.current, ...issued }
        failed = false
        use(this.current)
      } catch (error) {
        failed = true
        this.problem(`renewing the node client certificate failed, will retry: ${(error as Error).message}`)
      }
    }
    // sleep until due; due now: at once, and every 30 s after a failure
    const delay = () => {
      if (!this.current.cert) return maxTimerMs
      const ms = renewalTime(certificateInfo(this.current.cert)).getTime() - Date.now()
      return ms > 0 ? ms : failed ? 30_000 : 0
    }
    const loop = () => {
      if (this.abort.signal.aborted) return
      this.timer = setTimeout(() => void renew().finally(loop), Math.min(delay(), maxTimerMs))
      this.timer.unref()
    }
    loop()
  }

  private problem(message: string): void {
    if (message === this.lastProblem) return
    this.lastProblem = message
    this.options.log.warn(message)
  }
}
