// What the hub says, as a person reads it: --log-format (text at a terminal, JSON lines otherwise),
// and offline refusals in the user's terms (which client listed what, what the request asks for).
import t from 'tap'
import { spawn } from 'node:child_process'
import { request } from 'undici'
import { ApiServerSimulator } from './simulator/index.ts'
import { eventually, freePort, goDark, startHarness } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { createLogger, textLine } from '../cmd/log.ts'
import { afterBanner } from '../cmd/demo.ts'

const entry = new URL('../cmd/outpost.ts', import.meta.url).pathname

/** The command against `server`, piped (not a terminal), until it says it serves; its stdout then. */
async function startLog(t: { teardown(fn: () => unknown): void }, server: string, extra: string[], env: Record<string, string> = {}): Promise<string> {
  const args = ['--import', 'tsx', entry, '--server', server, '--cache-dir', tempDir(t, 'outpost-log-')]
  args.push('--port', String(await freePort()), '--admin-port', String(await freePort()), '--secure-port', '0', '--node-name', 'kind-worker2', ...extra)
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let out = ''
  child.stdout.on('data', chunk => (out += chunk.toString()))
  await eventually(() => /outpost serving/.test(out), 30_000, `the hub to serve: ${out}`)
  return out
}

t.test('a misspelt OUTPOST_ variable is named at start, with the one it may have meant', async t => {
  const simulator = await ApiServerSimulator.start()
  t.teardown(() => simulator.close())
  const lines = (await startLog(t, simulator.url, [], { OUTPOST_PROT: '1' }))
    .trim()
    .split('\n')
    .map(l => JSON.parse(l))
  const warned = lines.find(l => /OUTPOST_PROT/.test(l.msg))
  t.ok(warned, 'a log line names the variable')
  t.equal(warned?.level, 40, 'at warn')
  t.match(warned?.msg, /unknown environment variable OUTPOST_PROT, ignored; did you mean OUTPOST_PORT\?/)
})

t.test('--log-format: JSON lines when piped (auto) or asked; text lines when asked', async t => {
  const simulator = await ApiServerSimulator.start()
  t.teardown(() => simulator.close())
  for (const extra of [[], ['--log-format', 'json']]) {
    const lines = (await startLog(t, simulator.url, extra)).trim().split('\n')
    t.ok(
      lines.every(l => typeof JSON.parse(l).level === 'number'),
      `${extra.join(' ') || 'no flag, not a terminal'}: every line is JSON`,
    )
  }
  const text = await startLog(t, simulator.url, ['--log-format', 'text'])
  t.notMatch(text, /^\{/m, 'text: no JSON line')
  t.match(text, /^\d\d:\d\d:\d\d\.\d{3} INFO  outpost serving .*\bnode=kind-worker2\b/m, 'time, level, message, then key=value')
  t.match(text, new RegExp(`servers=\\["${simulator.url}"\\]`), 'a list as JSON')
})

t.test('a text line: fields as key=value, strings quoted only when they must be, an error by its message, pino noise left out', async t => {
  const time = new Date(2026, 0, 2, 3, 4, 5, 6).getTime()
  const line = JSON.stringify({
    level: 50,
    time,
    pid: 1,
    hostname: 'h',
    name: 'outpost',
    server: 'admin',
    why: 'two words',
    n: 3,
    err: { type: 'Error', message: 'boom', stack: 'Error: boom\n at x' },
    msg: 'it failed',
  })
  t.equal(textLine(line), '03:04:05.006 ERROR it failed server=admin why="two words" n=3 err=boom\n')
  t.equal(textLine(line, true).replace(/\x1b\[[0-9;]*m/g, ''), textLine(line), 'at a terminal, only the level is coloured')

  let written = ''
  const logger = createLogger({ level: 'info', format: 'auto', tty: true, out: { write: (s: string) => (written += s) } })
  logger.warn({ filter: 'masterservice' }, 'off')
  logger.debug('not at info')
  t.match(written, /^\d\d:\d\d:\d\d\.\d{3} WARN  off filter=masterservice\n$/, 'auto at a terminal: text')
})

t.test("the demo at a terminal: after its banner, the start's warnings, the filters it cannot use as one info line", async t => {
  const at = Date.now()
  const held = [
    { level: 30, time: at, msg: 'Server listening at http://127.0.0.1:10261' },
    { level: 40, time: at, filters: ['masterservice', 'serviceenvupdater', 'forwardkubesvctraffic'], msg: 'filters … are off: …' },
    { level: 40, time: at, filters: ['inclusterconfig'], msg: 'filter inclusterconfig is off: …' },
    { level: 40, time: at, msg: 'disk cache: slow' },
  ]
  const shown = afterBanner(held, false)
  t.same(
    shown.map(e => [e.level, e.msg]),
    [
      [
        30,
        'filters masterservice, serviceenvupdater, forwardkubesvctraffic, inclusterconfig are off in the demo: no pods here reach the hub (why each is off: /debug/filters)',
      ],
      [40, 'disk cache: slow'],
    ],
  )
  t.same(afterBanner(held, true), held, 'at debug, everything as it was logged')
})

t.test("offline, a list the cache cannot answer says which client listed what, and what was asked, not the cache's names", async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64)' }
  const own = await request(`${h.url}/api/v1/pods?fieldSelector=${encodeURIComponent('spec.nodeName=kind-worker2')}`, { headers: kubelet })
  t.equal(own.statusCode, 200)
  await own.body.dump()
  await goDark(h)
  const all = await request(`${h.url}/api/v1/pods`, { headers: { 'user-agent': 'kubectl/v1.30.0' } })
  t.equal(all.statusCode, 503)
  const { message } = (await all.body.json()) as { message: string }
  t.match(
    message,
    /; the hub holds pods only as (kubelet listed them|clients listed them through the hub's shared watch cache) \(spec\.nodeName=kind-worker2\); this request asks for pods in all namespaces, which that does not cover$/,
    message,
  )
  t.notMatch(message, /shared-|fieldSelector=/, 'no cache names, no query syntax')

  const named = await request(`${h.url}/api/v1/namespaces/default/configmaps/nothing-listed`, { headers: kubelet })
  t.equal(named.statusCode, 503)
  t.match(
    ((await named.body.json()) as { message: string }).message,
    /nothing on this node ever listed configmaps through this hub, so nothing is cached to answer configmaps named default\/nothing-listed with$/,
  )
})
