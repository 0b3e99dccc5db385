// An answer's whole body, for answers that are read before they are used (lists, documents, errors),
// and the cap on what the hub holds of one (--max-list-bytes): past it a body is not held, the
// caller relays or drops it.
import type { Readable } from 'node:stream'

/** A body longer than the cap: nothing of it is kept. */
export class BodyOverCapError extends Error {
  constructor(
    /** bytes read (or announced by Content-Length) when it was seen to pass the cap */
    readonly bytes: number,
    readonly cap: number,
  ) {
    super(`the answer is over ${cap} bytes (--max-list-bytes): ${bytes} bytes seen`)
  }
}

/** Content-Length, when the answer states one. */
export function declaredLength(headers: Record<string, string | string[] | undefined>): number | undefined {
  const value = headers['content-length']
  if (typeof value !== 'string' || !/^\d+$/.test(value)) return undefined
  return Number(value)
}

/**
 * A whole response body. With `cap`, a body longer than that is not read on: the stream is destroyed
 * and BodyOverCapError thrown (a reflector's list: nothing of it could be used).
 */
export async function readAll(stream: Readable, cap?: number): Promise<Buffer> {
  if (cap === undefined) {
    const chunks: Buffer[] = []
    for await (const chunk of stream) chunks.push(chunk as Buffer)
    return Buffer.concat(chunks)
  }
  const read = await readUpTo(stream, cap)
  if (read.over) {
    stream.on('error', () => {}) // undici's body errors when destroyed unread; nobody else listens any more
    stream.destroy()
    throw new BodyOverCapError(read.bytes, cap)
  }
  return Buffer.concat(read.chunks)
}

/**
 * Reads a body until its end, or until more than `cap` bytes are in. Over the cap, the stream is left
 * paused where it stopped (not destroyed), for the caller to relay the rest after the chunks read.
 */
export function readUpTo(stream: Readable, cap: number): Promise<{ chunks: Buffer[]; bytes: number; over: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let bytes = 0
    const done = () => {
      stream.off('data', onData)
      stream.off('end', onEnd)
      stream.off('error', onError)
    }
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
      bytes += chunk.length
      if (bytes <= cap) return
      stream.pause()
      done()
      resolve({ chunks, bytes, over: true })
    }
    const onEnd = () => {
      done()
      resolve({ chunks, bytes, over: false })
    }
    const onError = (error: Error) => {
      done()
      reject(error)
    }
    stream.on('data', onData)
    stream.once('end', onEnd)
    stream.once('error', onError)
  })
}
