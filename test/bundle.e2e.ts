// The hub as the image runs it: `npm run bundle` makes one ES module that plain node runs with
// nothing beside it (no node_modules, no TypeScript, no test/), and that file serves a node: a get,
// a list, a watch, and a restart offline from its disk cache. Then iproute2's `ip` as the image
// gets it: build/copy-ip.sh's tree runs with only the libraries it copied (plus glibc).
import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { builtinModules } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { request } from 'undici'
import { startDemoCluster } from './simulator/demo.ts'
import { adminHealthy, eventually, freePort } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { readWatch } from './helpers/watch.ts'
import { productionRuntimeEnv } from './bench/runtime-env.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}
const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89' }
/** the modules build/bundle.mjs leaves out: optional native addons and the dev-only log printer */
const optionalExternals = new Set(['bufferutil', 'utf-8-validate'])

// Built outside the repository, as in the image's /app: nothing up the tree has a node_modules
// (checked below), so a dependency the bundle failed to take in cannot be found at run time.
const dir = tempDir(t, 'outpost-bundle-')
const bundle = path.join(dir, 'outpost.mjs')
const metafile = path.join(dir, 'meta.json')
const started = Date.now()
const built = spawnSync('npm', ['run', 'bundle', '--', '--outfile', bundle, '--metafile', metafile], { cwd: root, encoding: 'utf8', timeout: 120_000 })
const buildMs = Date.now() - started

/** `@scope/name/…` → `@scope/name`, `name/…` → `name`, of a path under node_modules/ */
function packageOf(input: string): string {
  const parts = input.slice(input.lastIndexOf('node_modules/') + 'node_modules/'.length).split('/')
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]
}

t.test('npm run bundle: one ES module of production code', async t => {
  t.equal(built.status, 0, `npm run bundle exits 0 (${buildMs} ms)`, { stderr: built.stderr.slice(-2000) })
  if (built.status !== 0) return
  for (let up = dir; ; up = path.dirname(up)) {
    t.notOk(existsSync(path.join(up, 'node_modules')), `no ${path.join(up, 'node_modules')} for the bundle to lean on`)
    if (path.dirname(up) === up) break
  }
  const meta = JSON.parse(readFileSync(metafile, 'utf8')) as {
    inputs: Record<string, unknown>
    outputs: Record<string, { imports: { path: string; external?: boolean }[] }>
  }
  const inputs = Object.keys(meta.inputs)
  t.same(
    inputs.filter(i => i.startsWith('test/')),
    [],
    'no test code (the demo simulator) in the bundle',
  )
  t.ok(inputs.some(i => i.startsWith('cmd/')) && inputs.some(i => i.startsWith('lib/')), 'the hub is in it')
  const devOnly = [...new Set(inputs.filter(i => i.includes('node_modules/')).map(packageOf))].filter(p => p in pkg.devDependencies)
  t.same(devOnly, [], 'no dev dependency (TypeScript, esbuild, the test tools) in it')
  t.same(
    [...new Set(inputs.filter(i => i.includes('node_modules/')).map(packageOf))].filter(p => p === 'tsx' || p === 'typescript' || p === 'esbuild'),
    [],
    'no TypeScript loader or compiler in it',
  )
  const builtins = new Set(builtinModules)
  const externals = Object.values(meta.outputs).flatMap(o => o.imports.filter(i => i.external).map(i => i.path))
  t.same(
    [...new Set(externals)].filter(e => !e.startsWith('node:') && !builtins.has(e) && !optionalExternals.has(packageOf(`node_modules/${e}`))),
    [],
    'it imports nothing but Node built-ins (and optional modules it can do without)',
  )
  t.ok(readFileSync(bundle, 'utf8').includes('../test/simulator/demo.ts'), "the demo's import is left as a path, for a source checkout")
})

