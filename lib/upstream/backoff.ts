// How long to wait before trying again after a failure, as client-go's reflectors do
// (wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)): exponential from `initialMs`,
// capped at `maxMs`, each wait stretched by up to `jitter` of itself so a fleet of hubs does not
// retry in step, and back to the start after `resetAfterMs` without a failure.

export interface BackoffOptions {
  initialMs?: number
  maxMs?: number
  resetAfterMs?: number
  factor?: number
  jitter?: number
  random?: () => number
  now?: () => number
}

export class Backoff {
  private readonly initialMs: number
  private readonly maxMs: number
  private readonly resetAfterMs: number
  private readonly factor: number
  private readonly jitter: number
  private readonly random: () => number
  private readonly now: () => number
  private current = 0
  private lastFailure = -Infinity

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 800
    this.maxMs = options.maxMs ?? 30_000
    this.resetAfterMs = options.resetAfterMs ?? 120_000
    this.factor = options.factor ?? 2
    this.jitter = options.jitter ?? 1
    this.random = options.random ?? Math.random
    this.now = options.now ?? Date.now
  }

  /** The wait before the next attempt, after a failure now. */
  next(): number {
    const now = this.now()
    if (now - this.lastFailure > this.resetAfterMs) this.current = 0
    this.lastFailure = now
    this.current = this.current === 0 ? this.initialMs : Math.min(this.maxMs, this.current * this.factor)
    return Math.round(this.current * (1 + this.jitter * this.random()))
  }
}
