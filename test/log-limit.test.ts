// Repeated warnings and errors are summarized, not written once each (lib/log-limit.ts).
import { Writable } from 'node:stream'
import { pino } from 'pino'
import t from 'tap'
import { loggedLines, repeatLimitHook } from '../lib/log-limit.ts'
import { eventually } from './helpers/hub.ts'

function capture(limits: { burst: number; windowMs: number }) {
  const lines: { msg: string; level: number; suppressed?: number; server?: string; frame?: number }[] = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
      done()
    },
  })
  return { log: pino({ level: 'info', hooks: { logMethod: repeatLimitHook(limits) } }, stream), lines }
}

t.test('a burst per message and window, then one summary line with the count; info untouched; children share it', async t => {
  const { log, lines } = capture({ burst: 3, windowMs: 300 })
  const before = { ...loggedLines }
  const child = log.child({ server: 'https' })
  for (let i = 0; i < 2_000; i++) (i % 2 ? child : log).warn({ frame: i }, 'watch: a bad frame skipped')
  log.error('disk cache: a write failed')
  for (let i = 0; i < 10; i++) log.info('request')
  const bad = lines.filter(l => l.msg === 'watch: a bad frame skipped')
  t.equal(bad.length, 3, '3 of 2,000 written')
  t.equal(bad[1].server, 'https', 'a child keeps its bindings')
  t.equal(lines.filter(l => l.msg === 'disk cache: a write failed').length, 1, 'another message has a limit of its own')
  t.equal(lines.filter(l => l.msg === 'request').length, 10, 'info is never limited')
  t.equal(loggedLines.warn - before.warn, 2_000, 'every warning counted for the metric')
  t.equal(loggedLines.error - before.error, 1)
  t.equal(loggedLines.suppressed - before.suppressed, 1_997)
  const summary = await eventually(() => lines.find(l => l.suppressed !== undefined), 5_000, 'the summary line')
  t.match(summary, { level: 40, suppressed: 1_997, msg: /^1997 more like this left out in the last 0 s: watch: a bad frame skipped$/ })
  log.warn({ frame: -1 }, 'watch: a bad frame skipped')
  t.equal(lines.filter(l => l.msg === 'watch: a bad frame skipped').length, 4, 'a new window writes again')
})