/** The bundle started as the image starts it: plain node, the static pod's runtime environment, from its own directory. */
async function startBundle(server: string, cacheDir: string): Promise<{ url: string; child: ChildProcess; stdout(): string; stop(): Promise<number | null> }> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const runtime = productionRuntimeEnv()
  const child = spawn(
    process.execPath,
    [
      bundle,
      ...['--server', server, '--cache-dir', cacheDir, '--node-name', 'kind-worker2', '--secure-port', '0', '--log-level', 'info'],
      ...['--port', String(port), '--admin-port', String(adminPort)],
      // a refused cloud is offline within a second; a slow probe on a loaded box is given seconds
      ...['--health-interval', '200ms', '--health-timeout', '5s', '--health-failures', '3', '--health-successes', '1'],
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...runtime, NODE_OPTIONS: runtime.NODE_OPTIONS ?? '', NODE_ENV: 'production' } },
  )
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return exited
    child.kill('SIGTERM')
    // its shutdown has a 10 s deadline of its own; past that it hangs, and the test must not
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    const code = await exited
    clearTimeout(timer)
    return code
  }
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`the bundle exited (${child.exitCode}):\n${out}`)
      return adminHealthy(adminPort)
    },
    60_000,
    'the bundle to listen',
  ).catch(async error => {
    child.kill('SIGKILL')
    await exited
    throw error
  })
  return { url: `http://127.0.0.1:${port}`, child, stdout: () => out, stop }
}

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await request(url, { headers: kubelet })
  return { status: res.statusCode, body: JSON.parse(await res.body.text()) }
}

t.test('the bundle run by plain node: usage, and no demo without the source checkout', async t => {
  if (built.status !== 0) return t.fail('no bundle')
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [bundle, ...args], { cwd: dir, encoding: 'utf8', timeout: 30_000, env: { ...process.env, NODE_OPTIONS: '' } })
  const help = run('--help')
  t.equal(help.status, 0, '--help exits 0', { stderr: help.stderr })
  t.match(help.stdout, /--kubeconfig PATH/, 'and prints the usage')
  const demo = run()
  t.equal(demo.status, 2, 'no apiserver given, and no simulator beside the bundle: exit 2')
  t.match(demo.stderr, /^outpost: no apiserver given, and the demo .*needs a source checkout/, 'saying what to give instead')
})

t.test('the bundle serves a node: get, list, watch, and a restart offline from its cache', async t => {
  if (built.status !== 0) return t.fail('no bundle')
  const simulator = await startDemoCluster()
  t.teardown(() => simulator.close())
  const cacheDir = tempDir(t, 'outpost-bundle-cache-')
  const first = await startBundle(simulator.url, cacheDir)
  t.teardown(() => first.stop())

  const node = await getJson(`${first.url}/api/v1/nodes/kind-worker2`)
  t.equal(node.status, 200, 'get: its Node')
  t.equal(node.body.metadata?.name, 'kind-worker2')
  const list = await getJson(`${first.url}/api/v1/namespaces/default/configmaps`)
  t.equal(list.status, 200, 'list: the configmaps')
  t.ok(
    list.body.items.some((c: any) => c.metadata.name === 'app-config'),
    'with the cluster’s',
  )

  const watch = await request(`${first.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${list.body.metadata.resourceVersion}`, {
    headers: kubelet,
  })
  t.equal(watch.statusCode, 200, 'watch: open')
  const reader = readWatch(watch.body)
  simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'made-while-watched', namespace: 'default' }, data: { a: '1' } })
  const added = await eventually(
    () => reader.events.find(e => e.type === 'ADDED' && e.object?.metadata?.name === 'made-while-watched'),
    30_000,
    'the ADDED event through the bundle',
  )
  t.equal(added.object.data.a, '1', 'a change in the cloud arrives on the watch')
  watch.body.destroy()

  // pino works bundled: its JSON lines reach stdout (no worker-thread transport involved)
  const logLines = first
    .stdout()
    .split('\n')
    .filter(l => l.startsWith('{'))
    .map(l => JSON.parse(l))
  t.ok(
    logLines.some(l => l.name === 'outpost' && typeof l.msg === 'string'),
    'it logs JSON lines through pino',
  )

  t.equal(await first.stop(), 0, 'SIGTERM: exits 0')
  await simulator.setFault('refuse')
  const second = await startBundle(simulator.url, cacheDir)
  t.teardown(() => second.stop())
  const offline = await getJson(`${second.url}/api/v1/namespaces/default/configmaps`)
  t.equal(offline.status, 200, 'restarted with the cloud refusing: the list answers')
  const names = offline.body.items.map((c: any) => c.metadata.name)
  t.ok(names.includes('app-config') && names.includes('made-while-watched'), 'from the cache, with what the watch brought')
  const offlineNode = await getJson(`${second.url}/api/v1/nodes/kind-worker2`)
  t.equal(offlineNode.status, 200, 'and the get')
})

