// Where the pool-wide list+watches go: the cloud, or (a follower of a node pool) the pool's leader.
// The reflectors that read through it ask it at every list and watch, and are told when it changes
// ('switch'), so they drop their open watch and resume from the version they reached at the new
// source: the resourceVersions are the apiserver's on either side, so a move costs no list.
import { EventEmitter } from 'node:events'
import type { Upstream, UpstreamRequest, UpstreamResponse } from './upstream.ts'

/** Where requests go; `failed` hears of an answer from `server` that broke or did not decode. */
export type RequestSource = Pick<Upstream, 'request'> & { failed?(server: URL, reason: string): void }

export class SourceSwitch extends EventEmitter {
  constructor(private current: RequestSource) {
    super()
  }

  request(req: UpstreamRequest): Promise<UpstreamResponse> {
    return this.current.request(req)
  }

  failed(server: URL, reason: string): void {
    this.current.failed?.(server, reason)
  }

  /** From now on requests go to `source`; the reflectors reading through this are told ('switch'). */
  use(source: RequestSource): void {
    if (source === this.current) return
    this.current = source
    this.emit('switch')
  }
}
