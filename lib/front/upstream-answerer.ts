// The apiserver answers: the request is relayed with the node's credentials, and on the way back a
// cacheable answer is recorded (durably, before the client sees it), a filtered one filtered, a
// watch relayed frame by frame. No apiserver reachable is "unavailable": the plan's next route
// (the disk cache, for the node's reads) answers instead, or the router's 503 says why.
import { gunzip } from 'node:zlib'
import { promisify } from 'node:util'
import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { isWatch, qualifiedResource, queryFlag } from '../api/requestinfo.ts'
import type { RequestInfo } from '../api/requestinfo.ts'
import { upstreamPath } from '../api/paths.ts'
import { notFound, serviceUnavailable } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import { WatchFrameSplitter, framingOf, isBookmark } from '../api/frames.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { UpstreamUnavailableError, describeError } from '../upstream/upstream.ts'
import type { Upstream, UpstreamResponse } from '../upstream/upstream.ts'
import { declaredLength, readAll, readUpTo } from '../upstream/read-all.ts'
import type { Recorder } from '../cache/recorder.ts'
import { decodeList, formatOf } from '../cache/decode.ts'
import { scopeOf } from '../cache/scope.ts'
import { resourceKeyOf } from '../cache/types.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import { streamWatch } from '../watch/pipeline.ts'
import type { WatchStages } from '../watch/pipeline.ts'
import { FilteredWatch } from '../watch/refilter.ts'
import type { FilteredWatches } from '../watch/filtered-watches.ts'
import type { RememberedLists } from '../watch/remembered-lists.ts'
import type { LiveStreams } from '../watch/streams.ts'
import type { RequestObserver } from '../observe/metrics.ts'
import { upstreamRequestHeaders, clientResponseHeaders } from './headers.ts'
import { responseSink, sendStatus, streamBody } from './respond.ts'
import type { ClientLimits } from './respond.ts'
import { shapeOf } from './plan.ts'
import { answered, ClientGone, unavailable } from './answerer.ts'
import type { Answerer, Call, Outcome } from './answerer.ts'

export interface UpstreamAnswererOptions {
  upstream: Upstream
  log: Logger
  /** undefined: the disk cache is off, nothing is recorded */
  recorder: Recorder | undefined
  filteredWatches: FilteredWatches
  /** filtered lists the cache does not keep, for the watch that follows each */
  rememberedLists: RememberedLists
  /** upstream watches, ended when the cloud goes away */
  streams: Pick<LiveStreams, 'addUpstreamWatch' | 'removeUpstreamWatch'>
  observer?: Pick<RequestObserver, 'watchOpened' | 'refiltered' | 'listOverCap' | 'slowClientEnded'>
  /** an upstream watch with BOOKMARKs that is silent this long is ended (half-open link); 0: never */
  watchSilenceMs: number
  /** a list or get bigger than this is relayed as it streams, neither recorded nor filtered (--max-list-bytes); default no cap */
  maxListBytes?: number
  clientLimits?: ClientLimits
  /** the hub's view of the cloud: a read still waiting for the apiserver when it goes offline is given up at once */
  cloud?: { on(event: 'change', listener: (state: string) => void): unknown; off(event: 'change', listener: (state: string) => void): unknown }
}

/** Reads that wait on the cloud: given up when the hub declares it down, for the cache to answer. Writes never are (they may be applied). */
const readVerbs = new Set(['get', 'list'])
const giveUpGraceMs = 1_000

const gunzipAsync = promisify(gunzip)

/** A resource whose answers pass the cap is logged once in this long (each one is counted). */
const overCapLogEveryMs = 10 * 60_000
/** resources remembered as logged; past it the memory starts again (clients make up resource names) */
const overCapLogged = 256

function asksForBookmarks(info: RequestInfo): boolean {
  return queryFlag(info, 'allowWatchBookmarks')
}

export class UpstreamAnswerer implements Answerer {
  constructor(private readonly options: UpstreamAnswererOptions) {}

  /** when each resource's answer over the cap was last logged */
  private readonly overCapLoggedAt = new Map<string, number>()

  /** One line per resource in overCapLogEveryMs (a kubelet relisting a huge scope must not fill the log), every one counted. */
  private overCap(info: RequestInfo, bytes: number): void {
    this.options.observer?.listOverCap?.('relay')
    const resource = qualifiedResource(info) || info.path.slice(0, 100)
    const now = Date.now()
    const last = this.overCapLoggedAt.get(resource)
    if (last !== undefined && now - last < overCapLogEveryMs) return
    if (this.overCapLoggedAt.size >= overCapLogged) this.overCapLoggedAt.clear()
    this.overCapLoggedAt.set(resource, now)
    this.options.log.warn(
      { component: info.component, verb: info.verb, resource, bytes, maxListBytes: this.options.maxListBytes },
      'answer over --max-list-bytes: relayed as it streams, neither cached nor filtered',
    )
  }

