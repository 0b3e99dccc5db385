// The long-lived streams open right now, so a change of cloud state can end them: upstream
// watches when the cloud goes down (no client may wait on a dead link), offline watches when it
// comes back (clients re-watch against the cloud and get what changed meanwhile).
type End = () => void

export class LiveStreams {
  private readonly upstream = new Set<End>()
  private readonly offline = new Set<End>()

  addUpstreamWatch(end: End): void {
    this.upstream.add(end)
  }

  removeUpstreamWatch(end: End): void {
    this.upstream.delete(end)
  }

  addOfflineWatch(end: End): void {
    this.offline.add(end)
  }

  removeOfflineWatch(end: End): void {
    this.offline.delete(end)
  }

  get counts(): { upstream: number; offline: number } {
    return { upstream: this.upstream.size, offline: this.offline.size }
  }

  endUpstreamWatches(): number {
    return endAll(this.upstream)
  }

  endOfflineWatches(): number {
    return endAll(this.offline)
  }
}

function endAll(ends: Set<End>): number {
  const count = ends.size
  for (const end of [...ends]) end()
  ends.clear()
  return count
}
