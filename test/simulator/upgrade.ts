// Upgraded connections (exec, attach, port-forward): `Upgrade: websocket` gets a real handshake
// (first offered subprotocol) and an echo; any other upgrade (SPDY/3.1) gets `101 Switching
// Protocols` with the first X-Stream-Protocol-Version offered, then a raw byte echo. Enough for a
// proxy to show it passes bytes both ways; no kubelet behind it.

import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { WebSocketServer } from 'ws'

/** `silent()` true while nothing may be written (a blackhole): the echo holds its tongue. */
export function echoUpgrade(wss: WebSocketServer, req: IncomingMessage, socket: Duplex, head: Buffer, silent: () => boolean): void {
  const upgrade = String(req.headers.upgrade ?? '')
  if (upgrade.toLowerCase() === 'websocket') {
    wss.handleUpgrade(req, socket, head, ws => {
      ws.on('error', () => {})
      ws.on('message', (data, isBinary) => {
        if (!silent()) ws.send(data, { binary: isBinary })
      })
    })
    return
  }
  const lines = ['HTTP/1.1 101 Switching Protocols', 'Connection: Upgrade', `Upgrade: ${upgrade}`]
  const proto = req.headers['x-stream-protocol-version']
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0].trim()
  if (first) lines.push(`X-Stream-Protocol-Version: ${first}`)
  socket.write(lines.join('\r\n') + '\r\n\r\n')
  if (head.length > 0) socket.write(head)
  socket.on('data', (chunk: Buffer) => {
    if (!silent()) socket.write(chunk)
  })
  socket.on('end', () => socket.end())
}
