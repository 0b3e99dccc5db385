// `npm start` as a newcomer runs it: the outpost command with no apiserver starts the demo, whose
// banner walks them through taking the cloud away and bringing it back. Every command it prints is
// run here as printed (through sh), in its order, and gives what the banner says it shows.
import t from 'tap'
import { execFile, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { eventually, freePort } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { commandsIn, outpostEntry, sh, shStream, startDemo } from './helpers/demo.ts'

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    execFile(process.execPath, ['--import', 'tsx', outpostEntry, ...args], { env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? (error as any).code : 0, stdout, stderr })
    })
  })
}

t.test('bad flags and values: one line on stderr, exit 2', async t => {
  // side by side: each is a process that loads the whole command
  const badFlags = [['--no-such-flag'], ['--port', 'abc'], ['--server', 'ftp://x']]
  const [bad, help, ...ran] = await Promise.all([run([], { OUTPOST_PORT: 'zero' }), run(['--help']), ...badFlags.map(args => run(args))])
  for (const [i, args] of badFlags.entries()) {
    const res = ran[i]
    t.equal(res.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(res.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line`)
    t.match(res.stderr, /^outpost: /)
  }
  t.equal(bad.code, 2, 'a bad environment value is a usage error too')
  t.equal(help.code, 0)
  t.match(help.stdout, /--server/)
  t.match(help.stdout, /OUTPOST_SERVER/)
})

/** The banner's steps, in the order it prints them: each matches exactly one command. */
const steps = {
  watch: (c: string) => c.startsWith('kubectl ') && / -w /.test(c),
  cloudOff: (c: string) => c.startsWith('curl -X POST ') && c.endsWith('/cloud/off'),
  offlineMetric: (c: string) => c.endsWith('/metrics | grep ^outpost_cloud_online'),
  get: (c: string) => c.startsWith('kubectl ') && c.endsWith(' get endpointslices -A'),
  kubeProxy: (c: string) => c.includes(' -A kube-proxy ') && c.includes('/endpointslices/svc-ud1-abcde | grep '),
  unfiltered: (c: string) => !c.includes(' -A ') && c.includes('/endpointslices/svc-ud1-abcde | grep '),
  write: (c: string) => c.startsWith('kubectl ') && c.includes(' label '),
  cloudOn: (c: string) => c.startsWith('curl -X POST ') && c.endsWith('/cloud/on'),
  https: (c: string) => c.includes('https://') && c.includes('Authorization: Bearer'),
}

t.test('the banner, followed: the cloud taken away and brought back, kubectl and kube-proxy answered offline, the watch carries on', async t => {
  const demo = await startDemo(t)
  const printed = demo.output()
  const banner = printed.slice(printed.lastIndexOf('outpost demo:'))
  const logs = printed
    .slice(0, printed.lastIndexOf('outpost demo:'))
    .split('\n')
    .filter(l => l.startsWith('{'))
  t.ok(logs.length > 0 && logs.every(l => typeof JSON.parse(l).level === 'number'), 'not a terminal: the logs are JSON lines')
  t.match(logs.at(-1), /"msg":"outpost serving"/, 'and the banner comes after the last of the start')
  const commands = commandsIn(banner)
  const names = Object.keys(steps) as (keyof typeof steps)[]
  t.same(
    commands.map(c => names.filter(n => steps[n](c))),
    names.map(n => [n]),
    'the banner prints one command per step, in order',
  )
  const command = Object.fromEntries(names.map((n, i) => [n, commands[i]])) as Record<keyof typeof steps, string>
  t.match(command.cloudOff, `http://127.0.0.1:${demo.controlPort}/`, "the demo's control port")

  const https = await sh(command.https)
  t.equal(JSON.parse(https.stdout).kind, 'NamespaceList', 'the HTTPS port, verified with the generated CA, with a token')

  // 1. the watch, left running
  const watch = shStream(t, command.watch)
  await eventually(() => /svc-ud1-abcde\s+10\.244\./.test(watch.output()), 30_000, `the watch lists the slices: ${watch.output()}`)

  // 2. the cloud away: the curl answers once the hub has noticed, and says so; so does the demo's terminal
  const off = await sh(command.cloudOff)
  t.match(off.stdout, /^cloud off; the hub noticed in [\d.]+ s and answers from its cache/, off.stdout)
  t.match(demo.output(), />>> the hub sees the cloud offline/, 'the terminal says the hub saw it')
  const metric = await sh(command.offlineMetric)
  t.equal(metric.stdout, 'outpost_cloud_online 0\n', 'the metric says offline')
  t.match(banner, /^\s+outpost_cloud_online 0$/m, 'the banner shows that line')

  // 3. reads, offline: kubectl from the cache (which cannot know what the cloud did meanwhile), kube-proxy's view filtered
  const get = await sh(command.get)
  t.equal(get.code, 0, get.stderr)
  t.match(get.stdout, /^NAMESPACE\s+NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE$/m, "kubectl's table")
  t.match(get.stdout, /^default\s+svc-ud1-abcde\s+IPv4\s+9376\s+10\.244\./m, 'the slices the node read')
  t.notMatch(get.stdout, /svc-ud1-outage-1/, "and not the slice the cloud added while away: the answer is the cache's")
  const kubeProxy = await sh(command.kubeProxy)
  t.same(kubeProxy.stdout.trim().split('\n'), ['10.244.1.3', '10.244.3.2'], "kube-proxy: this pool's 2 endpoints")
  const unfiltered = await sh(command.unfiltered)
  t.same(unfiltered.stdout.trim().split('\n').sort(), ['10.244.1.3', '10.244.2.2', '10.244.2.3', '10.244.3.2'], 'curl: all 4')
  t.match(banner, /2 of svc-ud1-abcde's 4 endpoints/, 'as the banner says')

  // 4. a write, refused with the apiserver's kind of Status, as the banner shows it
  const write = await sh(command.write)
  t.not(write.code, 0, 'kubectl fails')
  t.match(write.stderr, /^Error from server \(ServiceUnavailable\): no apiserver reachable: .*nothing was written$/m, write.stderr)
  t.match(banner, /^\s+Error from server \(ServiceUnavailable\): no apiserver reachable: \.\.\. nothing was written$/m, 'the banner shows that error')

  t.equal(watch.child.exitCode, null, 'the watch is still running')
  t.notMatch(watch.output(), /svc-ud1-outage-1/, 'with nothing new while the cloud is away')

  // 5. the cloud back: the watch receives what the cloud did while it was away
  const on = await sh(command.cloudOn)
  t.match(on.stdout, /^cloud on; the hub is online again after [\d.]+ s/, on.stdout)
  await eventually(() => /svc-ud1-outage-1\s+10\.244\.3\.101/.test(watch.output()), 30_000, `the watch to print svc-ud1-outage-1: ${watch.output()}`)
  t.pass('the watch printed svc-ud1-outage-1, added while the cloud was away')
  t.equal(watch.child.exitCode, null, 'and runs on')
  t.match(banner, /The watch of step 1 prints svc-ud1-outage-1/, 'as the banner says')

  const labels = await sh(command.get.replace(/ get endpointslices -A$/, " get endpointslice -n default svc-ud1-abcde -o jsonpath='{.metadata.labels}'"))
  t.equal(labels.code, 0, labels.stderr)
  t.notMatch(labels.stdout, /demo/, 'nothing was written: the slice has no demo label')

  // piped (npm start | cat): stdout is the log collector's, the banner and the >>> lines are for people
  const notJson = demo
    .stdout()
    .split('\n')
    .filter(l => l !== '' && !isJsonLine(l))
  t.same(notJson, [], 'piped, every line on stdout is a JSON log line, through the cloud going and coming back')
  const cutWarnings = demo
    .stdout()
    .split('\n')
    .filter(isJsonLine)
    .map(l => JSON.parse(l))
    .filter(l => l.level >= 40 && /Invalid EOF|HTTP\/1\.1 protocol|list\/watch failed/.test(`${l.msg} ${l.err ?? ''}`))
  t.same(cutWarnings, [], "the cloud going away warns no cache's cut watch: the hub's cloud line says it once")
  t.match(demo.output(), /^>>> the hub sees the cloud offline/m, 'the >>> lines went to stderr')

  demo.child.kill('SIGTERM')
  const [code] = await once(demo.child, 'exit')
  t.equal(code, 0, 'SIGTERM stops the demo cleanly')
})

function isJsonLine(line: string): boolean {
  try {
    return typeof JSON.parse(line).level === 'number'
  } catch {
    return false
  }
}

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

t.test('at a terminal: readable logs, the banner after them, c switches the cloud, q stops', { skip: !hasScript && 'no script(1) for a terminal' }, async t => {
  const [port, adminPort, securePort, controlPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const dirs = ['--cache-dir', tempDir(t, 'outpost-demo-cache-'), '--cert-dir', tempDir(t, 'outpost-demo-pki-')]
  const command = [process.execPath, '--import', 'tsx', outpostEntry, '--port', port, '--admin-port', adminPort, '--secure-port', securePort, ...dirs].join(' ')
  // script(1) gives the demo a terminal for stdin and stdout, as npm start in a shell has
  const child = spawn('script', ['-qfec', command, '/dev/null'], { env: { ...process.env, OUTPOST_DEMO_PORT: String(controlPort) } })
  const exited = once(child, 'exit')
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let output = ''
  child.stdout.on('data', chunk => (output += chunk.toString()))
  const plain = () => output.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
  await eventually(() => /Stop: q or Ctrl-C\.\r?\n─+/.test(plain()), 45_000, `the banner: ${plain()}`)
  const start = plain().slice(0, plain().indexOf('outpost demo:'))
  t.match(start, /^[─\s]*$/, 'nothing but the banner comes first')
  await eventually(() => /^\d\d:\d\d:\d\d\.\d{3} INFO +filters .* are off in the demo/m.test(plain()), 10_000, 'one line for the filters off')
  t.notMatch(plain(), /^\{"level"/m, 'no JSON lines')

  child.stdin.write('c')
  await eventually(() => plain().includes('>>> the hub sees the cloud offline'), 30_000, 'the hub to see the cloud away')
  const state = await fetch(`http://127.0.0.1:${controlPort}/cloud`)
  t.equal(await state.text(), 'off\n', 'c took the cloud away')
  child.stdin.write('c')
  await eventually(() => plain().includes('>>> the hub sees the cloud online again'), 30_000, 'the hub to see the cloud back')

  child.stdin.write('q')
  const [code] = await exited
  t.equal(code, 0, 'q stops the demo cleanly')
})
