// GETs one after another on one keep-alive connection, in a process of its own, until the parent
// says stop; then the latencies (ms) go back to it. A probe in the load generator's own process
// would time that process's event loop too (twenty watch streams parsed there), not the hub's.
import { Agent, request } from 'undici'

const [url, headersJson] = process.argv.slice(2)
const headers = JSON.parse(headersJson)
const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 })
let stopping = false
process.on('message', () => {
  stopping = true
})
const latencies = []
while (!stopping) {
  const sent = performance.now()
  const res = await request(url, { headers, dispatcher: agent })
  await res.body.dump()
  if (res.statusCode !== 200) {
    console.error(`GET ${url}: ${res.statusCode}`)
    process.exit(1)
  }
  latencies.push(performance.now() - sent)
}
process.send(latencies, () => process.exit(0))
