// Whether what the disk cache acknowledged is durable, and what failed when it is not. A full disk
// fails every write of every collection, and the store retries each: one error line per failure
// streak (what failed, where, the errno, how many bytes were needed and how many are free), one
// info line when it is over, and health() for readyz and a metric in between.
import type { Logger } from 'pino'
import { errorCode, errorMessage } from './disk-io.ts'
import type { DiskIO } from './disk-io.ts'

export type DiskOperation = 'write' | 'sync' | 'compaction' | 'lock'

export interface DiskHealth {
  durable: boolean
  /** the failure that began the streak: what failed, where, and why */
  error?: string
  /** bytes the latest failed operation needed */
  neededBytes?: number
  /** bytes free on the cache dir's filesystem when it failed (statfs: blocks available to the hub) */
  availableBytes?: number
  /** when the streak began (ms since the epoch) */
  since?: number
}

/**
 * A streak lasts while any place has a failure not yet undone: a write or sync failure in a
 * directory is undone by a later write there that a sync then makes durable; a compaction failure
 * by a compaction that succeeds; a lost lock never.
 */
export class HealthTracker {
  /** `<what> <dir>` → whether a write has succeeded there since (awaiting only its sync) */
  private readonly failing = new Map<string, { wrote: boolean }>()
  private streak: { since: number; error: string; failures: number; neededBytes?: number; availableBytes?: number } | undefined
  /** log lines go out in order: the error waits for statfs, the recovery must not pass it */
  private logged: Promise<void> = Promise.resolve()

  constructor(
    private readonly log: Logger,
    private readonly io: DiskIO,
    private readonly cacheDir: string,
  ) {}

  health(): DiskHealth {
    if (!this.streak) return { durable: true }
    const { since, error, neededBytes, availableBytes } = this.streak
    return { durable: false, error, since, ...(neededBytes !== undefined && { neededBytes }), ...(availableBytes !== undefined && { availableBytes }) }
  }

  failed(what: DiskOperation, dir: string, error: unknown, neededBytes?: number): void {
    const id = `${what === 'sync' || what === 'write' ? 'write' : what} ${dir}`
    // a failed sync is retried with the data already written: its own success undoes it
    this.failing.set(id, { wrote: what === 'sync' })
    const code = errorCode(error)
    const first = !this.streak
    const streak = (this.streak ??= { since: Date.now(), error: `${what} failed in ${dir}: ${errorMessage(error)}`, failures: 0 })
    streak.failures++
    streak.neededBytes = neededBytes
    const free = this.io.statfs(this.cacheDir).then(
      s => s.bavail * s.bsize,
      () => undefined,
    )
    this.logged = this.logged.then(async () => {
      const availableBytes = await free
      if (this.streak === streak) streak.availableBytes = availableBytes
      const fields = { what, dir, code, neededBytes, availableBytes }
      if (!first) return this.log.debug({ ...fields, err: errorMessage(error) }, 'disk cache: failed again')
      const space = neededBytes === undefined ? '' : `; needed ${neededBytes} bytes, ${availableBytes ?? 'unknown'} bytes free`
      this.log.error(fields, `disk cache: ${streak.error}${space}: not durable until writes work again (kept in memory, retried)`)
    })
  }

  /** A write (journal append) succeeded in `dir`: durable once a sync of it succeeds. */
  wrote(dir: string): void {
    const failure = this.failing.get(`write ${dir}`)
    if (failure) failure.wrote = true
  }

  /** A sync of `dir`'s journal succeeded. */
  synced(dir: string): void {
    if (this.failing.get(`write ${dir}`)?.wrote) this.undone(`write ${dir}`)
  }

  /** A compaction (or a write made durable whole, such as a state file) succeeded in `dir`. */
  compacted(dir: string): void {
    this.undone(`compaction ${dir}`)
  }

  /** A write and its sync succeeded at once (a file written whole, synced, renamed). */
  replaced(dir: string): void {
    this.undone(`write ${dir}`)
  }

  private undone(id: string): void {
    if (!this.failing.delete(id) || this.failing.size > 0 || !this.streak) return
    const { since, failures } = this.streak
    this.streak = undefined
    this.logged = this.logged.then(() =>
      this.log.info({ failures, seconds: Math.round((Date.now() - since) / 1000) }, 'disk cache: writes work again; the cache is durable'),
    )
  }
}
