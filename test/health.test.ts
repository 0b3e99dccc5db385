import t from 'tap'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { Agent, request } from 'undici'
import { failureKind, failureReason, HealthChecker, healthDefaults } from '../lib/upstream/health.ts'
import type { CloudState, HealthOptions } from '../lib/upstream/health.ts'
import { ApiServerSimulator } from './simulator/index.ts'

type Behaviour = 'ok' | 'fail' | 'throw' | 'hang'

/** A fake probe whose answer per server the test sets; counts calls and remembers signals. */
function fakeProbe(initial: Behaviour = 'ok') {
  const behaviour = new Map<string, Behaviour>()
  const calls = new Map<string, number>()
  const signals: AbortSignal[] = []
  const probe: HealthOptions['probe'] = async (server, signal) => {
    calls.set(server.href, (calls.get(server.href) ?? 0) + 1)
    signals.push(signal)
    const b = behaviour.get(server.href) ?? initial
    if (b === 'ok') return true
    if (b === 'fail') return false
    if (b === 'throw') throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED' })
    return new Promise<boolean>(() => {}) // hangs, ignores the signal
  }
  return {
    probe,
    set: (server: URL, b: Behaviour) => behaviour.set(server.href, b),
    calls: (server: URL) => calls.get(server.href) ?? 0,
    signals,
  }
}

function captureLog() {
  const lines: { msg: string; level: number }[] = []
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
        done()
      },
    }),
  )
  return { log, lines }
}

async function eventually(check: () => unknown, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 10))
  }
}

const a = new URL('https://10.0.0.1:6443')
const b = new URL('https://10.0.0.2:6443')

function checker(t: { teardown(fn: () => unknown): void }, options: Partial<HealthOptions> & Pick<HealthOptions, 'probe'>) {
  const { log, lines } = captureLog()
  const h = new HealthChecker({ servers: [a], intervalMs: 20, timeoutMs: 1000, failuresToDown: 3, successesToUp: 2, log, ...options })
  const changes: CloudState[] = []
  h.on('change', (state: CloudState) => changes.push(state))
  t.teardown(() => h.stop())
  return { h, changes, lines }
}

t.test('defaults', async t => {
  t.same(healthDefaults, { intervalMs: 5000, timeoutMs: 2000, failuresToDown: 3, successesToUp: 1 })
  t.throws(() => new HealthChecker({ servers: [], probe: async () => true, log: pino({ level: 'silent' }) }), /at least one/)
  t.throws(() => new HealthChecker({ servers: [a], probe: async () => true, log: pino({ level: 'silent' }), failuresToDown: 0 }), /failuresToDown/)
})

t.test('online before the first round; the first round decides', async t => {
  const fake = fakeProbe('throw')
  const { h, changes, lines } = checker(t, { probe: fake.probe })
  t.equal(h.state, 'online', 'optimistic before start')
  t.ok(h.serverUp(a))
  await h.start()
  t.equal(fake.calls(a), 1, 'start() ran one round')
  t.equal(h.state, 'offline', 'one failed first round is enough: no cloud at startup')
  t.notOk(h.serverUp(a))
  t.same(changes, ['offline'])
  t.ok(
    lines.some(l => l.msg === 'cloud offline: https://10.0.0.1:6443: connect ECONNREFUSED 10.0.0.1:6443'),
    'logged with the reason',
  )
})

t.test('down after N consecutive failed probes, up after M successes, change only on transitions', async t => {
  const fake = fakeProbe('ok')
  const { h, changes, lines } = checker(t, { probe: fake.probe })
  await h.start()
  t.equal(h.state, 'online')
  t.same(changes, [], 'no change event when the first round confirms online')

  let failedCalls = 0
  const base = fake.calls(a)
  fake.set(a, 'fail')
  const atChange: number[] = []
  h.on('change', () => atChange.push(fake.calls(a) - base))
  await eventually(() => h.state === 'offline', 'offline')
  failedCalls = atChange[0]
  t.equal(failedCalls, 3, 'offline exactly at the third consecutive failure')

  const base2 = fake.calls(a)
  fake.set(a, 'ok')
  await eventually(() => h.state === 'online', 'online')
  t.equal(atChange[1] - (base2 - base), 2, 'online exactly at the second consecutive success')

  // Keep probing a while healthy: no more events.
  const calls = fake.calls(a)
  await eventually(() => fake.calls(a) >= calls + 5, 'five more rounds')
  t.same(changes, ['offline', 'online'])
  t.ok(lines.some(l => l.msg === 'cloud offline: https://10.0.0.1:6443: probe reported unhealthy'))
  t.ok(lines.some(l => l.msg === 'cloud online'))
  t.ok(
    lines.every(l => l.level === 30),
    'state changes at info',
  )
})

