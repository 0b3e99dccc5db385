// The floor of a relayed GET on the hub's stack, by hand against any apiserver: a bare node:http
// front relaying each request with undici's HTTP/1.1 pool (h1) or over one node:http2 session (h2),
// nothing else (no router, cache, filters or metrics). Time it with wrk beside the hub and direct:
//   node test/bench/floor-get.mjs h2 https://127.0.0.1:26443 27803 &
//   wrk -t2 -c20 -d5s -H 'Authorization: Bearer admintoken' http://127.0.0.1:27803/api/v1/namespaces/default/services/kubernetes
// Plain JavaScript, so that nothing but the stack runs in it.
import http from 'node:http'
import http2 from 'node:http2'
import { Pool } from 'undici'

const [kind, upstream, port] = process.argv.slice(2)
const tls = { rejectUnauthorized: false }
const forwarded = req => ({ authorization: req.headers.authorization ?? '', accept: req.headers.accept ?? '*/*', 'user-agent': req.headers['user-agent'] ?? '' })
const failed = res => () => {
  res.writeHead(502)
  res.end()
}

let relay
if (kind === 'h1') {
  const pool = new Pool(upstream, { connect: tls, connections: null })
  relay = (req, res) =>
    pool.request({ method: 'GET', path: req.url, headers: forwarded(req) }).then(up => {
      res.writeHead(up.statusCode, { 'content-type': up.headers['content-type'] })
      up.body.pipe(res)
    }, failed(res))
} else {
  const session = http2.connect(upstream, tls)
  relay = (req, res) => {
    const stream = session.request({ ':path': req.url, ...forwarded(req) })
    stream.on('response', headers => {
      res.writeHead(headers[':status'], { 'content-type': headers['content-type'] })
      stream.pipe(res)
    })
    stream.on('error', failed(res))
  }
}
http.createServer({ keepAliveTimeout: 60_000 }, relay).listen(Number(port), '127.0.0.1', () => console.log('listening'))
