// A shared watch cache answers kube-proxy's, coredns's and kubelet's lists and watches, online and
// offline (lib/watch/cache-reads.ts decides; this writes). A read it is not the one to answer (a
// Table, a read of the past, offline with nothing whole yet) is declined: the next route has it.
import type { RequestInfo } from '../api/requestinfo.ts'
import type { MintedRead } from '../overlay/minted.ts'
import { isStatus } from '../api/status.ts'
import { readWatchCache } from '../watch/cache-reads.ts'
import type { WatchCaches } from '../watch/watch-caches.ts'
import { CacheWatcher } from '../watch/watcher.ts'
import type { FilteredWatches } from '../watch/filtered-watches.ts'
import type { LiveStreams } from '../watch/streams.ts'
import type { RequestObserver } from '../observe/metrics.ts'
import { cacheHeaders, responseSink, sendReply, sendStatus, sendWatchHead } from './respond.ts'
import type { ClientLimits } from './respond.ts'
import { answered, declined } from './answerer.ts'
import type { Answerer, Call, Outcome } from './answerer.ts'

export interface WatchCacheAnswererOptions {
  caches: WatchCaches
  filteredWatches: FilteredWatches
  /** watches a watch cache serves: they outlive outages, and end with the hub */
  streams: Pick<LiveStreams, 'addHeldWatch' | 'removeHeldWatch'>
  observer?: Pick<RequestObserver, 'watchOpened' | 'refiltered' | 'slowClientEnded'>
  /** BOOKMARK period of the watches it serves (default a minute, as the apiserver's) */
  bookmarkIntervalMs?: number
  clientLimits?: ClientLimits
  /**
   * 'proven' (the default): a consistent read is answered once the cache is proven to have reached the
   * apiserver's revision, else relayed. 'from-memory': the pool port's, which has no route to relay to;
   * its peers prove their own clients' reads against the cloud.
   */
  consistentReads?: 'proven' | 'from-memory'
  /** what a read at a version the pod overlay minted gets (lib/overlay/minted.ts) */
  mintedRead?(info: RequestInfo): MintedRead
}

export class WatchCacheAnswerer implements Answerer {
  /** the caches as reads see them: without the proof on the pool port */
  private readonly caches: Parameters<typeof readWatchCache>[0]

  constructor(private readonly options: WatchCacheAnswererOptions) {
    const { caches } = options
    this.caches =
      options.consistentReads === 'from-memory' ? { cacheFor: (info, format) => caches.cacheFor(info, format), listBodies: caches.listBodies } : caches
  }

  async answer(call: Call): Promise<Outcome> {
    const { info, req, res, filter, plan } = call
    const { observer, streams } = this.options
    const read = await readWatchCache(this.caches, info, req.headers.accept, { online: plan.online, filter, minted: this.options.mintedRead?.(info) })
    if (read.kind === 'declined') return declined(read.why)
    if (read.kind === 'answer') {
      if (isStatus(read.answer)) sendStatus(res, read.answer)
      else if ((await sendReply(res, read.answer, this.options.clientLimits?.stallTimeoutMs)) === 'stalled') observer?.slowClientEnded?.('list', 'stalled')
      return answered('cache')
    }
    if (res.destroyed) return answered('cache') // the client went away meanwhile
    sendWatchHead(res, read.cache.format, cacheHeaders(read.cached))
    const watcher = new CacheWatcher(read.cache, responseSink(res), {
      ...read.watcher,
      filter,
      bookmarkIntervalMs: this.options.bookmarkIntervalMs,
      budgetBytes: this.options.clientLimits?.watchBacklogBytes,
      stallTimeoutMs: this.options.clientLimits?.stallTimeoutMs,
      onRefilterSent: count => observer?.refiltered?.(count),
      onClosed: why => {
        if (why === 'backlog' || why === 'stalled') observer?.slowClientEnded?.('watch', why)
      },
    })
    const unregister = filter ? this.options.filteredWatches.add(watcher) : () => {}
    const end = () => watcher.close('ended')
    streams.addHeldWatch(end)
    const closed = observer?.watchOpened(info, 'cache')
    try {
      watcher.start()
      await watcher.done()
    } finally {
      unregister()
      streams.removeHeldWatch(end)
      closed?.()
    }
    return answered('cache')
  }
}