t.test('a failure in between resets the count', async t => {
  const fake = fakeProbe('ok')
  const { h, changes } = checker(t, { probe: fake.probe, intervalMs: 3_600_000 })
  await h.start()
  h.reportFailure(a, 'ECONNRESET')
  h.reportFailure(a, 'ECONNRESET')
  h.reportSuccess(a)
  h.reportFailure(a, 'ECONNRESET')
  h.reportFailure(a, 'ECONNRESET')
  t.equal(h.state, 'online', 'never three in a row')
  h.reportFailure(a, 'ECONNRESET')
  t.equal(h.state, 'offline')
  h.reportSuccess(a)
  h.reportFailure(a, 'x')
  h.reportSuccess(a)
  t.equal(h.state, 'offline', 'never two successes in a row')
  h.reportSuccess(a)
  t.equal(h.state, 'online')
  t.same(changes, ['offline', 'online'])
})

t.test('passive failures bring it down between probes; passive successes bring it back', async t => {
  const fake = fakeProbe('ok')
  const { h, changes, lines } = checker(t, { probe: fake.probe, intervalMs: 3_600_000 })
  await h.start()
  h.reportFailure(a, 'ECONNREFUSED')
  h.reportFailure(a, 'ECONNREFUSED')
  t.equal(h.state, 'online')
  h.reportFailure(a, 'ECONNREFUSED')
  t.equal(h.state, 'offline', 'third connection failure: down, without waiting for a probe')
  t.equal(fake.calls(a), 1, 'no probe ran meanwhile')
  t.ok(lines.some(l => l.msg === 'cloud offline: https://10.0.0.1:6443: ECONNREFUSED'))
  h.reportFailure(a, 'again')
  t.same(changes, ['offline'], 'no event while staying offline')
  h.reportSuccess(a)
  h.reportSuccess(a)
  t.equal(h.state, 'online')
  t.same(changes, ['offline', 'online'])
  h.reportFailure(new URL('https://unknown:1'), 'ignored')
  t.equal(h.state, 'online', 'reports about unknown servers are ignored')
})

t.test('two servers: online while one is up', async t => {
  const fake = fakeProbe('ok')
  const { h, changes, lines } = checker(t, { servers: [a, b], probe: fake.probe, intervalMs: 3_600_000, failuresToDown: 1, successesToUp: 1 })
  const serverEvents: [string, boolean][] = []
  h.on('server', (server: URL, up: boolean) => serverEvents.push([server.href, up]))
  await h.start()
  h.reportFailure(a, 'ECONNREFUSED')
  t.notOk(h.serverUp(a))
  t.ok(h.serverUp(new URL(b.href)), 'looked up by URL value, not identity')
  t.equal(h.state, 'online')
  h.reportFailure(b, 'ETIMEDOUT')
  t.equal(h.state, 'offline')
  t.ok(
    lines.some(l => l.msg === 'cloud offline: https://10.0.0.1:6443: ECONNREFUSED; https://10.0.0.2:6443: ETIMEDOUT'),
    'every server with its reason',
  )
  h.reportSuccess(b)
  t.equal(h.state, 'online')
  t.same(changes, ['offline', 'online'])
  t.same(serverEvents, [
    [a.href, true],
    [b.href, true],
    [a.href, false],
    [b.href, false],
    [b.href, true],
  ])
})

t.test('a probe slower than timeoutMs counts as a failure and is aborted', async t => {
  const fake = fakeProbe('ok')
  const { h, lines } = checker(t, { probe: fake.probe, timeoutMs: 30, failuresToDown: 2 })
  await h.start()
  fake.set(a, 'hang')
  await eventually(() => h.state === 'offline', 'offline after timeouts')
  t.ok(lines.some(l => l.msg === 'cloud offline: https://10.0.0.1:6443: probe timed out after 30 ms'))
  const hung = fake.signals.slice(1)
  t.ok(hung.length >= 2)
  await eventually(() => hung.every(s => s.aborted), 'signals aborted')
  fake.set(a, 'ok')
  await eventually(() => h.state === 'online', 'online again')
})

t.test('stop() stops probing, aborts a probe in flight and leaves no timers', async t => {
  const timers = () => process.getActiveResourcesInfo().filter(r => r === 'Timeout').length
  const before = timers()
  const fake = fakeProbe('ok')
  const { h } = checker(t, { probe: fake.probe })
  await h.start()
  await eventually(() => fake.calls(a) >= 3, 'a few rounds')
  h.stop()
  const calls = fake.calls(a)
  t.equal(timers(), before, 'no timers left')
  // Plenty of intervals: not one more probe.
  await new Promise(resolve => setTimeout(resolve, 300))
  t.equal(fake.calls(a), calls, 'no probes after stop()')

  // stop() while a probe hangs (long timeout): the probe is aborted, start() resolves, nothing is left.
  const hanging = fakeProbe('hang')
  const { h: h2, changes } = checker(t, { probe: hanging.probe, timeoutMs: 60_000 })
  const started = h2.start()
  await eventually(() => hanging.signals.length === 1, 'probe in flight')
  h2.stop()
  await started
  t.ok(hanging.signals[0].aborted, 'in-flight probe aborted')
  t.same(changes, [], 'an aborted round decides nothing')
  t.equal(h2.state, 'online')
  t.equal(timers(), before, 'no timers left')
})

