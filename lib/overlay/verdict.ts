// When an overlaid pod's endpoints go back to what the cloud says, as a pure decision over plain
// data. Offline the overlay is the truth the node has; once the cloud is back it is kept only until
// the cloud's own endpoints have caught up (they name the pod's current address in every family the
// hub has seen them in), and never longer than the TTL: kube-proxy must neither flip back to a dead
// address nor keep a stale one for good.

/** What the cloud's endpoints of the pod named, per address family, the last time the filter read one since the cloud came back. */
export type Observation = 'current' | 'stale'

export interface OverlayFacts {
  online: boolean
  /** when the cloud came back (ms), while online */
  cloudBackAt: number | undefined
  now: number
  ttlMs: number
  /** per family, the latest observation since the cloud came back */
  observed: ReadonlyMap<string, Observation>
}

export type OverlayVerdict = { keep: true } | { keep: false; why: 'caught-up' | 'ttl' }

export function overlayVerdict(facts: OverlayFacts): OverlayVerdict {
  if (!facts.online || facts.cloudBackAt === undefined) return { keep: true }
  const seen = [...facts.observed.values()]
  if (seen.length > 0 && seen.every(o => o === 'current')) return { keep: false, why: 'caught-up' }
  if (facts.now - facts.cloudBackAt >= facts.ttlMs) return { keep: false, why: 'ttl' }
  return { keep: true }
}
