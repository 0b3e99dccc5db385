// Whether this node would survive a cut from the cloud, as the OutpostAutonomy Node condition says
// it (YurtHub's `Autonomy` condition is the model): a pure verdict over a few facts of the cache, so
// the table of cases is the whole story. The first problem found wins, in the order an operator
// must fix them: a cache that is off, then one that is not durable, then one still loading, then
// this node's pods never listed whole through the hub.

export type AutonomyStatus = 'True' | 'False' | 'Unknown'

export interface AutonomyCondition {
  status: AutonomyStatus
  /** CamelCase, as Node condition reasons are */
  reason: string
  /** one sentence an operator can act on */
  message: string
}

export interface AutonomyFacts {
  nodeName: string
  /** why offline autonomy is off (the cache dir cannot be used); undefined when it is on */
  cacheOff?: string
  /** whether what the cache holds is on disk, and if not, why (store.durability()) */
  durable: boolean
  notDurableWhy?: string
  /** the cache is still being read from disk */
  loading: boolean
  /** a list of this node's pods (kubelet's `spec.nodeName=<node>`, or wider) is held whole */
  podsSynced: boolean
  /** why a list of this node's pods that was held whole no longer is (an event lost, an object too large) */
  podsIncomplete?: string
  /** this node's pods the cache holds */
  nodePods: number
  /** collections (component × resource) the cache holds */
  collections: number
}

export const conditionType = 'OutpostAutonomy'

export function autonomyCondition(facts: AutonomyFacts): AutonomyCondition {
  if (facts.cacheOff !== undefined)
    return {
      status: 'False',
      reason: 'CacheDisabled',
      message: `${sentence(facts.cacheOff)}: give outpost a cache dir it can write (--cache-dir) and restart it.`,
    }
  if (!facts.durable) {
    const why = facts.notDurableWhy || 'the disk does not keep up'
    if (/ENOSPC|no space left/i.test(why))
      return {
        status: 'False',
        reason: 'DiskFull',
        message: `The cache disk is full (${why}): free space on it, or what outpost holds now would not survive a restart.`,
      }
    return {
      status: 'False',
      reason: 'CacheNotDurable',
      message: `The cache cannot write to its disk (${why}): fix the disk, or what outpost holds now would not survive a restart.`,
    }
  }
  if (facts.loading)
    return { status: 'Unknown', reason: 'Loading', message: 'outpost is still reading its cache from disk; this condition is set again once it has.' }
  if (!facts.podsSynced) {
    if (facts.podsIncomplete)
      return {
        status: 'False',
        reason: 'PodsIncomplete',
        message: `The cached list of this node's pods is no longer whole (${facts.podsIncomplete}); it is again once kubelet lists its pods through outpost.`,
      }
    return {
      status: 'False',
      reason: 'NeverSynced',
      message: `No whole list of this node's pods (spec.nodeName=${facts.nodeName}) has passed through outpost: point kubelet's kubeconfig at outpost.`,
    }
  }
  return {
    status: 'True',
    reason: 'CacheReady',
    message: `outpost holds this node's ${facts.nodePods} pod${facts.nodePods === 1 ? '' : 's'} and ${facts.collections} cached collection${facts.collections === 1 ? '' : 's'} on disk: the node can restart and run them with the cloud away.`,
  }
}

export function sameCondition(a: AutonomyCondition | undefined | null, b: AutonomyCondition | undefined | null): boolean {
  return a?.status === b?.status && a?.reason === b?.reason && a?.message === b?.message
}

/** "offline autonomy is off: …" → "Offline autonomy is off: …", without a closing period. */
function sentence(text: string): string {
  const trimmed = text.trim().replace(/[.;]+$/, '')
  return trimmed.charAt(0).toUpperCase() + trimmed.slice(1)
}