/** every file under `dir`, relative to it */
function files(under: string, base = under): string[] {
  return readdirSync(under).flatMap(name => {
    const full = path.join(under, name)
    return statSync(full).isDirectory() ? files(full, base) : [path.relative(base, full)]
  })
}

// copy-ip.sh needs ldd (glibc's libc-bin) and iproute2; a machine without them cannot run it
const ipSkip = spawnSync('ldd', ['--version']).error
  ? 'no ldd on this machine (glibc’s libc-bin): copy-ip.sh cannot list what ip links'
  : spawnSync('sh', ['-c', 'command -v ip']).status !== 0
    ? 'iproute2 is not installed on this machine'
    : false

t.test("build/copy-ip.sh: the image's ip runs with the libraries it copied", { skip: ipSkip }, async t => {
  const tree = tempDir(t, 'outpost-ip-tree-')
  const copy = spawnSync('sh', [path.join(root, 'build', 'copy-ip.sh'), tree], { encoding: 'utf8', timeout: 60_000 })
  t.equal(copy.status, 0, 'copy-ip.sh exits 0', { stderr: copy.stderr })
  const copied = files(tree)
  t.ok(copied.includes('usr/sbin/ip'), 'ip lands at /usr/sbin/ip (on PATH in the image)')
  const libDirs = [...new Set(copied.filter(f => /\.so(\.|$)/.test(f)).map(f => path.join(tree, path.dirname(f))))]
  t.ok(libDirs.length > 0, `its libraries: ${copied.filter(f => f !== 'usr/sbin/ip').join(', ')}`)
  t.same(
    copied.filter(f => f !== 'usr/sbin/ip' && !/\.so(\.|$)/.test(f)),
    [],
    'nothing else',
  )

  // The loader ldd names for ip (the image has the same one, with glibc), told to look only in the
  // copied directories before glibc's own: what it resolves is what the image would load.
  const ip = path.join(tree, 'usr', 'sbin', 'ip')
  const loader = /^\s*(\/\S*ld-linux\S*)\s/m.exec(spawnSync('ldd', [ip], { encoding: 'utf8' }).stdout)?.[1]
  if (!loader) return t.fail('ldd names no ld-linux loader for ip')
  const viaLoader = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(loader, ['--inhibit-cache', '--library-path', libDirs.join(':'), ip, ...args], {
      encoding: 'utf8',
      timeout: 30_000,
      env: { PATH: '/nonexistent', ...env },
    })
  const trace = viaLoader([], { LD_TRACE_LOADED_OBJECTS: '1' })
  t.equal(trace.status, 0, 'the loader resolves every library', { out: trace.stdout, err: trace.stderr })
  const resolved = [...trace.stdout.matchAll(/=>\s*(\S+)/g)].map(m => m[1])
  t.notOk(resolved.includes('not'), 'none missing')
  const fromHost = resolved.filter(lib => !lib.startsWith(tree) && !/\/(libc|libm|libdl|libpthread|librt|libresolv)\.so/.test(lib))
  t.same(fromHost, [], 'every library but glibc comes from the copied tree')
  const version = viaLoader(['-V'])
  t.equal(version.status, 0, 'ip -V runs', { stderr: version.stderr })
  t.match(version.stdout, /iproute2/, `and says ${version.stdout.trim()}`)
})
