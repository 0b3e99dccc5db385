// Connection-level faults, on command. 'refuse', 'hang' and 'reset' are the server's own doing;
// 'blackhole' is an edge link whose NAT forgot the flows: every open connection goes silent without
// closing (nothing written, nothing read, no idle timeout), new connections are accepted by the
// kernel and never answered, not even a TLS handshake. When it ends the held sockets are reset, as
// the NAT would answer the next packet of a flow it no longer knows.

import type { Server, Socket } from 'node:net'
import type { Duplex } from 'node:stream'

export type Fault = 'none' | 'refuse' | 'hang' | 'reset' | 'blackhole'

/** RST where the socket is a TCP one; a TLS socket (not a TCP handle) is destroyed (FIN). */
export function resetSocket(socket: Duplex): void {
  const tcp = socket as Socket
  if (typeof tcp.resetAndDestroy === 'function') {
    try {
      tcp.resetAndDestroy()
      return
    } catch {
      // ERR_INVALID_HANDLE_TYPE: not a TCP handle
    }
  }
  socket.destroy()
}

/**
 * Puts `admit` in front of the server's own 'connection' listeners (TLS handshake, HTTP parser), so
 * a connection can be reset or left unanswered before either writes a byte on it. `admit` returns
 * true to hand the socket on to the server.
 */
export function gateConnections(server: Server, admit: (socket: Socket) => boolean): void {
  const own = server.listeners('connection') as ((socket: Socket) => void)[]
  server.removeAllListeners('connection')
  server.on('connection', (socket: Socket) => {
    if (admit(socket)) for (const listener of own) listener.call(server, socket)
  })
}

/** The sockets a blackhole holds open and silent until it ends. */
export class Blackhole {
  private readonly held = new Set<Duplex>()

  /**
   * No more reading: incoming bytes stay in the kernel's buffer (requests the HTTP parser still
   * reads are dropped by the server), and no idle timeout that would close the socket with a FIN.
   */
  hold(socket: Duplex): void {
    if (this.held.has(socket) || socket.destroyed) return
    this.held.add(socket)
    socket.once('close', () => this.held.delete(socket))
    socket.pause()
    ;(socket as Socket).setTimeout?.(0)
  }

  /** The flows are forgotten: every held socket is reset. */
  end(): void {
    const held = [...this.held]
    this.held.clear()
    for (const socket of held) resetSocket(socket)
  }
}
