// The HTTP/2 link on its own, against a node:http2 server that misbehaves on command: a body cut by
// a dropped connection is an error (never a short body that looks whole), a refused stream is sent
// again, an abort cancels only its stream, and a server without h2 is told apart.
import t from 'tap'
import http2 from 'node:http2'
import https from 'node:https'
import { once } from 'node:events'
import { EventEmitter } from 'node:events'
import type { Readable } from 'node:stream'
import { H2Link, NotH2Error } from '../lib/upstream/h2-link.ts'
import { createTestPki } from './helpers/pki.ts'

const pki = await createTestPki()

function link(url: string, extra: Partial<ConstructorParameters<typeof H2Link>[0]> = {}): H2Link {
  return new H2Link({
    url: new URL(url),
    tlsOptions: () => ({ ca: pki.ca.cert, servername: 'localhost', rejectUnauthorized: false }),
    connectTimeoutMs: 2_000,
    maxStreamsPerConnection: 100,
    readIdleMs: 30_000,
    pingTimeoutMs: 15_000,
    ...extra,
  })
}

const get = (l: H2Link, path: string, signal?: EventEmitter & { aborted: boolean }) =>
  l.request({ method: 'GET', path, headers: { accept: 'application/json', connection: 'keep-alive' }, signal, headersTimeoutMs: 5_000, bodyTimeoutMs: 0 })

/** A body read as most consumers read one (flowing, 'end' means whole): its bytes, and how it ended. */
function readBody(body: Readable): Promise<{ bytes: number; ended: 'end' | 'error' | 'close'; error?: { code?: string; message: string } }> {
  return new Promise(resolve => {
    let bytes = 0
    body.on('data', (chunk: Buffer) => (bytes += chunk.length))
    body.once('end', () => resolve({ bytes, ended: 'end' }))
    body.once('error', error => resolve({ bytes, ended: 'error', error }))
    body.once('close', () => setImmediate(() => resolve({ bytes, ended: 'close' })))
  })
}

async function h2Server(t: { teardown(fn: () => unknown): void }) {
  let refused = 0
  let died = 0
  let open = 0
  const server = http2.createSecureServer({ key: pki.server.key, cert: pki.server.cert })
  // the TLS sockets themselves: a dropped link, not a session the server closes
  const sockets = new Set<import('node:tls').TLSSocket>()
  server.on('secureConnection', socket => sockets.add(socket))
  const dropAll = () => {
    for (const socket of sockets) socket.destroy()
    sockets.clear()
  }
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {})
    const path = headers[':path']
    if (path === '/whole') {
      stream.respond({ ':status': 200, 'content-type': 'application/json' })
      stream.end(Buffer.alloc(300_000, 'a'))
    } else if (path === '/cut') {
      // half a list, then the connection drops
      stream.respond({ ':status': 200, 'content-type': 'application/json' })
      stream.write(Buffer.alloc(100_000, 'a'), () => setTimeout(() => dropAll(), 50))
    } else if (path === '/watch') {
      // events every 20 ms until the connection drops
      stream.respond({ ':status': 200, 'content-type': 'application/json' })
      const timer = setInterval(() => stream.write('{"type":"MODIFIED"}\n'), 20)
      stream.once('close', () => clearInterval(timer))
      setTimeout(dropAll, 150)
    } else if (path === '/watch-forever') {
      open++
      stream.once('close', () => open--)
      stream.respond({ ':status': 200, 'content-type': 'application/json' })
      const timer = setInterval(() => stream.write('{"type":"BOOKMARK"}\n'), 20)
      stream.once('close', () => clearInterval(timer))
    } else if (path === '/die-once' && died++ === 0) {
      dropAll() // the connection dies with the request unanswered
    } else if (path === '/refuse-once' && refused++ === 0) {
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM)
    } else if (path === '/hold') {
      stream.respond({ ':status': 200 })
      stream.write('{}')
    } else {
      stream.respond({ ':status': 200 })
      stream.end('ok')
    }
  })
  server.on('sessionError', () => {})
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise(resolve => server.close(resolve)))
  return {
    url: `https://127.0.0.1:${(server.address() as { port: number }).port}`,
    refusedCount: () => refused,
    openStreams: () => open,
    /** the next /die-once drops its connection again */
    dieAgain: () => (died = 0),
  }
}