  async answer(call: Call): Promise<Outcome> {
    const { info, req, res, body, plan, filter, clientGone } = call
    const { log, cloud } = this.options
    // the client going away, or (a read) the cloud declared down before the apiserver answered
    let cloudWentDown = false
    let giveUp: NodeJS.Timeout | undefined
    const signal = cloud && readVerbs.has(info.verb) ? new ClientGone() : clientGone
    const onCloud = (state: string) => {
      if (state !== 'offline' || giveUp) return
      // a request failing on its own (a refused connection) says why better than the verdict: a moment for it first
      giveUp = setTimeout(() => {
        cloudWentDown = true
        signal.abort()
      }, giveUpGraceMs)
    }
    if (signal !== clientGone) {
      if (clientGone.aborted) signal.abort()
      else clientGone.once('abort', () => signal.abort())
      cloud!.on('change', onCloud)
    }
    let upstreamRes: UpstreamResponse
    try {
      upstreamRes = await this.options.upstream.request({
        method: req.method ?? 'GET',
        // the hub always asks for BOOKMARKs: they tell a live link from a half-open one, and how far
        // the stream has come (lib/watch/refilter.ts); clients that did not ask never see them
        // written from what the hub read, never the client's string: the apiserver reads what the hub did
        path: upstreamPath(info, isWatch(info) && !asksForBookmarks(info) ? { allowWatchBookmarks: 'true' } : undefined),
        headers: upstreamRequestHeaders(req.headers),
        body,
        signal,
        longRunning: isWatch(info) || info.verb === 'proxy',
      })
    } catch (error) {
      if (clientGone.aborted) return answered('cloud')
      if (cloudWentDown) return unavailable('the cloud went offline before the apiserver answered')
      if (error instanceof UpstreamUnavailableError) {
        log.warn({ component: info.component, verb: info.verb, path: info.path, err: error.message }, 'upstream unavailable')
        return unavailable(error.message)
      }
      const message = `apiserver connection failed before it answered (the request may have been applied): ${describeError(error)}`
      log.warn({ component: info.component, verb: info.verb, path: info.path, err: message }, 'upstream failed')
      sendStatus(res, serviceUnavailable(message))
      return answered('hub')
    } finally {
      // once the apiserver has answered, the answer is relayed whatever the hub thinks of the cloud
      cloud?.off('change', onCloud)
      clearTimeout(giveUp)
    }

    const contentType = (upstreamRes.headers['content-type'] as string | undefined) ?? ''
    const format = formatOf(contentType)
    const framing = framingOf(contentType)
    // a create answers 201 Created with what was stored, which is recorded as a 200 is
    const ok = upstreamRes.statusCode === 200 || (upstreamRes.statusCode === 201 && info.verb === 'create')
    const shape = shapeOf(plan, info, {
      ok,
      framed: framing !== undefined,
      encoded: upstreamRes.headers['content-encoding'] !== undefined,
      decodable: format !== undefined,
    })
    const recorder = ok && ((plan.record === 'objects' && format) || plan.record === 'document') ? this.options.recorder : undefined
    const outgoing = ok && format ? filter : undefined
    if (shape === 'watch') {
      res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
      res.flushHeaders()
      const closed = this.options.observer?.watchOpened(info, 'cloud')
      try {
        await this.relayWatch(info, format, upstreamRes, res, framing!, recorder, outgoing)
      } finally {
        closed?.()
      }
    } else if (shape === 'whole') {
      await bufferThenSend(
        upstreamRes,
        res,
        async decoded => {
          if (recorder) {
            if (plan.record === 'document') await recorder.recordDocument(info, contentType, decoded)
            else if (info.verb === 'list') await recorder.recordListPage(info, format!, decoded)
            else await recorder.recordObject(info, format!, decoded)
          }
          // a filtered list the cache does not keep: its watch will start from it
          else if (outgoing && info.verb === 'list') this.options.rememberedLists.remember(info, decodeList(format!, decoded).items)
          return outgoing ? outgoing.body(format!, decoded) : decoded
        },
        () => notFound(info.resource, info.apiGroup, info.name),
        { cap: this.options.maxListBytes, stallMs: this.options.clientLimits?.stallTimeoutMs },
        bytes => this.overCap(info, bytes),
      )
    } else {
      res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
      if (isWatch(info)) res.flushHeaders()
      const sent = await streamBody(upstreamRes.body, res, { stallMs: this.options.clientLimits?.stallTimeoutMs })
      if (sent === 'stalled') this.options.observer?.slowClientEnded?.(isWatch(info) ? 'watch' : 'list', 'stalled')
    }
    return answered('cloud')
  }

