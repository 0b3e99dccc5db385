// A client that plays a real kubelet v1.24 against any base URL (the hub or the simulator), as
// recorded in fixtures/apiserver-v1.24/kubelet-writes/: its User-Agent, its Accept (protobuf, then
// JSON), protobuf request bodies, and the requests it makes at first start and after a restart.
// Every answer is returned as client-go would see it: status, the envelope's apiVersion and kind
// (what its decoder looks up a registered type by) and the decoded object, list or Status.
import http from 'node:http'
import https from 'node:https'
import { gunzipSync } from 'node:zlib'
import { framingOf, WatchFrameSplitter } from '../../lib/api/frames.ts'
import { decodeUnknown } from '../../lib/codec/protobuf.ts'
import { decodeBody, decodeWatchFrame, encodeBody } from '../../lib/codec/typed.ts'
import { request } from '../simulator/testclient.ts'

export const kubeletUserAgent = 'kubelet/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
/** kubelet's --kube-api-content-type default: protobuf bodies, protobuf answers preferred */
export const kubeletAccept = 'application/vnd.kubernetes.protobuf,application/json'
/** client-go's Accept when its content type is JSON (kubectl, client-node alike) */
export const jsonAccept = 'application/json, */*'
export const protobufContentType = 'application/vnd.kubernetes.protobuf'
export const nodeLeaseNamespace = 'kube-node-lease'
/** the annotation kubelet's CSI plugin puts on its CSINode (v1.24, in-tree plugins migrated) */
export const migratedPluginsAnnotation = 'storage.alpha.kubernetes.io/migrated-plugins'
const migratedPlugins = 'kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd'
const leaseDurationSeconds = 40

export type WireFormat = 'protobuf' | 'json'

export interface KubeletClientOptions {
  /** https options (ca, cert, key) for an https base URL */
  tls?: https.RequestOptions
  /** per request (default 10 s, the timeout of kubelet's heartbeat client) */
  timeoutMs?: number
}

export interface KubeletAnswer {
  status: number
  contentType: string
  /** the envelope's: runtime.Unknown's TypeMeta for protobuf, the document's for JSON ('' when absent) */
  apiVersion?: string
  kind?: string
  /** the decoded object, list or Status, as JSON */
  body?: any
  /** why a body that was sent could not be decoded (a kind the decoder does not know, malformed bytes) */
  decodeError?: string
}

export interface KubeletWatch {
  status: number
  contentType: string
  /** decoded events so far, in order (a frame that does not decode is `{type: 'UNDECODABLE', object: {message}}`) */
  events: { type: string; object: any }[]
  /** the first event (already received or to come) that matches */
  waitFor(match: (event: { type: string; object: any }) => boolean, timeoutMs?: number): Promise<{ type: string; object: any }>
  close(): void
}

export interface Informers {
  csiDrivers: KubeletAnswer
  runtimeClasses: KubeletAnswer
  /** the watches that followed each 200 list, from its resourceVersion */
  watches: { csiDrivers?: KubeletWatch; runtimeClasses?: KubeletWatch }
  /** ends the watches */
  stop(): void
}

export interface FirstStart {
  leaseGet: KubeletAnswer
  leaseCreate: KubeletAnswer
  csiNodeGet: KubeletAnswer
  csiNodeCreate: KubeletAnswer
  informers: Informers
}

export interface AfterRestart {
  lease: KubeletAnswer
  csiNode: KubeletAnswer
  csiDrivers: KubeletAnswer
  runtimeClasses: KubeletAnswer
}

export const paths = {
  leases: `/apis/coordination.k8s.io/v1/namespaces/${nodeLeaseNamespace}/leases`,
  lease: (node: string) => `/apis/coordination.k8s.io/v1/namespaces/${nodeLeaseNamespace}/leases/${encodeURIComponent(node)}`,
  csiNodes: '/apis/storage.k8s.io/v1/csinodes',
  csiNode: (node: string) => `/apis/storage.k8s.io/v1/csinodes/${encodeURIComponent(node)}`,
  csiDrivers: '/apis/storage.k8s.io/v1/csidrivers',
  runtimeClasses: '/apis/node.k8s.io/v1/runtimeclasses',
}

/** The heartbeat client's requests (Lease) carry its 10 s client timeout in the query, as client-go sends it. */
const heartbeatQuery = '?timeout=10s'
/** A reflector's first list: from the watch cache, in pages of 500 (client-go's pager). */
const informerListQuery = '?limit=500&resourceVersion=0'

/** A MicroTime as Go writes it: RFC 3339 with 6 fractional digits. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z')
}

/** Go's time.Duration.String() for whole seconds under an hour (`7m30s`, `45s`). */
function goDuration(seconds: number): string {
  const minutes = Math.floor(seconds / 60)
  return minutes > 0 ? `${minutes}m${seconds % 60}s` : `${seconds}s`
}

