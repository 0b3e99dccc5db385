// Objects, the global resourceVersion counter and the event window, like etcd under the apiserver:
// every write bumps one integer revision; the last `windowSize` events are kept so a watch can
// replay from an older resourceVersion and a list can be served exactly as it was at one.
// Stored objects are never mutated: every write stores a fresh object.

import { canonical } from './objects.ts'

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED'

export interface StoreEvent {
  rv: number
  storageKey: string
  /** `<namespace>/<name>` or `<name>` */
  key: string
  type: EventType
  /** the object after the change; for DELETED the last state, carrying the deletion's resourceVersion */
  object: any
  /** the object before the change (MODIFIED, DELETED) */
  prev?: any
}

export type Listener = (event: StoreEvent) => void

/** A copy of the store's objects at one revision. */
export interface StoreBackup {
  readonly rv: number
  readonly data: ReadonlyMap<string, ReadonlyMap<string, any>>
}

export class Store {
  private rv = 0
  /** events with rv <= compacted are forgotten: a watch or exact list from before this answers 410 */
  private compacted = 0
  private readonly data = new Map<string, Map<string, any>>()
  private events: StoreEvent[] = []
  private readonly listeners = new Set<Listener>()

  constructor(private readonly windowSize: number) {}

  currentRV(): number {
    return this.rv
  }

  compactedRV(): number {
    return this.compacted
  }

  get(storageKey: string, key: string): any | undefined {
    return this.data.get(storageKey)?.get(key)
  }

  has(storageKey: string, key: string): boolean {
    return this.data.get(storageKey)?.has(key) ?? false
  }

  /** Keys and objects of one resource as they were at `atRV` (default: now), keys in etcd order. */
  snapshot(storageKey: string, atRV?: number): [string, any][] {
    const current = this.data.get(storageKey) ?? new Map<string, any>()
    let view: Map<string, any> = current
    if (atRV !== undefined && atRV < this.rv) {
      if (atRV < this.compacted) throw new Error(`resourceVersion ${atRV} is compacted`)
      view = new Map(current)
      for (let i = this.events.length - 1; i >= 0 && this.events[i].rv > atRV; i--) {
        const ev = this.events[i]
        if (ev.storageKey !== storageKey) continue
        if (ev.type === 'ADDED') view.delete(ev.key)
        else view.set(ev.key, ev.prev)
      }
    }
    return [...view.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  }

  /** Events after `rv` (all resources, oldest first), or 'expired' when the window no longer has them. */
  eventsAfter(rv: number): StoreEvent[] | 'expired' {
    if (rv < this.compacted) return 'expired'
    let i = this.events.length
    while (i > 0 && this.events[i - 1].rv > rv) i--
    return this.events.slice(i)
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Everything the store holds now, to restore later (etcd's snapshot save). */
  backup(): StoreBackup {
    return { rv: this.rv, data: new Map([...this.data].map(([k, bucket]) => [k, new Map(bucket)])) }
  }

  /**
   * Back to a backup (etcd's snapshot restore): its objects and its revision, and no history
   * before it. Clients that had seen later revisions now hold versions from a history that is gone.
   */
  restore(backup: StoreBackup): void {
    this.data.clear()
    for (const [k, bucket] of backup.data) this.data.set(k, new Map(bucket))
    this.rv = backup.rv
    this.compacted = backup.rv
    this.events = []
  }

  /** Forget the event window: every resourceVersion before now answers 410 Expired. */
  compact(): void {
    this.compacted = this.rv
    this.events = []
  }

  /** Store a created or modified object; assigns its resourceVersion and returns what was stored. */
  put(storageKey: string, key: string, obj: any): any {
    let bucket = this.data.get(storageKey)
    if (!bucket) this.data.set(storageKey, (bucket = new Map()))
    const prev = bucket.get(key)
    const rv = ++this.rv
    const stored = canonical({ ...obj, metadata: { ...obj.metadata, resourceVersion: String(rv) } })
    bucket.set(key, stored)
    this.record({ rv, storageKey, key, type: prev ? 'MODIFIED' : 'ADDED', object: stored, prev })
    return stored
  }

  /** Remove an object; returns it as it was (its last resourceVersion), or undefined. */
  delete(storageKey: string, key: string): any | undefined {
    const bucket = this.data.get(storageKey)
    const prev = bucket?.get(key)
    if (!bucket || !prev) return undefined
    bucket.delete(key)
    const rv = ++this.rv
    const object = { ...prev, metadata: { ...prev.metadata, resourceVersion: String(rv) } }
    this.record({ rv, storageKey, key, type: 'DELETED', object, prev })
    return prev
  }

  private record(event: StoreEvent): void {
    this.events.push(event)
    if (this.events.length > this.windowSize) {
      const dropped = this.events.splice(0, this.events.length - this.windowSize)
      this.compacted = dropped[dropped.length - 1].rv
    }
    for (const listener of [...this.listeners]) {
      try {
        listener(event)
      } catch {
        // a broken watcher must not break writes
      }
    }
  }
}
