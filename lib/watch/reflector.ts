// One upstream list+watch, for ever, as client-go's Reflector: list, then watch from the list's
// version; a 410 or an ERROR event relists; failures back off as client-go's do; a watch silent
// past the apiserver's BOOKMARK period is a dead link and is ended (and counts as a failed watch).
// While the cloud is away it waits, and once it is back resumes the watch from the version it had
// reached: a short outage costs the apiserver no list at all, only the events it missed. A relist
// asks for a state not older than what it had reached (client-go's relistResourceVersion), so a
// lagging apiserver cannot take it back in time; only when the apiserver cannot give that (its
// history went back: etcd restored from a backup) does it list the present as it is, and the sink
// learns of the new history from a list older than what it holds. A sink seeded from disk is at a
// version already: its first list asks for a state not older than that one, on the same terms.
// Each watch asks for a timeout drawn as client-go draws it (watchTimeoutSeconds). What it reads goes to a sink (a
// watch cache, the topology context), decoded once into CachedObjects in the wire format asked for.
import { pipeline } from 'node:stream'
import type { Logger } from 'pino'
import { hubUserAgent } from '../config.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { connectionLost, describeError } from '../upstream/upstream.ts'
import type { LiveStreams } from './streams.ts'
import { WatchFrameSplitter, framingOf } from '../api/frames.ts'
import { SilenceGuard } from './pipeline.ts'
import { Backoff } from '../upstream/backoff.ts'
import { decodeEvent, decodeList } from '../cache/decode.ts'
import type { CachedObject } from '../cache/types.ts'
import type { WireFormat } from '../api/wire-format.ts'
import { BodyOverCapError, declaredLength, readAll } from '../upstream/read-all.ts'

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED'

export interface ReflectorSink {
  /**
   * a whole list: the state at `resourceVersion` (the first, or a relist after a 410 or an outage), in
   * the format the apiserver answered, with the kind and apiVersion its items have (the list's kind
   * without "List"); a sink that throws refuses the list (the reflector tries again later)
   */
  replace(items: CachedObject[], resourceVersion: string, format: WireFormat, type: { kind: string; apiVersion: string }): Promise<void> | void
  event(type: EventType, object: CachedObject): Promise<void> | void
  /** the stream has reached this version with no object to show for it (a list's end, a BOOKMARK); an event carries its own */
  progress(resourceVersion: string): void
  /**
   * the version of what the sink was seeded with (the disk's copy, offline), while it has not been
   * listed: the first list asks for a state not older than it
   */
  seeded?(): string | undefined
}

export interface ReflectorOptions {
  /**
   * where lists and watches go: asked at each request, so the source can change under a running
   * reflector; told (failed) of an answer that broke or did not decode, with the server that gave it
   */
  upstream: Pick<Upstream, 'request'> & { failed?(server: URL, reason: string): void }
  streams?: LiveStreams
  isOnline: () => boolean
  log: Logger
  /** what to ask for: `Accept` of lists and of watches */
  accept: { list: string; watch: string }
  silenceMs?: number
  backoff?: Backoff
  /** told of each request and its bytes, with the server that answered (the cloud's, or a pool leader's), for the metrics */
  observe?: { listed?(bytes: number, server: URL): void; watchOpened?(server: URL): () => void; received?(bytes: number, server: URL): void }
  /**
   * a list longer than this (bytes as received) is not read on (--max-list-bytes): the reflector stops
   * for good and says so through overCap, instead of listing again and again what it can never hold
   */
  maxListBytes?: number
  overCap?(bytes: number): void
  /** in [0, 1): spreads the upstream watches' timeouts (Math.random) */
  random?: () => number
}

export const jsonAccept = { list: 'application/json', watch: 'application/json' }
export const protobufAccept = { list: 'application/vnd.kubernetes.protobuf, */*', watch: 'application/vnd.kubernetes.protobuf, */*' }

class Relist extends Error {}
/** the apiserver cannot serve a state as new as the one asked for (HTTP 504 "Too large resource version", or 410) */
class VersionUnavailable extends Relist {}

/** watches failing from one version before the scope is listed again instead */
const maxWatchRetries = 3

/** client-go's minWatchTimeout: each upstream watch asks for a timeout in [it, twice it) */
export const minWatchTimeoutSeconds = 300

/**
 * The upstream watch's timeoutSeconds, as client-go's reflector picks it: a fleet that reconnected
 * at once (the cloud back after an outage) does not re-watch in lockstep every five minutes.
 */
