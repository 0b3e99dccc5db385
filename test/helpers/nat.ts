// A TCP relay standing for the NAT on an edge link. `forget()` does what a NAT that dropped its
// flow table does: established connections go silent in both directions without any FIN or RST
// (neither end learns anything), while new connections get new mappings and work.
import net from 'node:net'
import { once } from 'node:events'

export interface Nat {
  /** http://127.0.0.1:<port>, forwarding to the target */
  url: string
  /** connections established so far go silent, forever */
  forget(): void
  close(): Promise<void>
}

export async function startNat(target: string): Promise<Nat> {
  const { hostname, port } = new URL(target)
  const flows = new Set<{ client: net.Socket; server: net.Socket; live: boolean }>()
  const relay = net.createServer(client => {
    const server = net.connect({ host: hostname, port: Number(port) })
    const flow = { client, server, live: true }
    flows.add(flow)
    client.on('data', chunk => flow.live && server.write(chunk))
    server.on('data', chunk => flow.live && client.write(chunk))
    const close = () => {
      flows.delete(flow)
      client.destroy()
      server.destroy()
    }
    client.on('close', () => flow.live && close())
    server.on('close', () => flow.live && close())
    client.on('error', () => {})
    server.on('error', () => {})
  })
  relay.listen(0, '127.0.0.1')
  await once(relay, 'listening')
  return {
    url: `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`,
    forget() {
      for (const flow of flows) flow.live = false
    },
    async close() {
      for (const flow of flows) {
        flow.client.destroy()
        flow.server.destroy()
      }
      await new Promise(resolve => relay.close(resolve))
    },
  }
}