function headers(format: WireFormat, body?: Buffer): Record<string, string> {
  const out: Record<string, string> = {
    'User-Agent': kubeletUserAgent,
    Accept: format === 'protobuf' ? kubeletAccept : jsonAccept,
    'Accept-Encoding': 'gzip',
  }
  if (body) out['Content-Type'] = protobufContentType
  return out
}

/** An answer as client-go's decoder reads it. */
function readAnswer(status: number, contentType: string, body: Buffer): KubeletAnswer {
  const answer: KubeletAnswer = { status, contentType }
  if (body.length === 0) return answer
  try {
    if (framingOf(contentType) === 'protobuf') {
      const envelope = decodeUnknown(body)
      answer.apiVersion = envelope.apiVersion
      answer.kind = envelope.kind
      answer.body = decodeBody(body)
    } else if (framingOf(contentType) === 'json') {
      answer.body = JSON.parse(body.toString('utf8'))
      answer.apiVersion = typeof answer.body?.apiVersion === 'string' ? answer.body.apiVersion : ''
      answer.kind = typeof answer.body?.kind === 'string' ? answer.body.kind : ''
    } else {
      answer.decodeError = `not a Kubernetes body: ${contentType}: ${body.toString('utf8').slice(0, 200)}`
    }
  } catch (err) {
    answer.decodeError = (err as Error).message
  }
  return answer
}

async function send(baseUrl: string, method: string, path: string, format: WireFormat, object: unknown, opts: KubeletClientOptions): Promise<KubeletAnswer> {
  const body = object === undefined ? undefined : encodeBody(object)
  const reply = await request(new URL(path, baseUrl).href, { method, headers: headers(format, body), body, tls: opts.tls, timeoutMs: opts.timeoutMs ?? 10_000 })
  const bytes = reply.headers['content-encoding'] === 'gzip' ? gunzipSync(reply.raw) : reply.raw
  return readAnswer(reply.status, String(reply.headers['content-type'] ?? ''), bytes)
}

/** The Lease kubelet's lease controller creates (newLease(nil)); owned by the Node when its uid is known. */
export function newLease(nodeName: string, renewTime: string, nodeUid?: string): any {
  return {
    kind: 'Lease',
    apiVersion: 'coordination.k8s.io/v1',
    metadata: { name: nodeName, namespace: nodeLeaseNamespace, creationTimestamp: null, ...ownedBy(nodeName, nodeUid) },
    spec: { holderIdentity: nodeName, leaseDurationSeconds, renewTime },
  }
}

/** The CSINode kubelet's CSI plugin creates at start, before any driver registered. */
export function newCsiNode(nodeName: string, nodeUid?: string): any {
  return {
    kind: 'CSINode',
    apiVersion: 'storage.k8s.io/v1',
    metadata: { name: nodeName, creationTimestamp: null, annotations: { [migratedPluginsAnnotation]: migratedPlugins }, ...ownedBy(nodeName, nodeUid) },
    spec: { drivers: null },
  }
}

function ownedBy(nodeName: string, nodeUid: string | undefined): { ownerReferences?: unknown[] } {
  return nodeUid === undefined ? {} : { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeUid }] }
}

/**
 * kubelet's first start: GET its Lease (404 expected) then create it; GET its CSINode (404 expected)
 * then create it; list (and watch) CSIDrivers and RuntimeClasses as its informers do. A create is
 * only sent after a 404, as kubelet does. Call `informers.stop()` when done.
 */
export async function firstStart(
  baseUrl: string,
  nodeName: string,
  opts: KubeletClientOptions & { nodeUid?: string; renewTime?: string } = {},
): Promise<FirstStart> {
  const skipped: KubeletAnswer = { status: 0, contentType: '' }
  const leaseGet = await send(baseUrl, 'GET', paths.lease(nodeName) + heartbeatQuery, 'protobuf', undefined, opts)
  const lease = newLease(nodeName, opts.renewTime ?? microTime(new Date()), opts.nodeUid)
  const leaseCreate = leaseGet.status === 404 ? await send(baseUrl, 'POST', paths.leases + heartbeatQuery, 'protobuf', lease, opts) : skipped
  const csiNodeGet = await send(baseUrl, 'GET', paths.csiNode(nodeName), 'protobuf', undefined, opts)
  const csiNodeCreate = csiNodeGet.status === 404 ? await send(baseUrl, 'POST', paths.csiNodes, 'protobuf', newCsiNode(nodeName, opts.nodeUid), opts) : skipped
  const informers = await startInformers(baseUrl, opts)
  return { leaseGet, leaseCreate, csiNodeGet, csiNodeCreate, informers }
}

/**
 * A renewal by kubelet's lease controller: the whole Lease of `previous` (the last answer, its
 * resourceVersion included) with a new renewTime, PUT in protobuf; no GET before it.
 */
export async function renewLease(baseUrl: string, previous: any, opts: KubeletClientOptions & { renewTime?: string } = {}): Promise<KubeletAnswer> {
  const lease = structuredClone(previous)
  lease.kind = 'Lease'
  lease.apiVersion = 'coordination.k8s.io/v1'
  lease.spec = { ...lease.spec, renewTime: opts.renewTime ?? microTime(new Date()) }
  return send(baseUrl, 'PUT', paths.lease(lease.metadata.name) + heartbeatQuery, 'protobuf', lease, opts)
}