export function watchTimeoutSeconds(random: number, minSeconds = minWatchTimeoutSeconds): number {
  return Math.floor(minSeconds * (1 + Math.min(Math.max(random, 0), 1 - Number.EPSILON)))
}

export class Reflector {
  private stopped = false
  /** the version the sink holds: listed, then moved on by the watch; '' before the first list */
  private reached = ''
  /** what the next list asks for: '0' at first (any state, cheap), then not older than what was reached; '' when the apiserver cannot give that */
  private listFrom = '0'
  private stop = () => {}
  private wake = () => {}
  private resumed = false

  /** `path` with the scope's query (labelSelector, fieldSelector) already on it, or none */
  constructor(
    private readonly path: string,
    /** what the resource is called in messages */
    private readonly resource: string,
    private readonly sink: ReflectorSink,
    private readonly options: ReflectorOptions,
  ) {}

  /** Runs until halt(); `onListed` is called after each successful list. */
  async run(onListed: () => void = () => {}): Promise<void> {
    let backoff = this.options.backoff ?? new Backoff()
    let failedWatches = 0
    while (!this.stopped) {
      if (this.resumed && !this.options.backoff) backoff = new Backoff()
      this.resumed = false
      const from = this.reached
      // seeded from disk: the first list must not take the cache back past what it holds (a lagging apiserver's state)
      const seeded = !this.reached && this.listFrom === '0' ? this.sink.seeded?.() : undefined
      if (seeded) this.listFrom = seeded
      const asked = this.listFrom
      if (!this.options.isOnline()) {
        // the version is kept: once the cloud is back the watch resumes from it, and the apiserver
        // replays what changed meanwhile (or answers 410, and then the scope is listed again)
        await this.sleep(1_000)
        continue
      }
      try {
        if (!this.reached) {
          this.reached = await this.list(this.listFrom)
          this.listFrom = this.reached
          onListed()
        }
        this.interrupted = false // it concerns an open watch only
        await this.watch()
        failedWatches = 0
      } catch (error) {
        if (error instanceof BodyOverCapError) {
          this.stopped = true
          this.options.overCap?.(error.bytes)
          break
        }
        if (this.interrupted && !(error instanceof Relist)) {
          this.interrupted = false
          continue
        }
        if (this.reached !== from) failedWatches = 0 // it got somewhere before it failed
        // a 410 or an ERROR event lists again; so does a watch that keeps failing from the same version
        if (error instanceof Relist || !this.reached || ++failedWatches >= maxWatchRetries) {
          if (this.reached) this.listFrom = this.reached
          if (error instanceof VersionUnavailable) this.listFrom = ''
          this.reached = ''
          failedWatches = 0
        }
        if (this.stopped) break
        // as client-go's reflector: every failure, a 410 included, waits its backoff before the next
        // attempt; a list the apiserver could not give as new as asked is asked again for the present at once
        const wait = error instanceof VersionUnavailable && from === '' && asked !== '' ? 0 : backoff.next()
        // a lost connection is an outage's, which the hub's cloud line tells once: each cache's retries are detail
        const level = error instanceof Relist || connectionLost(error) ? 'debug' : 'warn'
        this.options.log[level](
          { resource: this.resource, err: describeError(error), retryInMs: wait },
          `${this.resource}: list/watch failed, retrying in ${wait} ms`,
        )
        await this.sleep(wait)
      }
    }
  }

  /** The cloud is back: a wait (offline, or a failure's backoff) ends now, and the next failure backs off from the start. */
  resume(): void {
    this.resumed = true
    this.wake()
  }

  halt(): void {
    this.stopped = true
    this.stop()
    this.wake()
  }

  /**
   * The open watch is dropped on purpose (the source changed): not a failure, so no backoff and
   * no count towards a relist; the loop watches again at once, from where it was, on the new source.
   */
  interrupt(): void {
    this.interrupted = true
    this.stop()
  }

  private interrupted = false

