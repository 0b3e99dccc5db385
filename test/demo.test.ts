// `npm start` as a newcomer runs it: the outpost command with no apiserver starts the demo, and the
// commands it prints work as printed.
import t from 'tap'
import { spawn, execFile } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { eventually, freePort } from './helpers/hub.ts'
import { kubectl } from './helpers/kubectl.ts'

const entry = new URL('../cmd/outpost.ts', import.meta.url).pathname

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    execFile(process.execPath, ['--import', 'tsx', entry, ...args], { env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? (error as any).code : 0, stdout, stderr })
    })
  })
}

t.test('bad flags and values: one line on stderr, exit 2', async t => {
  for (const args of [['--no-such-flag'], ['--port', 'abc'], ['--server', 'ftp://x']]) {
    const res = await run(args)
    t.equal(res.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(res.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line`)
    t.match(res.stderr, /^outpost: /)
  }
  const bad = await run([], { OUTPOST_PORT: 'zero' })
  t.equal(bad.code, 2, 'a bad environment value is a usage error too')
  const help = await run(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /--server/)
  t.match(help.stdout, /OUTPOST_SERVER/)
})

t.test('the demo serves, and its printed commands work as printed', async t => {
  const port = await freePort()
  const adminPort = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', entry, '--port', String(port), '--admin-port', String(adminPort), '--secure-port', String(await freePort()), '--log-level', 'warn'])
  let stdout = ''
  child.stdout.on('data', chunk => (stdout += chunk.toString()))
  child.stderr.on('data', chunk => (stdout += chunk.toString()))
  t.teardown(() => child.kill('SIGKILL'))
  await eventually(() => stdout.includes('kubectl'), 30_000, 'the demo banner')

  const commands = stdout.split('\n').map(l => l.trim()).filter(l => l.startsWith('curl ') || l.startsWith('kubectl '))
  t.equal(commands.length, 4, 'four commands printed')
  const httpsLine = commands.find(c => c.includes('https://'))!
  const viaHttps = await new Promise<string>((resolve, reject) =>
    execFile('sh', ['-c', httpsLine], (error, out) => (error ? reject(error) : resolve(out))),
  )
  t.equal(JSON.parse(viaHttps).kind, 'NamespaceList', 'the HTTPS port, verified with the generated CA, with a token')
  const curlLine = commands.find(c => c.startsWith('curl '))!
  const curl = await new Promise<string>((resolve, reject) =>
    execFile('sh', ['-c', curlLine], (error, out) => (error ? reject(error) : resolve(out))),
  )
  const slices = JSON.parse(curl)
  t.equal(slices.kind, 'EndpointSliceList')
  t.ok(slices.items.some((s: any) => s.metadata.name === 'svc-ud1-abcde'), 'the demo cluster is loaded')

  const getLine = commands.find(c => c.startsWith('kubectl ') && !c.endsWith('-w'))!
  const [, , server, ...args] = getLine.split(/\s+/)
  const get = await kubectl(server, args)
  t.equal(get.code, 0, get.stderr)
  t.match(get.stdout, /svc-ud1-abcde/)

  child.kill('SIGTERM')
  const [code] = await once(child, 'exit')
  t.equal(code, 0, 'SIGTERM stops the demo cleanly')
})

t.test('README "Debugging with curl" runs as written against the demo', async t => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  const section = readme.slice(readme.indexOf('## Debugging with curl'), readme.indexOf('\n## ', readme.indexOf('## Debugging with curl') + 1))
  const commands = section.split('\n').filter(line => line.startsWith('curl '))
  t.ok(commands.length >= 10, `${commands.length} commands in the section`)

  const port = await freePort()
  const adminPort = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', entry, '--port', String(port), '--admin-port', String(adminPort), '--secure-port', String(await freePort()), '--log-level', 'warn'])
  let banner = ''
  child.stdout.on('data', chunk => (banner += chunk.toString()))
  t.teardown(() => child.kill('SIGKILL'))
  await eventually(() => banner.includes('kubectl'), 30_000, 'the demo banner')

  // Only the ports differ from the README: the tests run side by side and take free ones.
  const outputs: string[] = []
  for (const command of commands) {
    const line = command.replaceAll(':10261/', `:${port}/`).replaceAll(':10267/', `:${adminPort}/`)
    const { code, stdout } = await new Promise<{ code: number; stdout: string }>(resolve =>
      execFile('sh', ['-c', line], (error, stdout) => resolve({ code: error ? Number((error as any).code) : 0, stdout })),
    )
    // curl --max-time ends a watch with 28: that is the example's point
    t.ok(code === 0 || (code === 28 && line.includes('--max-time')), `${command}: exit ${code}`)
    t.ok(stdout.length > 0, `${command}: says something`)
    outputs.push(stdout)
  }
  const output = (fragment: string) => outputs[commands.findIndex(c => c.includes(fragment))]
  t.equal(output('/v1/readyz'), 'ok')
  t.match(output('-A kube-proxy'), /"kind":"EndpointSliceList"/)
  t.match(output('watch=true'), /"type":"ADDED"/, 'the watch streamed events')
  const raw = JSON.parse(outputs[commands.findIndex(c => c.endsWith('svc-ud1-abcde'))])
  const filtered = JSON.parse(output('?filtered=true'))
  t.ok(filtered.endpoints.length < raw.endpoints.length, `kube-proxy receives fewer endpoints (${filtered.endpoints.length}) than are cached (${raw.endpoints.length})`)
  t.match(JSON.parse(output('/debug/topology')), { node: 'kind-worker2', pool: 'shanghai' })
  t.match(output('/metrics'), /^outpost_requests_total\{component="kube-proxy"/m)
})
