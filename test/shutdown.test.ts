// The signal handling of the outpost command, with the clock and the exit under the test's control
// (a real process finishes its shutdown too fast to catch it in the middle reliably).
import t from 'tap'
import { shutdownHandler } from '../cmd/shutdown.ts'

function harness(close: () => Promise<unknown>, deadlineMs = 60_000) {
  const exits: number[] = []
  const logged: string[] = []
  const stop = shutdownHandler({ close, exit: code => exits.push(code), log: signal => logged.push(signal), deadlineMs })
  return { stop, exits, logged }
}

t.test('one signal: a graceful stop, exit 0 once everything is closed', async t => {
  let finish = () => {}
  const h = harness(() => new Promise<void>(resolve => (finish = resolve)))
  h.stop('SIGTERM')
  await new Promise(resolve => setImmediate(resolve))
  t.same(h.exits, [], 'nothing exits while watches end and the cache flushes')
  finish()
  await new Promise(resolve => setImmediate(resolve))
  t.same(h.exits, [0])
  t.same(h.logged, ['SIGTERM'])
})

t.test('a second signal during the stop exits 1 at once', async t => {
  const h = harness(() => new Promise(() => {}))
  h.stop('SIGTERM')
  h.stop('SIGINT')
  t.same(h.exits, [1], 'no waiting for the first stop')
  t.same(h.logged, ['SIGTERM'], 'the second is not a second shutdown')
})

t.test('a stop that hangs past the deadline exits 1', async t => {
  const h = harness(() => new Promise(() => {}), 50)
  h.stop('SIGTERM')
  await new Promise(resolve => setTimeout(resolve, 200))
  t.same(h.exits, [1])
})