/** The misbehaving server and a link to it, closed with the test. */
async function linkToServer(t: { teardown(fn: () => unknown): void }) {
  const server = await h2Server(t)
  const l = link(server.url)
  t.teardown(() => l.close())
  return { server, l }
}

t.test('a whole body ends; a body cut by a dropped connection is an error, not a short body', async t => {
  const { l } = await linkToServer(t)
  const whole = await get(l, '/whole')
  t.equal(whole.statusCode, 200)
  t.same(await readBody(whole.body), { bytes: 300_000, ended: 'end' }, 'all of it, and a clean end')
  const cut = await get(l, '/cut')
  t.equal(cut.statusCode, 200)
  const read = await readBody(cut.body)
  t.ok(read.bytes < 300_000, `short (${read.bytes} bytes)`)
  t.equal(read.ended, 'error', 'no end event: the body does not look whole')
  t.equal(read.error?.code, 'UND_ERR_SOCKET', `an error saying so: ${read.error?.message}`)
  const watch = await readBody((await get(l, '/watch')).body)
  t.equal(watch.ended, 'error', `a watch whose connection drops ends with an error, not as the apiserver ending it: ${watch.error?.message}`)
  const after = await get(l, '/whole')
  t.same(await readBody(after.body), { bytes: 300_000, ended: 'end' }, 'the next request gets a new connection')
})

t.test('a refused stream is sent again; an abort cancels only its own stream', async t => {
  const { server, l } = await linkToServer(t)
  const res = await get(l, '/refuse-once')
  t.equal(res.statusCode, 200, 'answered on the second try')
  t.equal(server.refusedCount(), 2, 'sent twice')
  await readBody(res.body)

  const held = await get(l, '/hold')
  const signal = Object.assign(new EventEmitter(), { aborted: false })
  const pending = get(l, '/hold', signal)
  const aborted = await pending
  signal.aborted = true
  signal.emit('abort')
  aborted.body.destroy()
  t.equal(l.openConnections, 1, 'one connection')
  t.notOk(held.body.destroyed, 'the other stream on it is still open')
  const next = await get(l, '/ok')
  t.equal(next.statusCode, 200, 'the connection still carries requests')
  await readBody(next.body)
  held.body.destroy()

  const early = Object.assign(new EventEmitter(), { aborted: true })
  await t.rejects(get(l, '/ok', early), { code: 'UND_ERR_ABORTED' }, 'an aborted request is not sent')
})

t.test('a body destroyed before it is read ends its stream at the server, and the link goes on', async t => {
  const { server, l } = await linkToServer(t)
  for (let i = 0; i < 5; i++) {
    const res = await get(l, '/watch-forever')
    res.body.destroy() // a watch interrupted as it began (the reflector's source changed)
  }
  await new Promise(resolve => setTimeout(resolve, 100))
  t.equal(server.openStreams(), 0, 'the server closed every stream')
  const next = await get(l, '/ok')
  t.equal(next.statusCode, 200, 'the next request is answered')
  t.same(await readBody(next.body), { bytes: 2, ended: 'end' })
})

t.test('a connection that dies before the answer: a read is asked again on a new one, a write is not', async t => {
  const { server, l } = await linkToServer(t)
  const read = await get(l, '/die-once')
  t.equal(read.statusCode, 200, 'the GET is answered on a new connection')
  await readBody(read.body)
  const write = l.request({ method: 'POST', path: '/die-once', headers: {}, body: Buffer.from('{}'), headersTimeoutMs: 5_000, bodyTimeoutMs: 0 })
  server.dieAgain()
  await t.rejects(write, { code: 'UND_ERR_SOCKET' }, 'a POST may have been applied: it fails, saying so')
})

t.test('a server that offers no h2 is told apart; one that is not there is a connection error', async t => {
  const server = https.createServer({ key: pki.server.key, cert: pki.server.cert }, (_req, res) => res.end('ok'))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise(resolve => server.close(resolve)))
  const l = link(`https://127.0.0.1:${(server.address() as { port: number }).port}`)
  await t.rejects(get(l, '/'), NotH2Error)
  t.equal(l.protocol, 'http/1.1')
  const gone = link('https://127.0.0.1:1')
  await t.rejects(get(gone, '/'), { code: 'ECONNREFUSED' })
})
