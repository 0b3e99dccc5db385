// A follower's choices, without a cluster: which leader the Lease says to follow (a table), and how
// the way to a leader behaves when the leader cannot answer (a real TLS server): the same request
// goes to the cloud at once, and the owner is told; answers of the API itself pass through; a
// certificate other than the one the Lease publishes is never trusted.
import t from 'tap'
import type { Test } from 'tap'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { chooseSource, addressAnnotation, certificateAnnotation } from '../lib/pool/pool-member.ts'
import { LeaderSource } from '../lib/pool/leader-source.ts'
import type { StoredLease } from '../lib/pool/lease-election.ts'
import type { UpstreamRequest, UpstreamResponse } from '../lib/upstream/upstream.ts'
import { createPinnedCertificate } from '../certs/pinned.ts'
import { createTestPki } from './helpers/pki.ts'
import { readAll } from '../lib/upstream/read-all.ts'

const lease = (holder: string, annotations: Record<string, string> = {}): StoredLease => ({
  record: { holderIdentity: holder, leaseDurationSeconds: 15, acquireTime: '', renewTime: 'r1', leaseTransitions: 0 },
  resourceVersion: '5',
  annotations,
})
const published = { [addressAnnotation]: 'https://10.0.0.7:10269', [certificateAnnotation]: '-----BEGIN CERTIFICATE-----…' }

t.test('chooseSource: follow another holder whose term runs and who published where it is', async t => {
  const cases: [string, StoredLease | undefined, number | undefined, number, string][] = [
    ['no Lease yet', undefined, undefined, 0, 'none'],
    ['released (holder "")', lease(''), undefined, 0, 'none'],
    ['this hub holds it', lease('me', published), 15_000, 0, 'none'],
    ["another's term ran out on this clock", lease('n7', published), 15_000, 15_000, 'none'],
    ['another published nothing', lease('n7'), 15_000, 1_000, 'none'],
    ['another published no certificate', lease('n7', { [addressAnnotation]: published[addressAnnotation] }), 15_000, 1_000, 'none'],
    ["another's term runs, address and certificate published", lease('n7', published), 15_000, 14_999, 'n7'],
  ]
  for (const [what, observed, termEndsAt, now, want] of cases) {
    const choice = chooseSource('me', observed, termEndsAt, now)
    t.equal('leader' in choice ? choice.leader.identity : 'none', want, what)
    if ('leader' in choice) t.strictSame(choice.leader, { identity: 'n7', url: published[addressAnnotation], certificate: published[certificateAnnotation] })
  }
})

/** A leader's pool port stand-in: TLS with a pinned certificate, node client certificates asked for, answering as told. */
async function leaderStandIn(t: Test, answer: (path: string) => { code: number; body: string }) {
  const pki = await createTestPki()
  const pinned = await createPinnedCertificate({ commonName: 'outpost-pool:n7', ips: ['127.0.0.1'] })
  const seen: { path: string; clientCn?: string }[] = []
  const server = https.createServer({ cert: pinned.cert, key: pinned.key, ca: pki.ca.cert, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate()
    seen.push({ path: req.url ?? '', clientCn: peer?.subject?.CN as string | undefined })
    const { code, body } = answer(req.url ?? '')
    res.writeHead(code, { 'content-type': 'application/json' }).end(body)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => server.close(() => resolve())))
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { pki, pinned, seen, url }
}

function cloudStandIn() {
  const asked: string[] = []
  return {
    asked,
    request: async (req: UpstreamRequest): Promise<UpstreamResponse> => {
      asked.push(req.path)
      return { server: new URL('https://cloud.example'), statusCode: 200, headers: {}, body: Readable.from([Buffer.from('{"from":"cloud"}')]) }
    },
  }
}

const get = (path: string): UpstreamRequest => ({ method: 'GET', path, headers: { accept: 'application/json' } })

/** A follower's way to the stand-in, with the stand-in's certificate pinned, and what it tells its owner. */
function follow(t: Test, leader: Awaited<ReturnType<typeof leaderStandIn>>, certificate = leader.pinned.cert) {
  const cloud = cloudStandIn()
  const failures: string[] = []
  const source = new LeaderSource({
    leader: { identity: 'n7', url: leader.url, certificate },
    credentials: { cert: Buffer.from(leader.pki.client.cert), key: Buffer.from(leader.pki.client.key) },
    cloud,
    onFailure: reason => failures.push(reason),
  })
  t.teardown(() => source.close())
  return { source, cloud, failures }
}

