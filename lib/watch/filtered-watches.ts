// Every open watch whose objects pass the client's filters, whoever serves it (a relayed upstream
// watch, a shared watch cache's watcher). A topology change is one operation over all of them:
// settle what each client was shown while the old context still holds, switch the context, then
// re-filter each at its turn in its stream. A new way of serving watches joins by registering.

/** A watch that can be re-filtered live (FilteredWatch, CacheWatcher). */
export interface RefilterableWatch {
  /** what the filters read is about to change: work out what the client was shown */
  settle(): void
  /** what the filters read changed: filter the client's objects again, at their turn (moving the stream to `moveTo` first, when given) */
  refilter(moveTo?: bigint, affects?: (body: Buffer) => boolean): void
  /** ends the watch with 410 Expired if it was told a version newer than `version`; says whether it did */
  expireSentBeyond?(version: bigint, why: string): boolean
}

export class FilteredWatches {
  private readonly watches = new Set<RefilterableWatch>()

  /** Registers an open watch; the returned function unregisters it (when the watch ends). */
  add(watch: RefilterableWatch): () => void {
    this.watches.add(watch)
    return () => this.watches.delete(watch)
  }

  get size(): number {
    return this.watches.size
  }

  /** What the filters read is about to change (the topology source says so before every change). */
  settle(): void {
    for (const watch of this.watches) watch.settle()
  }

  /** Ends with 410 Expired every watch told a version newer than `version` (minted ones); returns how many. */
  expireSentBeyond(version: bigint, why: string): number {
    let ended = 0
    for (const watch of [...this.watches]) if (watch.expireSentBeyond?.(version, why)) ended++
    return ended
  }

  /**
   * What the filters read changed: events filtered since the first notice were shown with the
   * context about to go, so every watch settles again; then the context switches (the filters
   * read the new one), then every watch queues its re-filter. `moveTo`: a version minted for the
   * change, which the streams move on to first; `affects`: which objects it can touch (default all).
   * Returns how many watches were told.
   */
  change(switchContext: () => void, moveTo?: bigint, affects?: (body: Buffer) => boolean): number {
    this.settle()
    switchContext()
    for (const watch of this.watches) watch.refilter(moveTo, affects)
    return this.watches.size
  }
}
