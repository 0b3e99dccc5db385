// Requests served at once (--max-requests-inflight, --max-long-running): past the cap a 429 Status
// with Retry-After, as kube-apiserver answers; kubelet and kube-proxy keep a share no one else gets.
import t from 'tap'
import net from 'node:net'
import { request } from 'undici'
import { BodyBudget, defaultBodyBudgetBytes, InflightLimiter, reservedShare } from '../lib/front/inflight.ts'
import type { Slot } from '../lib/front/inflight.ts'
import { isStatus } from '../lib/api/status.ts'
import type { Status } from '../lib/api/status.ts'
import { eventually, startHarness } from './helpers/hub.ts'

const admitted = (s: Slot | Status): s is Slot => !isStatus(s)

t.test('the limiter: a reserved share for the node, released slots reused, 0 is no cap', async t => {
  const limiter = new InflightLimiter({ maxInflight: 10, maxLongRunning: 0 })
  const others = Array.from({ length: 10 }, () => limiter.admit('short', 'curl'))
  const forOthers = Math.floor(10 * (1 - reservedShare))
  t.equal(others.filter(admitted).length, forOthers, `others get ${forOthers} of 10`)
  const refused = others.find(s => !admitted(s)) as Status
  t.match(refused, { kind: 'Status', code: 429, reason: 'TooManyRequests', details: { retryAfterSeconds: 1 }, message: /--max-requests-inflight/ })
  const node = [limiter.admit('short', 'kubelet'), limiter.admit('short', 'kube-proxy'), limiter.admit('short', 'kubelet')]
  t.same(node.map(admitted), [true, true, false], 'kubelet and kube-proxy get the rest, up to the cap')
  ;(others[0] as Slot).release()
  ;(others[0] as Slot).release() // twice: counted once
  t.equal(limiter.counts.short, 9)
  t.ok(admitted(limiter.admit('short', 'kubelet')), 'a released slot is taken again')
  t.ok(!admitted(limiter.admit('short', 'curl')), 'but not by others past their share')
  t.ok(Array.from({ length: 100 }, () => limiter.admit('long-running', 'curl')).every(admitted), 'long-running requests are counted apart, and 0 caps nothing')
})

t.test('past --max-long-running, a watch gets a 429 with Retry-After; the node’s share stays; a closed watch frees its slot', async t => {
  const h = await startHarness({ demo: true, config: { maxLongRunningRequests: 5, sharedWatches: false } })
  t.teardown(() => h.close())
  const watchPath = `${h.url}/api/v1/namespaces/default/configmaps?watch=true`
  const open = async (userAgent: string) => {
    const controller = new AbortController()
    const res = await request(watchPath, { headers: { 'user-agent': userAgent }, signal: controller.signal })
    if (res.statusCode !== 200) {
      return { code: res.statusCode, retryAfter: res.headers['retry-after'], body: (await res.body.json()) as Status, close: () => {} }
    }
    res.body.on('error', () => {})
    res.body.resume()
    return { code: 200, close: () => controller.abort() }
  }
  const pods = await Promise.all(Array.from({ length: 4 }, () => open('curl/8.0')))
  t.same(
    pods.map(p => p.code),
    [200, 200, 200, 200],
    'four of five for other clients',
  )
  const fifth = await open('curl/8.0')
  t.equal(fifth.code, 429, 'the fifth is refused')
  t.equal(fifth.retryAfter, '1', 'with Retry-After, which client-go honours')
  t.match(fifth.body, { kind: 'Status', reason: 'TooManyRequests', message: /--max-long-running/ })
  const kubelet = await open('kubelet/v1.33.0')
  t.equal(kubelet.code, 200, 'kubelet still gets the reserved slot')
  t.equal((await open('kubelet/v1.33.0')).code, 429, 'and the cap holds for it too')
  // five open (four others', kubelet's): closing one frees its slot for the next
  pods[0].close()
  const next = await eventually(
    async () => {
      const again = await open('kubelet/v1.33.0')
      return again.code === 200 ? again : undefined
    },
    10_000,
    'a closed watch to free its slot',
  )
  next!.close()
  for (const w of [...pods, kubelet]) w.close()
})

t.test('request bodies held at once are capped: past the cap a 429, kubelet keeps its share, a finished request gives its bytes back', async t => {
  const budget = new BodyBudget(100)
  t.ok(budget.take(80, 'curl'), 'others may hold 80 % of the cap')
  t.notOk(budget.take(1, 'curl'), 'not a byte more')
  t.ok(budget.take(20, 'kubelet'), 'kubelet gets the rest')
  t.notOk(budget.take(1, 'kube-proxy'), 'and the cap holds for the node too')
  budget.give(80)
  t.ok(budget.take(50, 'curl'), 'given back, taken again')

  // live, at the hub's own cap: bodies a client sends all but their last byte of, held open (for
  // longer than a loaded box takes to send them all: a body idle past --header-timeout is a 408)
  const h = await startHarness({ demo: true, config: { headerTimeoutMs: 60_000 } })
  t.teardown(() => h.close())
  const { port } = new URL(h.url)
  const size = 3 * 1024 * 1024 - 1024
  const held: net.Socket[] = []
  t.teardown(() => held.forEach(s => s.destroy()))
  /** a body sent but for its last byte; `read`: resolves once the hub has taken it all (else at once) */
  const hold = (userAgent: string, read = true) =>
    new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(
          `POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: outpost\r\nUser-Agent: ${userAgent}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`,
        )
        const body = Buffer.alloc(size - 1, 0x20) // a ConfigMap, then blanks: valid JSON once the last byte comes
        body.write('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"held-"}}')
        socket.write(body, () => read && resolve(socket))
        if (!read) resolve(socket)
      })
      socket.on('error', reject)
      held.push(socket)
    })
  /** the head of the answer (a keep-alive connection stays open after it) */
  const answerOf = (socket: net.Socket) =>
    new Promise<string>(resolve => {
      let text = ''
      socket.on('data', chunk => {
        text += chunk.toString()
        if (text.includes('\r\n\r\n')) resolve(text)
      })
      socket.on('close', () => resolve(text))
    })
  const forOthers = Math.floor((defaultBodyBudgetBytes * (1 - reservedShare)) / size)
  // one more than the share holds: whichever of them the hub reads last is refused (the kernel
  // buffers a few MB of each, so the order the hub reads them in is not the order they were sent)
  const others: net.Socket[] = []
  for (let i = 0; i <= forOthers; i++) others.push(await hold('curl/8.0', false))
  const answer = await Promise.race(others.map(answerOf))
  t.match(answer, /^HTTP\/1.1 429/, `of ${forOthers + 1} bodies held at once, one is refused`)
  t.match(answer, /retry-after: 1/i)
  const kubelet = await hold('kubelet/v1.33.0')
  kubelet.write(' ')
  t.match(await answerOf(kubelet), /^HTTP\/1.1 201/, 'kubelet’s write still passes')
  for (const socket of held.splice(0)) socket.destroy()
  await eventually(
    async () => {
      const res = await request(`${h.url}/api/v1/namespaces/default/configmaps`, {
        method: 'POST',
        headers: { 'user-agent': 'curl/8.0', 'content-type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'after-' }, data: { pad: 'x'.repeat(size - 200) } }),
      })
      await res.body.dump()
      return res.statusCode === 201
    },
    10_000,
    'the bytes given back once the held requests are gone',
  )
})
