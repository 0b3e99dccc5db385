// The clients of test/attack.e2e.ts, on raw sockets so that the test decides exactly what is read:
// one that sends its request and never reads a byte (the kernel's buffers fill, then the hub's),
// and one that reads everything as it comes, counting it.
import net from 'node:net'
import { once } from 'node:events'

export const kubeletAgent = 'kubelet/v1.33.1 (linux/amd64) kubernetes/8adc0f0'
export const kubeProxyAgent = 'kube-proxy/v1.33.1 (linux/amd64) kubernetes/8adc0f0'

export interface RawClient {
  socket: net.Socket
  /** bytes read so far */
  bytes(): number
  /** the marker was seen in what was read */
  sawMarker(): boolean
  /** the connection ended (a client that does not read notices only once it reads) */
  isClosed(): boolean
  /** a complete chunked response ends with the empty chunk */
  sawLastChunk(): boolean
  /** a client that did not read starts reading */
  read(): void
}

/**
 * Sends the request. A client that does not read: Node stops reading the socket once its own small
 * buffer (16 KiB) is full, then the kernel's buffers fill, and what the hub writes after that stays
 * in the hub unless it stops writing. `marker` is looked for across chunk edges.
 */
export async function rawClient(port: number, path: string, userAgent: string, options: { reading: boolean; marker?: string }): Promise<RawClient> {
  const socket = net.connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: ${userAgent}\r\nAccept: application/json\r\n\r\n`)
  const marker = options.marker ?? ''
  let bytes = 0
  let last = ''
  let seen = false
  let closed = false
  const read = () => {
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      const text = last + chunk.toString('latin1')
      if (marker && !seen && text.includes(marker)) seen = true
      last = text.slice(-Math.max(marker.length, 64))
    })
    socket.resume()
  }
  socket.on('error', () => {})
  socket.on('close', () => (closed = true))
  if (options.reading) read()
  else socket.pause()
  return { socket, bytes: () => bytes, sawMarker: () => seen, isClosed: () => closed, sawLastChunk: () => last.endsWith('\r\n0\r\n\r\n'), read }
}

/** Runs `work` over `items` with at most `width` at once. */
export async function inBatches<T>(items: T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lane = async () => {
    while (next < items.length) await work(items[next++])
  }
  await Promise.all(Array.from({ length: width }, lane))
}
