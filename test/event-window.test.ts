// A watch cache's window of recent events is a ring: it must keep exactly the newest `capacity`
// events in order through any number of wrap-arounds, no more bytes than its bound, and say which event it let go.
import t from 'tap'
import { pino } from 'pino'
import { EventWindow } from '../lib/watch/event-window.ts'
import { WatchCache, eventBytes } from '../lib/watch/cache.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { parseScope } from '../lib/cache/scope.ts'

const event = (v: number) => ({ resourceVersion: BigInt(v) })
const versions = (events: { resourceVersion: bigint }[]) => events.map(e => Number(e.resourceVersion))

t.test('keeps the newest events in order, oldest first, and hands back the one it drops', async t => {
  for (const capacity of [1, 2, 3, 7]) {
    const window = new EventWindow(capacity)
    const dropped: number[] = []
    for (let v = 1; v <= 25; v++) {
      const out = window.push(event(v))
      if (out) dropped.push(Number(out.resourceVersion))
      const kept = Array.from({ length: Math.min(v, capacity) }, (_, i) => v - Math.min(v, capacity) + 1 + i)
      t.same(versions(window.after(0n)), kept, `capacity ${capacity}, after ${v} pushes`)
      t.equal(window.length, kept.length)
    }
    t.same(
      dropped,
      Array.from({ length: 25 - capacity }, (_, i) => i + 1),
      `capacity ${capacity}: every event dropped once, oldest first`,
    )
  }
})

t.test('after(version) is the events newer than it, whatever the ring has wrapped', async t => {
  const window = new EventWindow(5)
  for (let v = 10; v <= 100; v += 10) window.push(event(v))
  t.same(versions(window.after(0n)), [60, 70, 80, 90, 100])
  t.same(versions(window.after(75n)), [80, 90, 100])
  t.same(versions(window.after(100n)), [])
})

t.test('a window with no room is refused', async t => {
  t.throws(() => new EventWindow(0), /at least one event/)
})

t.test('bounded by bytes: the newest events that fit, the newest always, and the newest of those dropped handed back', async t => {
  const sized = (v: number, size: number) => ({ resourceVersion: BigInt(v), size })
  const cases: { title: string; capacity: number; maxBytes: number; sizes: number[]; kept: number[]; bytes: number; dropped: number[] }[] = [
    { title: 'all fit', capacity: 10, maxBytes: 100, sizes: [10, 20, 30], kept: [1, 2, 3], bytes: 60, dropped: [] },
    { title: 'exactly full', capacity: 10, maxBytes: 60, sizes: [10, 20, 30], kept: [1, 2, 3], bytes: 60, dropped: [] },
    { title: 'one byte over drops the oldest', capacity: 10, maxBytes: 59, sizes: [10, 20, 30], kept: [2, 3], bytes: 50, dropped: [1] },
    { title: 'a big event drops several at once', capacity: 10, maxBytes: 100, sizes: [30, 30, 30, 90], kept: [4], bytes: 90, dropped: [3] },
    { title: 'an event bigger than the bound is kept alone', capacity: 10, maxBytes: 50, sizes: [10, 80, 10], kept: [3], bytes: 10, dropped: [1, 2] },
    { title: 'the count bound still holds', capacity: 2, maxBytes: 1000, sizes: [1, 1, 1, 1], kept: [3, 4], bytes: 2, dropped: [1, 2] },
    { title: 'whichever bound comes first', capacity: 3, maxBytes: 25, sizes: [10, 10, 1, 1, 10, 20], kept: [6], bytes: 20, dropped: [1, 2, 5] },
  ]
  for (const c of cases) {
    const window = new EventWindow<ReturnType<typeof sized>>({ capacity: c.capacity, maxBytes: c.maxBytes, sizeOf: e => e.size })
    const dropped: number[] = []
    c.sizes.forEach((size, i) => {
      const out = window.push(sized(i + 1, size))
      if (out) dropped.push(Number(out.resourceVersion))
    })
    t.same(versions(window.after(0n)), c.kept, `${c.title}: kept`)
    t.equal(window.bytes, c.bytes, `${c.title}: bytes`)
    t.same(dropped, c.dropped, `${c.title}: the newest dropped at each push`)
  }
  const window = new EventWindow<ReturnType<typeof sized>>({ capacity: 4, maxBytes: 100, sizeOf: e => e.size })
  for (let v = 1; v <= 4; v++) window.push(sized(v, 10))
  window.clear()
  t.equal(window.bytes, 0, 'cleared: no bytes')
  t.throws(() => new EventWindow({ capacity: 4, maxBytes: 0 }), /some bytes/)
})

t.test("a watch cache's window is bounded by its bytes: a resume from before what it keeps is 410 Expired", async t => {
  const services: ResourceKey = { component: 'shared-json', group: '', version: 'v1', resource: 'services' }
  const svc = (name: string, rv: number): CachedObject => {
    const doc = { kind: 'Service', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: String(rv) }, spec: { pad: 'x'.repeat(200) } }
    return {
      apiVersion: 'v1',
      kind: 'Service',
      namespace: 'default',
      name,
      resourceVersion: String(rv),
      format: 'json',
      body: Buffer.from(JSON.stringify(doc)),
      labels: {},
    }
  }
  const size = svc('a', 11).body.length
  // room for three MODIFIEDs of one object: its body twice (with its frame) and the body before it
  const cache = new WatchCache({
    storeKey: services,
    scope: parseScope({ namespace: '', labelSelector: '', fieldSelector: '' }),
    format: 'json',
    log: pino({ level: 'silent' }),
    windowMaxBytes: 3 * 3 * size,
  })
  await cache.replace([svc('a', 10)], '10', 'json', { kind: 'Service', apiVersion: 'v1' })
  for (let rv = 11; rv <= 20; rv++) cache.event('MODIFIED', svc('a', rv))
  await new Promise(resolve => setImmediate(resolve))
  t.equal(cache.windowLength, 3, 'three events fit')
  t.equal(cache.windowBytes, 9 * size, 'each counted with the object it replaced and its frame')
  t.equal(eventBytes({ type: 'MODIFIED', object: svc('a', 11), resourceVersion: 11n }), 2 * size, 'an ADDED: no object before it')
  t.same(
    (cache.eventsAfter(17n) as { resourceVersion: bigint }[]).map(e => Number(e.resourceVersion)),
    [18, 19, 20],
    'a resume from the oldest version it keeps replays the rest',
  )
  t.equal(cache.eventsAfter(16n), 'expired', 'from just before: its event was dropped, 410 Expired')
  t.equal(cache.eventsAfter(10n), 'expired')
})
