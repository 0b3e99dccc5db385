// The floor of an HTTP/2 link in Node: the same GET, 20 at a time, from a bare client of each kind
// (undici's HTTP/1.1 pool, node:http2 on one connection, undici's allowH2), with the client's CPU
// per 1,000 requests. What the hub's link costs beyond HTTP/1.1 cannot go below what node:http2 costs.
// Plain JavaScript, so that nothing but the stack runs in it.
// Usage: node test/bench/floor-h2.mjs https://127.0.0.1:26443 /api/v1/namespaces/default/secrets/x [token]
import http2 from 'node:http2'
import { Pool } from 'undici'

const [origin, path, token] = process.argv.slice(2)
const headers = { 'user-agent': 'outpost-floor', ...(token ? { authorization: `Bearer ${token}` } : {}) }
const tls = { rejectUnauthorized: false }
const durationMs = 8_000

async function run(name, getOnce) {
  const cpu = process.cpuUsage()
  let count = 0
  const end = performance.now() + durationMs
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (performance.now() < end) {
        await getOnce()
        count++
      }
    }),
  )
  const used = process.cpuUsage(cpu)
  console.log(`${name.padEnd(16)} ${Math.round(count / (durationMs / 1000))} req/s, ${Math.round((used.user + used.system) / count)} µs CPU a request`)
}

const h1 = new Pool(origin, { connect: tls })
await run('undici HTTP/1.1', async () => (await h1.request({ method: 'GET', path, headers })).body.text())
const session = http2.connect(origin, { ...tls, settings: { initialWindowSize: 4 << 20 } })
await new Promise(resolve => session.once('remoteSettings', resolve))
await run('node:http2', () => {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path, ...headers })
    stream.on('error', reject)
    stream.on('data', () => {})
    stream.on('end', resolve)
    stream.end()
  })
})
const allowH2 = new Pool(origin, { connect: tls, allowH2: true })
await run('undici allowH2', async () => (await allowH2.request({ method: 'GET', path, headers })).body.text())
process.exit(0)