t.test('against the simulator: refuse → offline, none → online', async t => {
  const sim = await ApiServerSimulator.start()
  const agent = new Agent({ connect: { timeout: 1000 } })
  t.teardown(async () => {
    await agent.close()
    await sim.close()
  })
  const server = new URL(sim.url)
  const probe: HealthOptions['probe'] = async (s, signal) => {
    const res = await request(new URL('/readyz', s), { signal, dispatcher: agent })
    await res.body.dump()
    return res.statusCode === 200
  }
  const { h, changes, lines } = checker(t, { servers: [server], probe, intervalMs: 20, timeoutMs: 2000, failuresToDown: 2, successesToUp: 2 })
  await h.start()
  t.equal(h.state, 'online')
  await sim.setFault('refuse')
  await eventually(() => h.state === 'offline', 'offline while refused')
  t.ok(
    lines.some(l => /^cloud offline: http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/.test(l.msg)),
    'reason names the refusal',
  )
  await sim.setFault('none')
  await eventually(() => h.state === 'online', 'online again')
  t.same(changes, ['offline', 'online'])
  h.stop()
})

t.test('a server that answers again is confirmed within a second, not an interval later', async t => {
  const fake = fakeProbe('fail')
  // failures are found by passive reports here; the interval is long, as a node's 5 s
  const { h } = checker(t, { probe: fake.probe, intervalMs: 60_000, failuresToDown: 1 })
  await h.start()
  t.equal(h.state, 'offline')
  fake.set(a, 'ok')
  h.reportSuccess(a) // the first success (a probe, or real traffic)
  const before = fake.calls(a)
  await eventually(() => h.state === 'online', 'online', 5_000)
  t.equal(fake.calls(a) - before, 1, 'one confirming probe, a short delay after the first success, brings it back')
})

t.test('a down server is probed again within a second whatever the interval, and its first answer brings it back', async t => {
  const fake = fakeProbe('throw')
  const { h } = checker(t, { probe: fake.probe, intervalMs: 60_000, failuresToDown: 1, successesToUp: 1 })
  await h.start()
  t.equal(h.state, 'offline')
  await eventually(() => fake.calls(a) >= 4, 'probes at 250 ms, 500 ms, then every second', 10_000)
  fake.set(a, 'ok')
  // the minute-long interval never comes into it: the next probe (at most a second away) decides
  await eventually(() => h.state === 'online', 'online', 10_000)
  const calls = fake.calls(a)
  await new Promise(resolve => setTimeout(resolve, 1_500))
  t.equal(fake.calls(a), calls, 'once up, probing is back to the interval')
})

t.test('a dead link (its PING unanswered) takes the server down at once', async t => {
  const fake = fakeProbe('ok')
  const { h, changes } = checker(t, { probe: fake.probe, intervalMs: 60_000, failuresToDown: 3 })
  await h.start()
  t.equal(h.state, 'online')
  fake.set(a, 'throw')
  h.reportDown(a, 'HTTP/2 PING to https://10.0.0.1:6443 not answered in 15000 ms')
  t.equal(h.state, 'offline', 'not after three failures: the link is known dead')
  t.same(changes, ['offline'])
  t.match(h.problem(), /PING .* not answered/)
  const calls = fake.calls(a)
  await eventually(() => fake.calls(a) > calls, 'a probe soon after, not an interval later', 5_000)
})

t.test('failures in one line: a plain-HTTP answer to TLS named as such, OpenSSL dumps left out', async t => {
  const dump = '803C0805417F0000:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:350:\n'
  const plain = failureReason(`ERR_SSL_WRONG_VERSION_NUMBER: ${dump}`)
  t.equal(plain, 'it answered the TLS handshake in plain HTTP (ERR_SSL_WRONG_VERSION_NUMBER)')
  t.equal(failureKind(plain), 'plain-http', 'a misconfiguration of its own')
  const other = failureReason(
    `ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: 80:error:0A000410:SSL routines:ssl3_read_bytes:sslv3 alert handshake failure:../ssl/record/rec_layer_s3.c:1586:\nSSL alert number 40\n`,
  )
  t.notMatch(other, /\n|SSL routines|rec_layer/, `one line, the dump's words kept: ${other}`)
  t.match(other, /sslv3 alert handshake failure/)
  t.equal(failureKind(other), 'untrusted')
  t.equal(failureReason('ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443'), 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443', 'anything else as it was')
})