  private sleep(ms: number): Promise<void> {
    return new Promise(resolve => {
      const timer = setTimeout(resolve, ms)
      timer.unref()
      this.wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }

  private request(path: string, accept: string, longRunning: boolean) {
    return this.options.upstream.request({ method: 'GET', path, headers: { accept, 'user-agent': hubUserAgent }, longRunning })
  }

  private withQuery(query: string): string {
    return `${this.path}${this.path.includes('?') ? '&' : '?'}${query}`
  }

  private async list(from: string): Promise<string> {
    const query = from === '' ? '' : from === '0' ? 'resourceVersion=0' : `resourceVersion=${from}&resourceVersionMatch=NotOlderThan`
    const res = await this.request(query ? this.withQuery(query) : this.path, this.options.accept.list, false)
    const cap = this.options.maxListBytes
    const declared = declaredLength(res.headers)
    if (cap !== undefined && declared !== undefined && declared > cap) {
      res.body.on('error', () => {})
      res.body.destroy()
      throw new BodyOverCapError(declared, cap)
    }
    const body = await readAll(res.body, cap)
    this.options.observe?.listed?.(body.length, res.server)
    if (res.statusCode === 504 || res.statusCode === 410)
      throw new VersionUnavailable(`list ${this.path} at ${from}: ${res.statusCode} ${body.toString().slice(0, 200)}`)
    if (res.statusCode !== 200) throw new Error(`list ${this.path}: ${res.statusCode} ${body.toString().slice(0, 200)}`)
    const format = framingOf(res.headers['content-type'] as string | undefined)
    if (!format) throw new Error(`list ${this.path}: unexpected content type ${String(res.headers['content-type'])}`)
    let list
    try {
      list = decodeList(format, body)
    } catch (error) {
      this.options.upstream.failed?.(res.server, `list ${this.resource}: ${(error as Error).message}`)
      throw new Error(`list ${this.resource}: ${(error as Error).message}`)
    }
    if (!list.resourceVersion) throw new Error(`list ${this.resource}: no resourceVersion`)
    await this.sink.replace(list.items, list.resourceVersion, format, { kind: list.kind, apiVersion: list.apiVersion })
    this.sink.progress(list.resourceVersion)
    return list.resourceVersion
  }

  /** Watches from `reached`, moving it on with every event and BOOKMARK the sink has taken. */
  private async watch(): Promise<void> {
    const res = await this.request(
      this.withQuery(
        `watch=true&allowWatchBookmarks=true&timeoutSeconds=${watchTimeoutSeconds((this.options.random ?? Math.random)())}&resourceVersion=${this.reached}`,
      ),
      this.options.accept.watch,
      true,
    )
    // destroying an answer not read to its end makes undici's body emit an error: nobody else listens for it once
    // the loop below is done (or before it starts), and an 'error' nobody hears ends the process
    res.body.on('error', () => {})
    if (res.statusCode !== 200) {
      res.body.destroy()
      if (res.statusCode === 410) throw new Relist(`watch ${this.path}: 410`)
      if (res.statusCode === 504) throw new VersionUnavailable(`watch ${this.path} from ${this.reached}: 504`)
      throw new Error(`watch ${this.path}: ${res.statusCode}`)
    }
    const format = framingOf(res.headers['content-type'] as string | undefined) ?? 'json'
    const stop = () => res.body.destroy()
    this.stop = stop
    // interrupted while the request was on its way (the source changed): this watch is already stale
    if (this.interrupted) stop()
    this.options.streams?.addUpstreamWatch(stop)
    const closed = this.options.observe?.watchOpened?.(res.server)
    let silent = false
    const silence = new SilenceGuard(this.options.silenceMs ?? 150_000, () => {
      silent = true
      stop()
    })
    try {
      for await (const chunk of pipeline(res.body, new WatchFrameSplitter(format), () => {})) {
        const frame = chunk as Buffer
        silence.heard()
        this.options.observe?.received?.(frame.length, res.server)
        const event = decodeEvent(format, frame)
        if (event.type === 'ERROR') throw new Relist(`watch ${this.path}: an ERROR event`) // 410 Expired or worse
        if (event.type === 'BOOKMARK') {
          this.reached = event.resourceVersion || this.reached
          this.sink.progress(this.reached)
        } else if (event.object) {
          // an event carries its own version to the sink; a wait only when the sink holds back
          const held = this.sink.event(event.type as EventType, event.object)
          if (held) await held
          this.reached = event.object.resourceVersion || this.reached
        }
      }
      // an apiserver whose history is behind the version watched from says nothing at all (its
      // BOOKMARKs are older than the watch): silence counts as a failed watch, and three relist
      if (silent) throw new Error(`watch ${this.path}: silent for ${this.options.silenceMs ?? 150_000} ms`)
    } catch (error) {
      // a stream that broke, or said what does not decode: its source is told (a pool's leader is left for the cloud)
      if (!(error instanceof Relist) && !this.interrupted && !this.stopped) this.options.upstream.failed?.(res.server, (error as Error).message)
      throw error
    } finally {
      silence.stop()
      this.options.streams?.removeUpstreamWatch(stop)
      closed?.()
      res.body.destroy()
    }
  }
}
