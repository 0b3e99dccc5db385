// An answer's whole body, for answers that are read before they are used (lists, documents, errors).
import type { Readable } from 'node:stream'

/** A whole response body (lists are bounded; the caller decides what is too big to buffer). */
export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
