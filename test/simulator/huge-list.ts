// A list far bigger than memory, on command: lists of one resource answer `bytes` of valid JSON
// (a <Kind>List of generated objects), made as they are written and written as the client takes
// them, so a test can send a gigabyte through the hub without the simulator holding it. What was
// sent is counted and hashed, for the test to compare with what its client received.
import { createHash } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { RequestInfo } from '../../lib/api/requestinfo.ts'

export interface HugeListSpec {
  group: string
  version: string
  resource: string
  /** the items' kind (the list's is <kind>List) */
  kind: string
  /** about how long the body is: whole items only, never more */
  bytes: number
  /** send Content-Length (the apiserver streams big lists chunked, without) */
  contentLength?: boolean
}

/** one answer sent: its bytes and sha256, once it is written whole (undefined if the client left first) */
export interface HugeListSent {
  path: string
  bytes: number
  sha256?: string
}

const itemBytes = 64 * 1024
const batchItems = 16

function apiVersionOf(spec: HugeListSpec): string {
  return spec.group ? `${spec.group}/${spec.version}` : spec.version
}

/** The body's parts: envelope, item template (the name's digits at `digitsAt`), end. */
function layout(spec: HugeListSpec, resourceVersion: string) {
  const apiVersion = apiVersionOf(spec)
  const head = Buffer.from(`{"kind":"${spec.kind}List","apiVersion":"${apiVersion}","metadata":{"resourceVersion":"${resourceVersion}"},"items":[`)
  const tail = Buffer.from(']}')
  const before = `{"apiVersion":"${apiVersion}","kind":"${spec.kind}","metadata":{"name":"huge-`
  const after = `","namespace":"default","resourceVersion":"${resourceVersion}"},"data":{"pad":"`
  const close = '"}}'
  const pad = itemBytes - (before.length + 8 + after.length + close.length)
  const item = Buffer.from(`${before}00000000${after}${'x'.repeat(pad)}${close}`)
  const room = spec.bytes - head.length - tail.length
  const count = Math.max(0, Math.floor((room + 1) / (item.length + 1)))
  const total = head.length + tail.length + count * item.length + Math.max(0, count - 1)
  return { head, tail, item, digitsAt: before.length, count, total }
}

export class HugeLists {
  private readonly specs = new Map<string, HugeListSpec>()
  readonly sent: HugeListSent[] = []

  private static key(group: string, version: string, resource: string): string {
    return `${group}/${version}/${resource}`
  }

  /** Lists of `spec`'s resource answer a generated body of about spec.bytes from now on. */
  set(spec: HugeListSpec): void {
    this.specs.set(HugeLists.key(spec.group, spec.version, spec.resource), spec)
  }

  clear(): void {
    this.specs.clear()
  }

  /** The exact length of the body a spec makes. */
  static length(spec: HugeListSpec): number {
    return layout(spec, '1').total
  }

  /** Answers a list of a resource set up as huge; false for any other request. */
  answers(info: RequestInfo, res: ServerResponse, resourceVersion: string): boolean {
    if (info.verb !== 'list') return false
    const spec = this.specs.get(HugeLists.key(info.apiGroup, info.apiVersion, info.resource))
    if (!spec) return false
    void this.write(spec, info.path, res, resourceVersion)
    return true
  }

  private async write(spec: HugeListSpec, path: string, res: ServerResponse, resourceVersion: string): Promise<void> {
    const { head, tail, item, digitsAt, count, total } = layout(spec, resourceVersion)
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' }
    if (spec.contentLength) headers['Content-Length'] = String(total)
    res.writeHead(200, headers)
    const hash = createHash('sha256')
    const record: HugeListSent = { path, bytes: 0 }
    this.sent.push(record)
    let closed = false
    res.once('close', () => (closed = true))
    const send = async (chunk: Buffer) => {
      hash.update(chunk)
      record.bytes += chunk.length
      if (res.write(chunk)) return
      await new Promise<void>(resolve => {
        const done = () => {
          res.off('drain', done)
          res.off('close', done)
          resolve()
        }
        res.on('drain', done)
        res.on('close', done)
      })
    }
    await send(head)
    for (let i = 0; i < count && !closed;) {
      const n = Math.min(batchItems, count - i)
      // a fresh buffer per write: the socket keeps it until sent
      const batch = Buffer.allocUnsafe(n * (item.length + 1))
      let at = 0
      for (let k = 0; k < n; k++, i++) {
        if (i > 0) batch[at++] = 0x2c // ,
        item.copy(batch, at)
        batch.write(String(i).padStart(8, '0'), at + digitsAt, 'latin1')
        at += item.length
      }
      await send(batch.subarray(0, at))
    }
    if (closed) return
    await send(tail)
    record.sha256 = hash.digest('hex')
    res.end()
  }
}
