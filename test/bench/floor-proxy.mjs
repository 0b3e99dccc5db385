// The floor of the hub's stack: a pass-through proxy on fastify and undici (the libraries the hub
// is built on) with no cache, filters or metrics. The bench runs it with the static pod's runtime
// environment, as it runs the built hub, and sets beside the hub's its idle RSS (the least the
// stack holds) and its GET throughput (what a proxy that only forwards gets on the same box).
// Plain JavaScript, so that nothing (tsx, a compiler) runs in it but the stack.
// Usage: node floor-proxy.mjs <upstream url> <port>; prints "listening" once it serves.
import { fastify } from 'fastify'
import { Pool } from 'undici'

const [upstream, port] = process.argv.slice(2)
const pool = new Pool(upstream, { connections: null }) // as the hub's pools: a connection per request in flight
const app = fastify({ logger: { level: 'warn' } })
app.removeAllContentTypeParsers()
app.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
app.all('/*', async (request, reply) => {
  const res = await pool.request({ method: request.method, path: request.url, headers: { accept: request.headers.accept ?? '*/*' } })
  reply.code(res.statusCode)
  const type = res.headers['content-type']
  if (typeof type === 'string') reply.header('content-type', type)
  return reply.send(res.body)
})
await app.listen({ port: Number(port), host: '127.0.0.1' })
console.log('listening')
