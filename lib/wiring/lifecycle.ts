// What the hub has started, stopped in the reverse order. One stack serves a start that fails half
// way and close(): each part registers its closer as it starts, so neither can forget one.
import type { Logger } from 'pino'

export class Lifecycle {
  private readonly closers: { name: string; close: () => unknown }[] = []
  private unwinding: Promise<void> | undefined

  constructor(private readonly log: Logger) {}

  /** `close` runs when the hub stops: before everything registered earlier, after everything later. */
  defer(name: string, close: () => unknown): void {
    this.closers.push({ name, close })
  }

  /** Runs every closer, last registered first; one that fails is logged and the rest still run. */
  unwind(): Promise<void> {
    this.unwinding ??= this.runClosers()
    return this.unwinding
  }

  private async runClosers(): Promise<void> {
    for (let closer = this.closers.pop(); closer; closer = this.closers.pop()) {
      try {
        await closer.close()
      } catch (error) {
        this.log.warn({ part: closer.name, err: (error as Error).message }, 'stopping: a part failed to stop; the rest stop still')
      }
    }
  }
}
