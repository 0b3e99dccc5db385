// One relayed watch stream, in order. Each upstream frame is first *prepared* as it arrives
// (recorded in the cache: waits for the disk, so several frames prepare at once), then, at its
// turn in stream order, *taken* (tracked and filtered: synchronous) and written. Frames the hub
// adds itself (re-filtered objects) are queued as producers and computed at their turn, so they
// see every frame before them and never overtake a newer one.
import { pipeline } from 'node:stream'
import type { Readable } from 'node:stream'
import type { WatchFrameSplitter } from '../api/frames.ts'
import type { Frame, FrameSink } from './frame-sink.ts'

export interface WatchStages {
  /** as each frame arrives, concurrently with earlier ones; must not reject */
  prepare?(frame: Buffer): Promise<void>
  /** at each frame's turn, in order: what to send for it (nothing, the frame, or more) */
  take?(frame: Buffer): Buffer | Frame[]
  /** hands over a way to queue frames of the stage's own, computed at their turn */
  onInject?(inject: (produce: () => Frame[]) => void): void
}

/** Frames in flight (prepared, not yet written) before reading pauses: bounds memory on a slow disk. */
const maxQueued = 256

/**
 * A relayed watch, frame by frame into the client's sink (its head already sent: clients block until
 * they see it). When the upstream breaks (or `silenceMs` passes without a frame), the client's
 * stream ends cleanly after the last whole frame, so it re-watches.
 */
export async function streamWatch(
  body: Readable,
  splitter: WatchFrameSplitter,
  sink: FrameSink,
  stages: WatchStages = {},
  silenceMs = 0,
  stallMs = 0,
): Promise<'ended' | 'stalled'> {
  let stalled = false
  const frames = pipeline(body, splitter, () => {})
  const write = async (out: Buffer | Frame[]) => {
    const list = Array.isArray(out) ? out : [out]
    for (const frame of list) {
      if (sink.closed) return
      if (sink.write(frame) || (await sink.drained(stallMs > 0 ? stallMs : undefined))) continue
      // the client took nothing for stallMs: it is cut off, and the apiserver's watch with it
      stalled = true
      sink.abort()
      body.destroy()
      return
    }
  }
  let inOrder: Promise<void> = Promise.resolve()
  let queued = 0
  stages.onInject?.(produce => {
    inOrder = inOrder.then(() => write(produce()))
  })
  const silence = silenceMs > 0 ? new SilenceGuard(silenceMs, () => body.destroy()) : undefined
  try {
    for await (const frame of frames) {
      silence?.heard()
      const prepared = stages.prepare?.(frame as Buffer)
      const take = stages.take
      queued++
      inOrder = inOrder
        .then(() => prepared)
        .then(() => write(take ? take(frame as Buffer) : (frame as Buffer)))
        .finally(() => queued--)
      if (queued > maxQueued) await inOrder
      if (sink.closed) break
    }
  } catch {
    // upstream dropped, or the client went away: both end below
  } finally {
    silence?.stop()
    await inOrder.catch(() => {})
    body.destroy()
    sink.end()
  }
  return stalled ? 'stalled' : 'ended'
}

/**
 * Ends a stream that has said nothing for too long. A watch that asked for BOOKMARKs hears from
 * the apiserver about once a minute; silence well past that means the connection is half-open (a
 * NAT forgot the flow) and nobody will ever say so.
 */
export class SilenceGuard {
  private last = Date.now()
  private readonly timer: NodeJS.Timeout

  constructor(
    private readonly ms: number,
    onSilence: () => void,
  ) {
    this.timer = setInterval(
      () => {
        if (Date.now() - this.last >= this.ms) {
          this.stop()
          onSilence()
        }
      },
      Math.max(10, Math.min(1_000, ms / 4)),
    )
    this.timer.unref()
  }

  heard(): void {
    this.last = Date.now()
  }

  stop(): void {
    clearInterval(this.timer)
  }
}
