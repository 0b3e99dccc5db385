// The long-lived streams open right now, so a change of cloud state can end them: upstream
// watches when the cloud goes down (no client may wait on a dead link), offline watches when it
// comes back (clients re-watch against the cloud and get what changed meanwhile), and watches
// answered from the cache during a blip too short to count as an outage as soon as any apiserver
// answers again.
type End = () => void

export class LiveStreams {
  private readonly upstream = new Set<End>()
  private readonly offline = new Set<End>()
  private readonly fallback = new Set<End>()
  /** watches served from a watch cache: they outlive outages, and end only with the hub */
  private readonly held = new Set<End>()
  /** streams added and not yet removed, ended or not: what a shutdown waits for */
  private open = 0
  private readonly idle: (() => void)[] = []

  addUpstreamWatch(end: End): void {
    this.upstream.add(end)
    this.open++
  }

  removeUpstreamWatch(end: End): void {
    this.upstream.delete(end)
    this.closed()
  }

  addOfflineWatch(end: End): void {
    this.offline.add(end)
    this.open++
  }

  removeOfflineWatch(end: End): void {
    this.offline.delete(end)
    this.fallback.delete(end)
    this.closed()
  }

  addHeldWatch(end: End): void {
    this.held.add(end)
    this.open++
  }

  removeHeldWatch(end: End): void {
    this.held.delete(end)
    this.closed()
  }

  /** The hub stops: every watch a watch cache serves ends. */
  endHeldWatches(): number {
    return endAll(this.held)
  }

  /** An offline watch served while the hub still counted the cloud as up (every upstream failed once). */
  addFallbackWatch(end: End): void {
    this.addOfflineWatch(end)
    this.fallback.add(end)
  }

  private closed(): void {
    this.open--
    if (this.open === 0) for (const resolve of this.idle.splice(0)) resolve()
  }

  /** Resolves once every stream has finished (its last chunk written), or after `timeoutMs`. */
  whenClosed(timeoutMs: number): Promise<void> {
    if (this.open <= 0) return Promise.resolve()
    return new Promise(resolve => {
      const timer = setTimeout(resolve, timeoutMs)
      this.idle.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  /** An apiserver answered: watches served from the cache only because of a blip end now. */
  endFallbackWatches(): number {
    for (const end of this.fallback) this.offline.delete(end)
    return endAll(this.fallback)
  }

  get counts(): { upstream: number; offline: number; held: number } {
    return { upstream: this.upstream.size, offline: this.offline.size, held: this.held.size }
  }

  endUpstreamWatches(): number {
    return endAll(this.upstream)
  }

  endOfflineWatches(): number {
    this.fallback.clear()
    return endAll(this.offline)
  }
}

function endAll(ends: Set<End>): number {
  const count = ends.size
  for (const end of [...ends]) end()
  ends.clear()
  return count
}
