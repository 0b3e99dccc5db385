// While the disk cache loads, which collections are not read yet. The hub serves while it loads
// (smallest collections first): whoever reads or writes a collection waits for that collection
// alone, and an offline answer, which may come from any component's copy of a resource, for every
// collection of that resource. A write must never reach a collection's files before they are read:
// its journal would be cut to what was loaded, which is nothing yet.
import type { ResourceKey } from './types.ts'

interface Pending {
  key: ResourceKey
  done: Promise<void>
  resolve: () => void
}

export class LoadGate {
  private planned = false
  private readonly plannedWaiters: (() => void)[] = []
  private readonly pending = new Map<string, Pending>()

  private static id(key: ResourceKey): string {
    return [key.component, key.group, key.version, key.resource].join('/')
  }

  /** The collections the load will read. */
  plan(keys: readonly ResourceKey[]): void {
    for (const key of keys) {
      let resolve!: () => void
      const done = new Promise<void>(r => (resolve = r))
      this.pending.set(LoadGate.id(key), { key, done, resolve })
    }
    this.planned = true
    for (const wake of this.plannedWaiters.splice(0)) wake()
  }

  loaded(key: ResourceKey): void {
    const id = LoadGate.id(key)
    this.pending.get(id)?.resolve()
    this.pending.delete(id)
  }

  /** The load is over, whatever became of it: nobody waits any longer. */
  finish(): void {
    this.plan([])
    for (const pending of this.pending.values()) pending.resolve()
    this.pending.clear()
  }

  /** Resolves once every collection `which` picks is read. */
  async until(which: (key: ResourceKey) => boolean): Promise<void> {
    if (!this.planned) await new Promise<void>(resolve => this.plannedWaiters.push(resolve))
    await Promise.all([...this.pending.values()].filter(p => which(p.key)).map(p => p.done))
  }
}