/** The CSIDriver and RuntimeClass informers: each a list (limit=500, resourceVersion=0), then a watch from its version. */
export async function startInformers(baseUrl: string, opts: KubeletClientOptions & { format?: WireFormat; timeoutSeconds?: number } = {}): Promise<Informers> {
  const format = opts.format ?? 'protobuf'
  const csiDrivers = await send(baseUrl, 'GET', paths.csiDrivers + informerListQuery, format, undefined, opts)
  const runtimeClasses = await send(baseUrl, 'GET', paths.runtimeClasses + informerListQuery, format, undefined, opts)
  const watches: Informers['watches'] = {}
  const from = (list: KubeletAnswer) => list.body?.metadata?.resourceVersion as string | undefined
  if (csiDrivers.status === 200 && from(csiDrivers)) watches.csiDrivers = await informerWatch(baseUrl, paths.csiDrivers, from(csiDrivers)!, opts)
  if (runtimeClasses.status === 200 && from(runtimeClasses))
    watches.runtimeClasses = await informerWatch(baseUrl, paths.runtimeClasses, from(runtimeClasses)!, opts)
  return {
    csiDrivers,
    runtimeClasses,
    watches,
    stop: () => {
      watches.csiDrivers?.close()
      watches.runtimeClasses?.close()
    },
  }
}

/**
 * After kubelet (and whatever is between it and the apiserver) restarted: what it reads before it
 * writes again. `json` reads as a JSON client-go (kubectl, client-node) would.
 */
export async function readAfterRestart(baseUrl: string, nodeName: string, format: WireFormat, opts: KubeletClientOptions = {}): Promise<AfterRestart> {
  return {
    lease: await send(baseUrl, 'GET', paths.lease(nodeName) + heartbeatQuery, format, undefined, opts),
    csiNode: await send(baseUrl, 'GET', paths.csiNode(nodeName), format, undefined, opts),
    csiDrivers: await send(baseUrl, 'GET', paths.csiDrivers + informerListQuery, format, undefined, opts),
    runtimeClasses: await send(baseUrl, 'GET', paths.runtimeClasses + informerListQuery, format, undefined, opts),
  }
}

/**
 * A reflector's watch after its list: allowWatchBookmarks, the list's resourceVersion, a timeout of
 * timeoutSeconds (client-go picks 5 to 10 minutes) also sent as `timeout`, in client-go's key order.
 */
export function informerWatch(
  baseUrl: string,
  path: string,
  resourceVersion: string,
  opts: KubeletClientOptions & { format?: WireFormat; timeoutSeconds?: number } = {},
): Promise<KubeletWatch> {
  const timeoutSeconds = opts.timeoutSeconds ?? 450
  const query = `?allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(resourceVersion)}&timeout=${goDuration(timeoutSeconds)}&timeoutSeconds=${timeoutSeconds}&watch=true`
  const url = new URL(path + query, baseUrl)
  const open = (url.protocol === 'https:' ? https.request : http.request) as typeof http.request
  return new Promise((resolve, reject) => {
    const req = open(url, { headers: headers(opts.format ?? 'protobuf'), agent: false, ...(opts.tls ?? {}) }, res => {
      const contentType = String(res.headers['content-type'] ?? '')
      const events: { type: string; object: any }[] = []
      const waiters = new Set<() => void>()
      const framing = framingOf(contentType)
      if (res.statusCode === 200 && framing) {
        const frames = res.pipe(new WatchFrameSplitter(framing))
        frames.on('data', (frame: Buffer) => {
          events.push(decodeEvent(frame, framing))
          for (const wake of [...waiters]) wake()
        })
        frames.on('error', () => req.destroy())
      } else res.resume()
      res.on('error', () => {})
      resolve({
        status: res.statusCode ?? 0,
        contentType,
        events,
        close: () => req.destroy(),
        waitFor: (match, timeoutMs = 10_000) =>
          new Promise((found, fail) => {
            const check = () => {
              const event = events.find(match)
              if (!event) return false
              waiters.delete(check)
              clearTimeout(timer)
              found(event)
              return true
            }
            const timer = setTimeout(() => {
              waiters.delete(check)
              fail(new Error(`no matching watch event within ${timeoutMs} ms (${events.length} received)`))
            }, timeoutMs)
            if (!check()) waiters.add(check)
          }),
      })
    })
    req.on('error', reject)
    req.end()
  })
}

function decodeEvent(frame: Buffer, framing: 'json' | 'protobuf'): { type: string; object: any } {
  try {
    return framing === 'protobuf' ? decodeWatchFrame(frame) : JSON.parse(frame.toString('utf8'))
  } catch (err) {
    return { type: 'UNDECODABLE', object: { message: (err as Error).message } }
  }
}
