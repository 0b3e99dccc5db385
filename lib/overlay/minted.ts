// What a read carrying a version the pod overlay minted gets. Minted versions sit in (over, top]:
// above every real version of the endpoint resources the hub held when the outage's first change
// was minted. A real version is never changed (no request is rewritten); a minted one never reaches
// the apiserver, which may know it as another revision: where the hub cannot answer it exactly it is
// the apiserver's own "start again", 410 Expired, and the client lists from the hub's memory.
export interface MintedRange {
  /** the highest real version when the range was minted */
  over: bigint
  /** the newest minted version */
  top: bigint
  /** still minting: the cloud has not come back since */
  offline: boolean
}

/**
 * as-is: not a minted version (or one the apiserver's answer cannot get wrong); expired: 410;
 * state: the current state (not older than the minted version); now: a watch from the current state on, with no state first.
 */
export type MintedRead = 'as-is' | 'expired' | 'state' | 'now'

export function mintedRead(verb: string, exact: boolean, version: bigint, range: MintedRange | undefined): MintedRead {
  if (!range || version <= range.over || version > range.top) return 'as-is'
  if (verb === 'watch') return range.offline && version === range.top ? 'now' : 'expired'
  if (verb === 'list' && exact) return 'expired' // the past at a minted version is kept nowhere
  // online a list or get not older than a minted version goes to the apiserver as it is: it serves one
  // as new, or answers "too large resource version" and the client lists anew
  return range.offline ? 'state' : 'as-is'
}
