// A watch cache's window of recent events is a ring: it must keep exactly the newest `capacity`
// events in order through any number of wrap-arounds, and say which event it let go.
import t from 'tap'
import { EventWindow } from '../lib/watch/event-window.ts'

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
