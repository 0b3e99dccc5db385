// The consistent-read proof's probe (lib/watch/freshness.ts): reads that came before a probe was
// sent share it, one that comes while it is on the wire waits for the next, and the answer's
// revision is read as the apiserver writes it.
import t from 'tap'
import { Readable } from 'node:stream'
import { ReadFloors, RevisionProbe, listRevision, proofWaitMs } from '../lib/watch/freshness.ts'

/** A probe whose apiserver answers when told to, with the revision it is at then. */
function controlledProbe() {
  const sent: { path: string; answer(rv: number): void; fail(status: number): void }[] = []
  const probe = new RevisionProbe('/api/v1/pods?fieldSelector=spec.nodeName%3Dn1', path => {
    return new Promise(resolve => {
      sent.push({
        path,
        answer: rv =>
          resolve({
            statusCode: 200,
            body: Readable.from([Buffer.from(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: String(rv) }, items: [] }))]),
          }),
        fail: status => resolve({ statusCode: status, body: Readable.from([Buffer.from('{"kind":"Status"}')]) }),
      })
    })
  })
  return { probe, sent }
}

const tick = () => new Promise(resolve => setImmediate(resolve))

t.test('reads before a probe is sent share it; one that comes while it is on the wire gets the next', async t => {
  const { probe, sent } = controlledProbe()
  const first = [probe.latest(), probe.latest()]
  await tick()
  t.equal(sent.length, 1, 'one probe for two reads at once')
  t.equal(sent[0].path, '/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=1', "the cache's own scope, one item")
  await tick()
  const later = [probe.latest(), probe.latest(), probe.latest()]
  t.equal(sent.length, 1, 'the next probe waits for the one on the wire')
  sent[0].answer(10)
  t.same(await Promise.all(first), [10n, 10n])
  await tick()
  await tick()
  t.equal(sent.length, 2, 'then one probe for every read that came meanwhile')
  sent[1].answer(12)
  t.same(await Promise.all(later), [12n, 12n, 12n], 'none of them was given the revision read before it came')
  const after = probe.latest()
  await tick()
  t.equal(sent.length, 3, 'nothing on the wire: a new read sends on the next turn')
  sent[2].answer(13)
  t.equal(await after, 13n)
})

t.test('a failed probe fails its reads, and the next read probes again', async t => {
  const { probe, sent } = controlledProbe()
  const failing = probe.latest()
  await tick()
  sent[0].fail(403)
  await t.rejects(failing, /403/)
  const next = probe.latest()
  await tick()
  t.equal(sent.length, 2)
  sent[1].answer(7)
  t.equal(await next, 7n)
})

t.test('the revision of a list answer, or why there is none', async t => {
  t.equal(listRevision(200, Buffer.from('{"metadata":{"resourceVersion":"18446744073709551615"}}')), 18446744073709551615n, '64-bit safe')
  const bad: [number, string, RegExp][] = [
    [500, '{"kind":"Status"}', /500/],
    [200, '{"metadata":{}}', /no resourceVersion/],
    [200, '{"metadata":{"resourceVersion":"12a"}}', /no resourceVersion/],
    [200, 'not json', /JSON|Unexpected/],
  ]
  for (const [code, body, why] of bad) t.throws(() => listRevision(code, Buffer.from(body)), why, `${code} ${body}`)
})

t.test('how long a read waits for the cache follows the probe round trip, within bounds', async t => {
  t.equal(proofWaitMs(0), 20, 'a floor for a loopback apiserver')
  t.equal(proofWaitMs(40), 80, 'twice the round trip')
  t.equal(proofWaitMs(5_000), 250, 'a ceiling: a revision moved by another resource is never reached')
})

t.test("each client's floor for its any-state reads: raised, never lowered, gone once reached, bounded", async t => {
  const floors = new ReadFloors()
  t.equal(floors.floorFor('kubectl', 5n), undefined, 'none before a relayed consistent read')
  floors.raise('kubectl', 10n)
  floors.raise('kubectl', 8n)
  t.equal(floors.floorFor('kubectl', 5n), 10n, 'the highest revision the client was given')
  t.equal(floors.floorFor('kube-proxy', 5n), undefined, 'another client has none')
  t.equal(floors.floorFor('kubectl', 10n), undefined, 'reached: no floor')
  t.equal(floors.size, 0, 'and forgotten')
  for (let i = 0; i < 100; i++) floors.raise(`client-${i}`, 1n)
  t.equal(floors.size, 64, 'at most 64 clients')
  t.equal(floors.floorFor('client-0', 0n), undefined, 'the oldest forgotten first')
  t.equal(floors.floorFor('client-99', 0n), 1n)
})
