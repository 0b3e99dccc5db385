// Requests served at once (--max-requests-inflight, --max-long-running): past the cap a 429 Status
// with Retry-After, as kube-apiserver answers; kubelet and kube-proxy keep a share no one else gets.
import t from 'tap'
import { request } from 'undici'
import { InflightLimiter, reservedShare } from '../lib/front/inflight.ts'
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
