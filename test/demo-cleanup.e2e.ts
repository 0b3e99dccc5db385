// `npm start` leaves nothing behind: the demo's temporary PKI (its CA key with it) and its cache
// dirs are gone once it is stopped with Ctrl-C or SIGTERM, as a newcomer stops it.
import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync } from 'node:fs'
import { eventually, freePort } from './helpers/hub.ts'
import { outpostEntry } from './helpers/demo.ts'
import { tempDir } from './helpers/temp-dirs.ts'

/** The demo as `npm start` runs it (no --cache-dir, no --cert-dir), on free ports, with its own TMPDIR. */
async function demoIn(tmp: string) {
  const [port, adminPort, securePort, controlPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const args = ['--port', port, '--admin-port', adminPort, '--secure-port', securePort].map(String)
  const child = spawn(process.execPath, ['--import', 'tsx', outpostEntry, ...args], {
    env: { ...process.env, TMPDIR: tmp, OUTPOST_DEMO_PORT: String(controlPort) },
  })
  const exited = once(child, 'exit')
  let output = ''
  child.stdout!.on('data', chunk => (output += chunk.toString()))
  child.stderr!.on('data', chunk => (output += chunk.toString()))
  return { child, exited, output: () => output }
}

/** what the demo made in TMPDIR (tsx keeps a compile cache there too: not the demo's) */
const demoLeftovers = (tmp: string) => readdirSync(tmp).filter(name => name.startsWith('outpost-'))

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  t.test(`${signal}: the demo removes its PKI and cache dirs`, async t => {
    const tmp = tempDir(t, 'outpost-demo-tmpdir-')
    const demo = await demoIn(tmp)
    t.teardown(() => {
      if (demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill('SIGKILL')
    })
    await eventually(() => /Stop: .*\n─+\n/.test(demo.output()) || demo.child.exitCode !== null, 60_000, 'the demo banner')
    const made = demoLeftovers(tmp).sort()
    t.match(made, [/^outpost-demo-cache-/, /^outpost-demo-pki-/], 'the demo made its cache and PKI dirs in TMPDIR', { output: demo.output() })
    demo.child.kill(signal)
    const [code] = await demo.exited
    t.equal(code, 0, 'it stops cleanly')
    t.same(demoLeftovers(tmp), [], 'nothing of it is left in TMPDIR')
  })
}

t.test('Ctrl-C while the demo is still starting: nothing left either', async t => {
  const tmp = tempDir(t, 'outpost-demo-tmpdir-')
  const demo = await demoIn(tmp)
  t.teardown(() => {
    if (demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill('SIGKILL')
  })
  // the moment its dirs exist, before the hub has its own signal handlers
  await eventually(() => demoLeftovers(tmp).length > 0 || demo.child.exitCode !== null, 60_000, 'the demo dirs')
  demo.child.kill('SIGINT')
  await demo.exited
  t.same(demoLeftovers(tmp), [], 'nothing of it is left in TMPDIR')
})