t.test('a leader that answers: the request is its, with the node certificate presented', async t => {
  const leader = await leaderStandIn(t, () => ({ code: 200, body: '{"from":"leader"}' }))
  const { source, cloud, failures } = follow(t, leader)
  const res = await source.request(get('/api/v1/services'))
  t.equal((await readAll(res.body)).toString(), '{"from":"leader"}')
  t.equal(res.server.origin, leader.url, 'the answer says it came from the leader')
  t.strictSame(failures, [])
  t.strictSame(cloud.asked, [])
  t.equal(leader.seen[0]?.clientCn, 'system:node:kind-worker2', "the node's client certificate was presented")
})

t.test('a leader that does not answer 200: the same request goes to the cloud at once, and the owner is told why', async t => {
  const answers: Record<string, { code: number; body: string }> = {
    '/refused-503': { code: 503, body: '{"kind":"Status","message":"this hub does not lead pool p now"}' },
    '/forbidden': { code: 403, body: '{"kind":"Status","message":"forbidden"}' },
    '/not-ready': { code: 429, body: '{"kind":"Status","message":"not initialized"}' },
    '/gone': { code: 410, body: '{"kind":"Status","code":410}' },
    '/too-new': { code: 504, body: '{"kind":"Status","code":504}' },
  }
  const leader = await leaderStandIn(t, path => answers[path])
  const { source, cloud, failures } = follow(t, leader)
  const paths = ['/refused-503', '/forbidden', '/not-ready', '/gone', '/too-new']
  for (const path of paths) {
    const res = await source.request(get(path))
    t.equal((await readAll(res.body)).toString(), '{"from":"cloud"}', `${path}: answered by the cloud`)
  }
  t.strictSame(
    cloud.asked,
    paths,
    'a 410 or 504 too: the leader is behind, the cloud may serve it (a relist from a lagging leader would take the cache back in time)',
  )
  t.equal(failures.length, paths.length)
  t.match(failures[0], /n7 answered 503: this hub does not lead pool p now/, "the leader's own words")
})

t.test('a leader whose certificate is not the published one, or that is gone: never trusted, the cloud answers', async t => {
  const leader = await leaderStandIn(t, () => ({ code: 200, body: '{"from":"an impostor"}' }))
  const other = await createPinnedCertificate({ commonName: 'outpost-pool:n7', ips: ['127.0.0.1'] })
  const { source: impostor, cloud, failures } = follow(t, leader, other.cert)
  const res = await impostor.request(get('/api/v1/services'))
  t.equal((await readAll(res.body)).toString(), '{"from":"cloud"}', 'a certificate other than the pinned one: the cloud answers')
  t.equal(leader.seen.length, 0, 'no request reached the impostor')
  t.equal(failures.length, 1)

  const gone = new LeaderSource({
    leader: { identity: 'n8', url: 'https://127.0.0.1:1', certificate: other.cert },
    credentials: { cert: Buffer.from(leader.pki.client.cert), key: Buffer.from(leader.pki.client.key) },
    cloud,
    onFailure: reason => failures.push(reason),
  })
  const fromCloud = await gone.request(get('/api/v1/endpoints'))
  t.equal((await readAll(fromCloud.body)).toString(), '{"from":"cloud"}', 'a refused dial: the cloud answers')
  t.match(failures[1], /n8 .*ECONNREFUSED/, 'and the owner is told')
  gone.failed(new URL('https://127.0.0.1:1'), 'a watch frame that does not decode')
  t.match(failures[2], /n8: a watch frame that does not decode/, 'a stream of the leader that broke is its failure too')
  gone.failed(new URL('https://cloud.example'), 'the cloud broke a stream')
  t.equal(failures.length, 3, "another server's broken stream is not the leader's")
  gone.close()
  gone.failed(new URL('https://127.0.0.1:1'), 'cut because the hub moved on')
  t.equal(failures.length, 3, 'nor one cut after the hub moved on')
  t.throws(
    () =>
      new LeaderSource({
        leader: { identity: 'n9', url: 'https://x', certificate: 'not a certificate' },
        credentials: { cert: Buffer.alloc(0), key: Buffer.alloc(0) },
        cloud,
        onFailure: () => {},
      }),
    /does not parse/,
    'a certificate on the Lease that does not parse is refused before any request',
  )
})
