import { bulkTurn } from '../bulk-turns.ts'

/** A frame as written: whole, or in parts that make it up in order (eventFrameParts). */
export type Frame = Buffer | readonly Buffer[]

// Where a watch's frames go. Watch code (a watch cache's watcher, a relayed stream, an offline
// watch) writes whole frames into this and never sees HTTP: lib/front/ writes the response head,
// then hands the watch a sink over the client's response (lib/front/respond.ts responseSink).
export interface FrameSink {
  /** one whole frame, or one in parts (eventFrameParts); false: the client is behind, wait for drained() before writing more */
  write(frame: Frame): boolean
  /** bytes written that the client has not taken yet */
  readonly backlog: number
  /** nothing more may be written: the stream was ended, or the client is gone */
  readonly closed: boolean
  /** resolves true when the client takes what was written, or when the stream closes; false after `timeoutMs` without */
  drained(timeoutMs?: number): Promise<boolean>
  /** called once the client's stream has closed (the client left, or after end() or abort()); at once if it has */
  onClose(listener: () => void): void
  /** ends the stream cleanly after what was written: the client watches again */
  end(): void
  /** cuts the stream: the client must not take what it got as whole */
  abort(): void
}

/** Bytes a watch's initial state runs ahead of its client: the rest is made as the client takes it. */
const initialAheadBytes = 64 * 1024
/**
 * Frames joined into one write: a write per frame (three per frame in parts) cost more than
 * copying the frames into a batch (20 watches' initial states of 10,000 objects: 600,000 writes).
 */
const batchBytes = 16 * 1024

/**
 * Frames written as the client takes them, never much more than `aheadBytes` ahead, so a client
 * that does not read holds that much and not its whole initial state. Resolves false when the
 * stream closed, or the client took nothing for `stallMs` (the caller ends the stream).
 */
export async function writeAsTaken(sink: FrameSink, frames: Iterable<Frame>, stallMs: number, aheadBytes = initialAheadBytes): Promise<boolean> {
  let batch: Buffer[] = []
  let batched = 0
  const flush = () => {
    sink.write(batch.length === 1 ? batch[0] : Buffer.concat(batch, batched))
    batch = []
    batched = 0
  }
  for (const frame of frames) {
    if (sink.closed) return false
    if (Buffer.isBuffer(frame)) {
      batch.push(frame)
      batched += frame.length
    } else
      for (const part of frame) {
        batch.push(part)
        batched += part.length
      }
    if (batched < batchBytes) continue
    await bulkTurn(batched)
    if (sink.closed) return false
    flush()
    if (sink.backlog >= aheadBytes && !(await sink.drained(stallMs))) return false
  }
  if (batched > 0 && !sink.closed) flush()
  return !sink.closed
}
