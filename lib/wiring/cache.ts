// The disk cache, wired: opened and locked for this hub alone before anything reads or writes it,
// the store over it (read from disk while the hub already serves), its metrics, and the recorder
// that keeps what the apiserver answers.
import type { Logger } from 'pino'
import { CacheDirUnusableError, DiskCache } from '../cache/disk.ts'
import { CacheStore } from '../cache/store.ts'
import { Recorder } from '../cache/recorder.ts'
import type { Metrics } from '../observe/metrics.ts'
import type { Lifecycle } from './lifecycle.ts'

export interface Cache {
  store: CacheStore
  disk: DiskCache | undefined
  /** why offline autonomy is off (the cache dir cannot be used); undefined when it is on */
  off: string | undefined
  /** the store, when answers are kept at all */
  kept: CacheStore | undefined
  recorder: Recorder
  /** What /v1/readyz says of the cache: offline autonomy off, or the disk not keeping up. */
  problems(): string[]
}

/**
 * A dir that cannot be used (read-only, not writable, not creatable) does not stop the hub, which
 * relays everything with offline autonomy off and says why; a dir another hub holds does
 * (CacheDirLockedError names it).
 */
async function openDiskCache(cacheDir: string, log: Logger): Promise<{ disk?: DiskCache; off?: string }> {
  try {
    return { disk: await DiskCache.open(cacheDir, log) }
  } catch (error) {
    if (!(error instanceof CacheDirUnusableError)) throw error
    const off = `offline autonomy is off: the cache dir cannot be used (${error.message})`
    log.error({ cacheDir, code: error.code }, `${off}; every request is relayed, and none is answered from a cache while the cloud is away`)
    return { off }
  }
}

/** Opens the disk cache and starts reading it; the hub serves meanwhile, each collection once it is read (store.ts). */
export async function openCache(options: { cacheDir: string; memoryMiB: number; log: Logger; metrics: Metrics }, lifecycle: Lifecycle): Promise<Cache> {
  const { log, metrics } = options
  const { disk, off } = await openDiskCache(options.cacheDir, log)
  const store = new CacheStore(disk, log, { maxBodyBytes: options.memoryMiB * 1024 * 1024 })
  lifecycle.defer('cache', async () => {
    await store.flush()
    await store.close()
  })
  const loaded = store.load().then(
    report => {
      metrics.cacheLoadErrors.inc(report?.failed.length ?? 0)
      metrics.cacheLoadedObjects.set(report?.loaded ?? 0)
    },
    error => log.error({ err: (error as Error).message }, 'cache: load failed'),
  )
  lifecycle.defer('cache load', () => loaded)
  metrics.observeCache(
    () => store.all(),
    () => ({
      writeFailures: store.writeFailures,
      unsaved: store.unsavedCount,
      lost: store.stats.lostObjects,
      enabled: off === undefined,
      durable: store.durability().durable,
      incomplete: store.all().reduce((sum, c) => sum + c.incomplete.size, 0),
      rejectedKind: store.stats.rejectedKind,
      tooLarge: store.stats.tooLarge,
      newHistories: store.stats.newHistories,
    }),
  )
  return {
    store,
    disk,
    off,
    kept: off === undefined ? store : undefined,
    recorder: new Recorder(store, log),
    problems() {
      if (off) return [off]
      const { durable, why } = store.durability()
      return durable ? [] : [`cache not durable (what the cache holds now would not survive a restart): ${why}`]
    },
  }
}
