// An answer the hub makes itself (from a cache, not relayed), as data: lib/front/ writes it. Domain
// code returns a Reply (200 with a body) or a Status (an error), never touches the response.
import type { Status } from './status.ts'

export interface Reply {
  contentType: string
  /** a list's body comes in parts that share the cache's bytes, written in order and never joined */
  body: Buffer | Buffer[]
  /**
   * answered from the hub's disk cache while the cloud is away: curl -i shows `x-outpost-cache: hit`,
   * and whose copy answered (`x-outpost-cache-source`: a component, when one is named)
   */
  cached?: { component?: string }
}

export type Answer = Reply | Status
