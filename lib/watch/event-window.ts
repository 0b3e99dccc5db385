// A watch cache's recent events, for watches that resume from a version: the last `capacity`
// events, oldest first, in a ring, and no more than `maxBytes` of them (each event's size is the
// caller's to say: what it keeps alive). A push past either bound drops the oldest in place; an
// array's shift() would move the others along, which V8 does whenever it cannot trim the array's
// start (while the GC marks), at every event. The newest event is kept whatever its size.

/** an event as the window sees it: its version is all it reads */
export interface Versioned {
  resourceVersion: bigint
}

export interface EventWindowBounds<E> {
  /** the most events kept */
  capacity: number
  /** the most bytes kept, as sizeOf counts them (default: no bound) */
  maxBytes?: number
  sizeOf?: (event: E) => number
}

export class EventWindow<E extends Versioned> {
  private readonly ring: (E | undefined)[]
  private readonly sizes: number[]
  private start = 0
  private count = 0
  private held = 0
  readonly capacity: number
  private readonly maxBytes: number
  private readonly sizeOf: (event: E) => number

  constructor(bounds: number | EventWindowBounds<E>) {
    const { capacity, maxBytes = Infinity, sizeOf = () => 0 } = typeof bounds === 'number' ? { capacity: bounds } : bounds
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`an event window needs room for at least one event (${capacity})`)
    if (!(maxBytes > 0)) throw new Error(`an event window needs room for some bytes (${maxBytes})`)
    this.capacity = capacity
    this.maxBytes = maxBytes
    this.sizeOf = sizeOf
    this.ring = new Array<E | undefined>(capacity).fill(undefined)
    this.sizes = new Array<number>(capacity).fill(0)
  }

  get length(): number {
    return this.count
  }

  /** the bytes the events kept hold, as sizeOf counts them */
  get bytes(): number {
    return this.held
  }

  /** Adds the newest event; returns the newest of those it dropped to make room (the window now starts after it). */
  push(event: E): E | undefined {
    const size = this.sizeOf(event)
    let dropped: E | undefined
    while (this.count > 0 && (this.count === this.capacity || this.held + size > this.maxBytes)) dropped = this.dropOldest()
    const at = (this.start + this.count) % this.capacity
    this.ring[at] = event
    this.sizes[at] = size
    this.held += size
    this.count++
    return dropped
  }

  private dropOldest(): E {
    const dropped = this.ring[this.start]!
    this.held -= this.sizes[this.start]
    this.ring[this.start] = undefined
    this.sizes[this.start] = 0
    this.start = (this.start + 1) % this.capacity
    this.count--
    return dropped
  }

  /** Forgets every event. */
  clear(): void {
    this.ring.fill(undefined)
    this.sizes.fill(0)
    this.start = 0
    this.count = 0
    this.held = 0
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
