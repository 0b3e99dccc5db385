// A follower's way to its pool's leader: the pool-wide watch caches list and watch through it
// instead of the cloud. HTTPS to the address the Lease publishes, the node's client certificate,
// and trust in exactly the certificate the Lease publishes (pinned: no CA, no name to match). When
// the leader cannot answer (a failed dial, a refusal, a 5xx) the very same request goes to the
// cloud at once and the owner is told, so a dead leader costs a follower's clients nothing.
import type { Client, Dispatcher } from 'undici'
import { undici } from '../upstream/http1.ts'
import type { PeerCertificate } from 'node:tls'
import type { Upstream, UpstreamRequest, UpstreamResponse } from '../upstream/upstream.ts'
import { describeError } from '../upstream/upstream.ts'
import { fingerprint256 } from '../../certs/pinned.ts'

export interface LeaderEndpoint {
  /** the holder of the Lease: its node name */
  identity: string
  /** https://<address>:<port> */
  url: string
  /** the leader's serving certificate, PEM, as published on the Lease */
  certificate: string
}

export interface LeaderSourceOptions {
  leader: LeaderEndpoint
  /** the node's client certificate and key */
  credentials: { cert: Buffer; key: Buffer }
  cloud: Pick<Upstream, 'request'>
  /** the leader failed a request, which went to the cloud instead */
  onFailure(reason: string): void
  /** the leader answered a request (a 200) */
  onAnswered?(): void
  connectTimeoutMs?: number
}

/**
 * Anything but a 200 means the leader cannot serve this request now. A 410 or a 504 too: the
 * leader's cache is behind the version asked for, or its window shorter than the apiserver's, and
 * the cloud may well serve it; relisting from a lagging leader would take a follower's cache back
 * in time, which its watchers would see as a new history (410, and a relist by every client).
 */
function leaderCannotServe(statusCode: number): boolean {
  return statusCode !== 200
}

export class LeaderSource {
  readonly leader: LeaderEndpoint
  private readonly origin: string
  private readonly fingerprint: string
  private readonly clients = new Set<Client>()
  private closed = false

  constructor(private readonly options: LeaderSourceOptions) {
    this.leader = options.leader
    const url = new URL(options.leader.url)
    if (url.protocol !== 'https:') throw new Error(`the leader's address ${options.leader.url} is not https`)
    this.origin = url.origin
    const fingerprint = fingerprint256(options.leader.certificate)
    if (!fingerprint) throw new Error(`the certificate ${options.leader.identity} published on the Lease does not parse`)
    this.fingerprint = fingerprint
  }

  /** Each request on a connection of its own: the reflectors make few (one list, one long watch per cache). */
  private async client(): Promise<Client> {
    const { Client } = await undici()
    const { credentials } = this.options
    const expected = this.fingerprint
    const client = new Client(this.origin, {
      pipelining: 1,
      connectTimeout: this.options.connectTimeoutMs ?? 5_000,
      connect: {
        ca: this.options.leader.certificate,
        cert: credentials.cert,
        key: credentials.key,
        rejectUnauthorized: true,
        // the certificate is the one the Lease names, whatever address it is reached at
        checkServerIdentity: (_host: string, cert: PeerCertificate) =>
          cert.fingerprint256 === expected ? undefined : new Error(`the leader's certificate is not the one its Lease publishes`),
        keepAlive: true,
        keepAliveInitialDelay: 5_000,
      },
    })
    this.clients.add(client)
    return client
  }

  async request(req: UpstreamRequest): Promise<UpstreamResponse> {
    if (this.closed) return this.options.cloud.request(req)
    const client = await this.client()
    const release = () => {
      this.clients.delete(client)
      void client.destroy()
    }
    const options: Dispatcher.RequestOptions = {
      method: req.method as Dispatcher.HttpMethod,
      path: req.path,
      headers: req.headers,
      signal: req.signal,
      headersTimeout: req.longRunning ? 10_000 : 30_000,
      bodyTimeout: req.longRunning ? 0 : 30_000,
      reset: true,
    }
    let res: Dispatcher.ResponseData
    try {
      res = await client.request(options)
    } catch (error) {
      release()
      if (req.signal?.aborted) throw error
      // closed meanwhile (the hub moved on): not the leader's failure
      if (this.closed) return this.options.cloud.request(req)
      return this.fallBack(req, `${this.leader.identity} (${this.origin}): ${describeError(error)}`)
    }
    // its body may be destroyed unread (a refusal, a switch): an error nobody hears would end the process
    res.body.on('error', () => {})
    if (leaderCannotServe(res.statusCode)) {
      const message = await readMessage(res.body)
      release()
      return this.fallBack(req, `${this.leader.identity} answered ${res.statusCode}${message ? `: ${message}` : ''}`)
    }
    res.body.once('close', release)
    this.options.onAnswered?.()
    return { server: new URL(this.origin), statusCode: res.statusCode, headers: res.headers, body: res.body }
  }

  /** A stream the leader sent broke, or did not decode: the leader failed, as a refused request would. */
  failed(server: URL, reason: string): void {
    if (!this.closed && server.origin === this.origin) this.options.onFailure(`${this.leader.identity}: ${reason}`)
  }

  private fallBack(req: UpstreamRequest, reason: string): Promise<UpstreamResponse> {
    this.options.onFailure(reason)
    return this.options.cloud.request(req)
  }

  /** Ends every request under way (their watches resume elsewhere); later requests go to the cloud. */
  close(): void {
    this.closed = true
    for (const client of this.clients) void client.destroy()
    this.clients.clear()
  }
}

/** The Status message of a refusal, for the log: its first 4 KiB at most. */
async function readMessage(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = []
  let bytes = 0
  try {
    for await (const chunk of body) {
      chunks.push(chunk as Buffer)
      bytes += (chunk as Buffer).length
      if (bytes >= 4096) break
    }
  } catch {
    // what arrived is enough to say why
  }
  body.destroy()
  const text = Buffer.concat(chunks).toString('utf8', 0, 4096)
  try {
    return String(JSON.parse(text).message ?? text).slice(0, 300)
  } catch {
    return text.slice(0, 300)
  }
}
