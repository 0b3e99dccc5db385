// A watch cache's recent events, for watches that resume from a version: the last `capacity`
// events, oldest first, in a ring. A push past capacity overwrites the oldest in place; an array's
// shift() would move the others along, which V8 does whenever it cannot trim the array's start
// (while the GC marks), at every event.

/** an event as the window sees it: its version is all it reads */
export interface Versioned {
  resourceVersion: bigint
}

export class EventWindow<E extends Versioned> {
  private readonly ring: (E | undefined)[]
  private start = 0
  private count = 0

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`an event window needs room for at least one event (${capacity})`)
    this.ring = new Array<E | undefined>(capacity).fill(undefined)
  }

  get length(): number {
    return this.count
  }

  /** Adds the newest event; returns the oldest when it had to make room. */
  push(event: E): E | undefined {
    if (this.count < this.capacity) {
      this.ring[(this.start + this.count) % this.capacity] = event
      this.count++
      return undefined
    }
    const dropped = this.ring[this.start]
    this.ring[this.start] = event
    this.start = (this.start + 1) % this.capacity
    return dropped
  }

  /** Forgets every event. */
  clear(): void {
    this.ring.fill(undefined)
    this.start = 0
    this.count = 0
  }

  /** The events newer than `version`, oldest first. */
  after(version: bigint): E[] {
    const out: E[] = []
    for (let i = 0; i < this.count; i++) {
      const event = this.ring[(this.start + i) % this.capacity]!
      if (event.resourceVersion > version) out.push(event)
    }
    return out
  }
}
