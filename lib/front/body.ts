// Request bodies are small (the apiserver refuses more than 3 MiB) and are read whole, so a
// request can be retried on the next apiserver after a connection failure.
import type { IncomingMessage } from 'node:http'

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`request body exceeds the ${limit}-byte limit`)
    this.name = 'BodyTooLargeError'
  }
}

export class BodyTimeoutError extends Error {
  constructor(readonly idleMs: number) {
    super(`request body stalled: nothing received for ${idleMs} ms`)
    this.name = 'BodyTimeoutError'
  }
}

/** The request bodies being held have reached their cap (BodyBudget): the client retries. */
export class BodyBudgetError extends Error {
  constructor() {
    super('request bodies held at once are at their cap')
    this.name = 'BodyBudgetError'
  }
}

export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined
}

/**
 * The whole body, refused past `limit` bytes, and given up on when a chunk takes longer than
 * `idleMs` to come. The socket stays usable for the error answer; the caller closes it after.
 */
export function readBody(req: IncomingMessage, limit: number, idleMs = 0, reserve?: (bytes: number) => boolean): Promise<Buffer> {
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLargeError(limit))
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let timer: NodeJS.Timeout | undefined
    const finish = (error: Error | undefined) => {
      clearTimeout(timer)
      req.off('data', onData).off('end', onEnd).off('error', onError)
      if (!error) return resolve(Buffer.concat(chunks, size))
      req.pause()
      reject(error)
    }
    const arm = () => {
      if (idleMs <= 0) return
      clearTimeout(timer)
      timer = setTimeout(() => finish(new BodyTimeoutError(idleMs)), idleMs)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) return finish(new BodyTooLargeError(limit))
      if (reserve && !reserve(chunk.length)) return finish(new BodyBudgetError())
      chunks.push(chunk)
      arm()
    }
    const onEnd = () => finish(undefined)
    const onError = (error: Error) => finish(error)
    req.on('data', onData).on('end', onEnd).on('error', onError)
    arm()
  })
}