  /**
   * A watch: each frame is recorded (the cache) as it arrives, then at its turn tracked and filtered
   * and sent; a filtered watch remembers its objects, so a topology change can send what now filters
   * differently. It starts from what the client listed: the cache's copy for cached components, the
   * list the hub passed on for the others.
   */
  private async relayWatch(
    info: RequestInfo,
    format: WireFormat | undefined,
    upstreamRes: UpstreamResponse,
    res: ServerResponse,
    framing: WireFormat,
    recorder: Recorder | undefined,
    filter: ResponseFilter | undefined,
  ): Promise<void> {
    const { observer, filteredWatches, rememberedLists, streams } = this.options
    const recording = recorder && format ? recorder.watch(info, format) : undefined
    const clientBookmarks = asksForBookmarks(info)
    let tracker: FilteredWatch | undefined
    let seeding: Promise<void> | undefined
    let untrack = () => {}
    const stages: WatchStages = {
      prepare:
        recording || filter
          ? async frame => {
              await seeding
              await recording?.record(frame)
            }
          : undefined,
      take: frame => {
        const filtered = !tracker && filter && format ? filter.frame(format, frame) : frame
        const out = tracker ? tracker.take(frame) : filtered ? [filtered] : []
        // a BOOKMARK the hub asked for, not the client: it moved the tracker on, and goes no further
        return clientBookmarks || !isBookmark(framing, frame) ? out : out.slice(1)
      },
      onInject: inject => {
        if (!filter || !format) return
        const watch = new FilteredWatch(format, filter, inject, {
          startResourceVersion: info.resourceVersion,
          onSent: count => observer?.refiltered?.(count),
        })
        tracker = watch
        const store = recorder?.store
        seeding = store
          ? store.list(resourceKeyOf(info), scopeOf(info)).then(
              list => watch.seed(list?.items ?? []),
              () => {},
            )
          : Promise.resolve(watch.seed(rememberedLists.take(info)))
        const unregister = filteredWatches.add(watch)
        untrack = () => {
          unregister()
          watch.close()
        }
      },
    }
    const stop = () => upstreamRes.body.destroy()
    streams.addUpstreamWatch(stop)
    try {
      // with BOOKMARKs the apiserver speaks about every minute: a watch silent much longer is a dead link
      const ended = await streamWatch(
        upstreamRes.body,
        new WatchFrameSplitter(framing),
        responseSink(res),
        stages,
        this.options.watchSilenceMs,
        this.options.clientLimits?.stallTimeoutMs,
      )
      if (ended === 'stalled') observer?.slowClientEnded?.('watch', 'stalled')
    } finally {
      streams.removeUpstreamWatch(stop)
      untrack()
    }
  }
}

/**
 * A get or list to record or filter: the whole body is read, recorded durably, and only then sent:
 * an object a client has seen is an object a restarted hub still has. What the apiserver sent goes
 * out byte for byte (gzip included) unless a filter changed it. A body over `cap` bytes as received
 * (compressed, when gzipped) is not held: what was read and the rest go out as they come, neither
 * recorded nor filtered.
 */
async function bufferThenSend(
  upstreamRes: UpstreamResponse,
  res: ServerResponse,
  process: (decoded: Buffer) => Promise<Buffer | null>,
  gone: () => Status,
  { cap, stallMs }: { cap: number | undefined; stallMs: number | undefined },
  overCap: (bytes: number) => void,
): Promise<void> {
  const relay = async (head: Buffer[], bytes: number) => {
    overCap(bytes)
    res.writeHead(upstreamRes.statusCode, clientResponseHeaders(upstreamRes.headers))
    await streamBody(upstreamRes.body, res, { head, stallMs })
  }
  const declared = declaredLength(upstreamRes.headers)
  if (cap !== undefined && declared !== undefined && declared > cap) return relay([], declared)
  let raw: Buffer
  try {
    if (cap === undefined) raw = await readAll(upstreamRes.body)
    else {
      const read = await readUpTo(upstreamRes.body, cap)
      if (read.over) return relay(read.chunks, read.bytes)
      raw = Buffer.concat(read.chunks)
    }
  } catch {
    res.destroy() // the upstream broke mid-body: the client must not take a truncated answer as whole
    return
  }
  const encoding = upstreamRes.headers['content-encoding']
  let decoded: Buffer | undefined = raw
  if (encoding === 'gzip') {
    try {
      // on the thread pool: a big list must not stall every other client; the cap holds for what it inflates to too
      decoded = await gunzipAsync(raw, cap === undefined ? {} : { maxOutputLength: cap })
    } catch (error) {
      // not the cache's to fix: the client gets the bytes (and, if broken, its own error)
      decoded = undefined
      if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') overCap(raw.length)
    }
  } else if (encoding) {
    decoded = undefined
  }
  const out = decoded ? await process(decoded) : raw
  // a single object the client's filters drop is, for that client, not there
  if (out === null) return sendStatus(res, gone())
  const headers = clientResponseHeaders(upstreamRes.headers)
  const body = out === decoded ? raw : out
  if (body !== raw) delete headers['content-encoding'] // filtered: sent plain, the client accepts either
  headers['content-length'] = body.length
  res.writeHead(upstreamRes.statusCode, headers)
  res.end(body)
}
