// Request bodies are small (the apiserver refuses more than 3 MiB) and are read whole, so a
// request can be retried on the next apiserver after a connection failure.
import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`request body exceeds the ${limit}-byte limit`)
    this.name = 'BodyTooLargeError'
  }
}

export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined
}

export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError(limit)
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > limit) throw new BodyTooLargeError(limit)
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks, size)
}

/** A whole response body (lists are bounded; the caller decides what is too big to buffer). */
export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
