// How many requests the hub serves at once, as kube-apiserver's --max-requests-inflight: past the
// cap a 429 Status with Retry-After, which client-go retries. Short requests and long-running ones
// (watches, exec/attach/port-forward) are counted apart: a node keeps hundreds of watches open for
// ever, and they must not crowd out its reads. The node's own components (kubelet, kube-proxy)
// keep a reserved share of each cap, so a noisy pod cannot starve them.
import { failure } from '../api/status.ts'
import type { Status } from '../api/status.ts'

export type RequestKind = 'short' | 'long-running'

export interface InflightLimits {
  /** 0: no cap */
  maxInflight: number
  /** 0: no cap */
  maxLongRunning: number
}

/** The components the share is kept for: the ones a node cannot do without. */
export const nodeComponents: ReadonlySet<string> = new Set(['kubelet', 'kube-proxy'])

/** The part of each cap only the node's components may use. */
export const reservedShare = 0.2

export interface Slot {
  release(): void
}

const noSlot: Slot = { release() {} }

export class InflightLimiter {
  private readonly inUse: Record<RequestKind, number> = { short: 0, 'long-running': 0 }

  constructor(private readonly limits: InflightLimits) {}

  /** A slot to release when the request is done, or the Status to answer with instead. */
  admit(kind: RequestKind, component: string): Slot | Status {
    const cap = kind === 'short' ? this.limits.maxInflight : this.limits.maxLongRunning
    if (cap <= 0) return noSlot
    const limit = nodeComponents.has(component) ? cap : Math.max(1, Math.floor(cap * (1 - reservedShare)))
    if (this.inUse[kind] >= limit) {
      const flag = kind === 'short' ? '--max-requests-inflight' : '--max-long-running'
      const whose = nodeComponents.has(component) ? '' : ` (${Math.round(reservedShare * 100)} % of it kept for kubelet and kube-proxy)`
      return failure(429, `too many requests: the hub serves at most ${cap} ${kind} requests at once${whose}, ${flag}; retry`, 'TooManyRequests', {
        retryAfterSeconds: 1,
      })
    }
    this.inUse[kind]++
    let released = false
    return {
      release: () => {
        if (released) return
        released = true
        this.inUse[kind]--
      },
    }
  }

  get counts(): Readonly<Record<RequestKind, number>> {
    return { ...this.inUse }
  }
}

/**
 * Bytes of request bodies held at once. A body is read whole (so a request can go to the next
 * apiserver after a connection failure) and held until its response is done: 200 requests of
 * 3 MiB each would be 600 MiB. Past the cap, a 429 as for a request over --max-requests-inflight;
 * kubelet and kube-proxy keep their share.
 */
export class BodyBudget {
  private held = 0

  constructor(readonly maxBytes: number) {}

  /** Takes `bytes` for a request of `component`; false when that would pass its part of the cap. */
  take(bytes: number, component: string): boolean {
    const limit = nodeComponents.has(component) ? this.maxBytes : this.maxBytes * (1 - reservedShare)
    if (this.held + bytes > limit) return false
    this.held += bytes
    return true
  }

  give(bytes: number): void {
    this.held -= bytes
  }

  get heldBytes(): number {
    return this.held
  }
}

/** Request bodies held at once: 20 of the apiserver's largest (3 MiB) */
export const defaultBodyBudgetBytes = 64 * 1024 * 1024

export function bodyBudgetExceeded(maxBytes: number): Status {
  return failure(429, `too many request bodies at once: the hub holds at most ${maxBytes} bytes of them; retry`, 'TooManyRequests', { retryAfterSeconds: 1 })
}
