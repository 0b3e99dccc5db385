// The disk cache answers while no apiserver can be reached, for clients acting as the node only:
// discovery documents, gets, lists and watches (lib/cache/offline.ts decides; this writes), and
// the node's own Lease renewals (lib/cache/lease.ts). Anything else is unavailable, with the
// outage's reason: the router's 503 says it, and that nothing was written.
import type { RequestInfo } from '../api/requestinfo.ts'
import { isStatus } from '../api/status.ts'
import type { Answer } from '../api/reply.ts'
import type { CacheStore } from '../cache/store.ts'
import { isCachedKind } from '../cache/recorder.ts'
import { documentFromCache, isDiscoveryDocument } from '../cache/documents.ts'
import { getFromCache, listFromCache, watchFromCache } from '../cache/offline.ts'
import { UntranslatableError } from '../cache/translate.ts'
import type { OfflineRead } from '../cache/offline.ts'
import { isOwnLeaseRenewal, leaseConflict } from '../cache/lease.ts'
import type { LiveStreams } from '../watch/streams.ts'
import { inFormat, runOfflineWatch } from '../watch/offline-watch.ts'
import type { LiveOptions } from '../watch/offline-watch.ts'
import { isPodWrite } from '../overlay/learn.ts'
import type { RequestObserver } from '../observe/metrics.ts'
import { cacheHeaders, responseSink, sendReply, sendStatus, sendWatchHead } from './respond.ts'
import type { ClientLimits } from './respond.ts'
import { answered, unavailable } from './answerer.ts'
import type { Answerer, Call, Outcome } from './answerer.ts'

export interface OfflineAnswererOptions {
  /** undefined: offline autonomy is off (the cache dir cannot be used) */
  store: CacheStore | undefined
  nodeName: string
  /** why the cloud is away, for every refusal */
  outage(): string
  /** offline watches end when the cloud is back; a blip's (the cloud still counted as up) as soon as any apiserver answers */
  streams: Pick<LiveStreams, 'addOfflineWatch' | 'addFallbackWatch' | 'removeOfflineWatch'>
  observer?: Pick<RequestObserver, 'watchOpened' | 'slowClientEnded'>
  /** BOOKMARK period of offline watches */
  bookmarkIntervalMs: number
  clientLimits?: ClientLimits
  /** filtered offline watches follow changes of what their filters read (lib/watch/offline-watch.ts) */
  live?: LiveOptions
  /** learns from kubelet's writes about its own pods (lib/overlay/learn.ts); undefined: nothing is learned */
  podWrites?: { learn(info: RequestInfo, contentType: string | undefined, body: Buffer | undefined): Promise<string> }
}

export class OfflineAnswerer implements Answerer {
  constructor(private readonly options: OfflineAnswererOptions) {}

  private get stallMs(): number | undefined {
    return this.options.clientLimits?.stallTimeoutMs
  }

  async answer(call: Call, reason: string | undefined): Promise<Outcome> {
    const { info, req, res, body, plan } = call
    const { store } = this.options
    const why = reason ?? this.options.outage()
    if (!plan.actsAsNode) {
      return unavailable(
        `${why}: this request carries its own credentials, which cannot be checked while the apiserver is unreachable; only clients acting as the node are answered from the cache`,
      )
    }
    if (store && isDiscoveryDocument(info)) {
      const document = await documentFromCache(store, info, req.headers.accept)
      if (document) {
        await this.write(call, document)
        return answered('cache')
      }
    }
    if (store && isCachedKind(info)) {
      const read: OfflineRead = { store, info, accept: req.headers.accept, filter: call.filter, reason: why }
      try {
        if (info.verb === 'get') await this.write(call, await getFromCache(read))
        else if (info.verb === 'list') await this.write(call, await listFromCache(read))
        else await this.watch(call, read)
      } catch (error) {
        // an object the hub could give only with fields missing: it says so instead
        if (!(error instanceof UntranslatableError) || res.headersSent) throw error
        return unavailable(`${why}: ${error.message}`)
      }
      return answered('cache')
    }
    if (body && isOwnLeaseRenewal(info, this.options.nodeName)) {
      const conflict = store && (await leaseConflict(store, info, req.headers['content-type'], body))
      if (conflict) {
        sendStatus(res, conflict)
        return answered('hub')
      }
      // kubelet renews its Lease every 10 s and restarts its node status loop when renewals fail;
      // offline the renewal is acknowledged with what it sent, and nothing is written anywhere.
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/json', 'content-length': body.length })
      res.end(body)
      return answered('hub')
    }
    const what = info.isResourceRequest ? `${info.verb} ${info.resource}${info.subresource ? `/${info.subresource}` : ''}` : `${info.verb} ${info.path}`
    const nothing = ['create', 'update', 'patch', 'delete', 'deletecollection'].includes(info.verb) ? '; nothing was written' : ''
    // kubelet retries until the apiserver takes it; meanwhile the node's own endpoints follow it
    const learned = this.options.podWrites && isPodWrite(info) ? `; ${await this.options.podWrites.learn(info, req.headers['content-type'], body)}` : ''
    return unavailable(`${why}: ${what} for ${info.component || 'this client'} cannot be answered from the cache${nothing}${learned}`)
  }

  /** The cache's answer; its errors too say they came from the cache. */
  private async write({ res }: Call, answer: Answer): Promise<void> {
    if (isStatus(answer)) sendStatus(res, answer, cacheHeaders({}))
    else if ((await sendReply(res, answer, this.stallMs)) === 'stalled') this.options.observer?.slowClientEnded?.('list', 'stalled')
  }

  private async watch(call: Call, read: OfflineRead): Promise<void> {
    const { res, info, plan } = call
    const found = await watchFromCache(read)
    if (isStatus(found)) return this.write(call, found)
    // translated once, before the head goes out: an object that cannot be whole is a Status, which after the head could not be
    const state = inFormat(found.state, found.format)
    const start = { ...found, state, initial: found.initial === found.state ? state : inFormat(found.initial, found.format) }
    sendWatchHead(res, start.format, cacheHeaders({ component: start.component }))
    const watch = runOfflineWatch(start, responseSink(res), {
      bookmarkIntervalMs: this.options.bookmarkIntervalMs,
      stallMs: this.stallMs,
      onStalled: () => this.options.observer?.slowClientEnded?.('watch', 'stalled'),
      live: this.options.live,
    })
    const closed = this.options.observer?.watchOpened(info, 'cache')
    // the plan was made with the cloud counted as up: every apiserver failed this once (a blip)
    if (plan.online) this.options.streams.addFallbackWatch(watch.end)
    else this.options.streams.addOfflineWatch(watch.end)
    if (!res.closed) await new Promise<void>(resolve => res.once('close', resolve))
    this.options.streams.removeOfflineWatch(watch.end)
    closed?.()
  }
}
