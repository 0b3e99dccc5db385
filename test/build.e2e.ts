// The builds and the image. `npm run build` emits JavaScript that runs with plain node (no tsx), the
// bench's baseline. The Dockerfile bundles the hub (npm run bundle) and runs that one file, beside
// iproute2's ip (build/copy-ip.sh), with nothing else of the source. `npm run bundle` runs once here,
// as the Dockerfile's build stage runs it: the bundle is one ES module that plain node runs with
// nothing beside it (no node_modules, no TypeScript, no test/), and that file serves a node: a get,
// a list, a watch, and a restart offline from its disk cache. Then iproute2's `ip` as the image gets
// it: build/copy-ip.sh's tree runs with only the libraries it copied (plus glibc).
import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { builtinModules } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { request } from 'undici'
import { startDemoCluster } from './simulator/demo.ts'
import { adminHealthy, eventually, freePort } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'
import { readWatch } from './helpers/watch.ts'
import { dockerfileStages, execForm, jsFiles, ops, packageName, specifiers } from './helpers/build-image.ts'
import { productionRuntimeEnv } from './bench/runtime-env.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  type?: string
  scripts: Record<string, string>
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}
const buildConfig = JSON.parse(readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')) as {
  include: string[]
  compilerOptions: { outDir: string }
}
const outDir = buildConfig.compilerOptions.outDir.replace(/^\.\//, '').replace(/\/$/, '') // dist
const entry = 'cmd/outpost.js'

const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8')
const stages = dockerfileStages(dockerfile)
const runtime = stages[stages.length - 1]

/** The build stage: the one that runs `npm run bundle`; the stage that runs build/copy-ip.sh. */
const build = stages.find(s => ops(s, 'RUN').some(r => /\bnpm run bundle\b/.test(r)))
const iproute2 = stages.find(s => ops(s, 'RUN').some(r => /\bcopy-ip\.sh\b/.test(r)))
/** COPY's words without its --flags: sources…, destination */
const copyWords = (args: string) => args.split(/\s+/).filter(w => !w.startsWith('--'))

const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89' }
/** the modules build/bundle.mjs leaves out: optional native addons and the dev-only log printer */
const optionalExternals = new Set(['bufferutil', 'utf-8-validate'])

// ---- npm run bundle, once -------------------------------------------------------------------------

// As the Dockerfile's build stage runs it (no --outfile: dist/outpost.mjs, ignored by git), with a
// metafile saying what went in. Then the bundle alone is copied out of the repository, as the
// image's COPY puts it in /app: nothing up the tree has a node_modules (checked below), so a
// dependency the bundle failed to take in cannot be found at run time.
const dir = tempDir(t, 'outpost-bundle-')
const bundle = path.join(dir, 'outpost.mjs')
const metafile = path.join(dir, 'meta.json')
const started = Date.now()
const built = spawnSync('npm', ['run', 'bundle', '--', '--metafile', metafile], { cwd: root, encoding: 'utf8', timeout: 120_000 })
const buildMs = Date.now() - started
if (built.status === 0) copyFileSync(path.join(root, 'dist', 'outpost.mjs'), bundle)
const meta =
  built.status === 0
    ? (JSON.parse(readFileSync(metafile, 'utf8')) as {
        inputs: Record<string, unknown>
        outputs: Record<string, { imports: { path: string; external?: boolean }[] }>
      })
    : undefined

/** `@scope/name/…` → `@scope/name`, `name/…` → `name`, of a path under node_modules/ */
function packageOf(input: string): string {
  const parts = input.slice(input.lastIndexOf('node_modules/') + 'node_modules/'.length).split('/')
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]
}

t.test('npm run build emits JavaScript that runs with plain node', async t => {
  t.equal(pkg.type, 'module', 'package.json says ESM, so node loads the emitted .js as modules')
  t.match(pkg.scripts.build, /tsconfig\.build\.json/, 'npm run build uses tsconfig.build.json')

  // inside the repository (tap's fixture dir, .tap/ is ignored by git), so the emitted files find
  // node_modules and package.json's "type": "module" the way dist/ does
  const out = t.testdir({})
  const started = Date.now()
  const tsc = spawnSync('npm', ['run', 'build', '--', '--outDir', out], { cwd: root, encoding: 'utf8', timeout: 120_000 })
  t.equal(tsc.status, 0, `npm run build exits 0 (${Date.now() - started} ms)`, { stdout: tsc.stdout.slice(-2000), stderr: tsc.stderr.slice(-2000) })
  const main = path.join(out, entry)
  t.ok(existsSync(main), `the build produces ${outDir}/${entry}`)
  if (!existsSync(main)) return

  const help = spawnSync(process.execPath, [main, '--help'], { cwd: root, encoding: 'utf8', timeout: 30_000, env: { ...process.env, NODE_OPTIONS: '' } })
  t.equal(help.status, 0, 'node dist/cmd/outpost.js --help exits 0', { stderr: help.stderr })
  t.match(help.stdout, /^outpost /, 'prints the usage')
  t.match(help.stdout, /--kubeconfig PATH/, 'the usage lists --kubeconfig')

  const bad = spawnSync(process.execPath, [main, '--no-such-flag'], { cwd: root, encoding: 'utf8', timeout: 30_000, env: { ...process.env, NODE_OPTIONS: '' } })
  t.equal(bad.status, 2, 'an unknown flag exits 2')
  t.match(bad.stderr, /^outpost: unknown flag --no-such-flag/, 'with a one-line error')

  const demo = spawnSync(process.execPath, [main], { cwd: root, encoding: 'utf8', timeout: 30_000, env: { ...process.env, NODE_OPTIONS: '' } })
  t.equal(demo.status, 2, 'no apiserver and no simulator in the build: exit 2')
  t.match(demo.stderr, /^outpost: no apiserver given, and the demo .*needs a source checkout/, 'saying what to give instead')

  // What running dist/ outside a source checkout needs: the production dependencies alone
  // (npm ci --omit=dev), and no test/ (the simulator, only behind the demo's dynamic import).
  const allowedBare = new Set(Object.keys(pkg.dependencies))
  const optionalAtRuntime = new Set(['tsx/esm/api'])
  const builtins = new Set(builtinModules)
  for (const file of jsFiles(out)) {
    const rel = path.relative(out, file)
    if (rel.startsWith(`test${path.sep}`)) continue
    for (const { spec, dynamic } of specifiers(readFileSync(file, 'utf8'))) {
      if (spec.startsWith('node:') || builtins.has(spec)) continue
      if (spec.startsWith('.')) {
        t.notMatch(spec, /\.ts$/, `${rel}: ${spec} rewritten to .js`)
        const target = path.relative(out, path.resolve(path.dirname(file), spec))
        if (target.startsWith(`test${path.sep}`)) {
          t.ok(dynamic && rel === path.join('cmd', 'outpost.js'), `${rel}: ${spec} only as the demo's dynamic import (the image has no test/)`)
        } else {
          t.ok(existsSync(path.join(out, target)), `${rel}: ${spec} exists in the build`)
        }
        continue
      }
      // the terminal's log printer: imported dynamically, and JSON lines when it is not installed (cmd/log.ts)
      if (dynamic && optionalAtRuntime.has(spec)) {
        t.equal(rel, path.join('cmd', 'log.js'), `${rel}: ${spec} only where a missing one falls back to JSON lines`)
        continue
      }
      t.ok(allowedBare.has(packageName(spec)), `${rel}: ${packageName(spec)} is a runtime dependency (npm ci --omit=dev installs it)`)
    }
  }
})

t.test('the Dockerfile bundles the hub and runs the bundle, with ip and nothing else of the source', async t => {
  t.ok(build, 'a build stage runs npm run bundle')
  t.ok(iproute2, 'a stage runs build/copy-ip.sh')
  t.ok(stages.length >= 3, 'multi-stage: build, iproute2, runtime')
  if (!build || !iproute2) return
  t.match(build.from, /^node:22-/, 'built with Node.js 22')
  t.ok(
    ops(build, 'RUN').some(r => /\bnpm ci\b/.test(r) && !/--omit=dev/.test(r)),
    'the build stage installs with npm ci, dev dependencies included (esbuild)',
  )

  // What the bundle is made of, as npm run bundle (run once, above, as the Dockerfile runs it)
  // reports it: every source folder it reads is copied into the build stage.
  t.equal(built.status, 0, 'npm run bundle exits 0', { stderr: built.stderr.slice(-2000) })
  if (!meta) return
  const sourceDirs = [...new Set(Object.keys(meta.inputs).map(i => i.split('/')[0]))].filter(d => d !== 'node_modules')
  const [bundleFile] = Object.keys(meta.outputs).filter(o => !o.endsWith('.map'))
  t.equal(bundleFile, 'dist/outpost.mjs', 'npm run bundle writes dist/outpost.mjs')
  const copied = ops(build, 'COPY').flatMap(c => copyWords(c).slice(0, -1))
  const isCopied = (p: string) => copied.some(c => c === p || c === `${p}/` || c === `./${p}` || c === '.' || c === './')
  for (const dir of sourceDirs) t.ok(isCopied(dir), `the build stage copies ${dir}/, which the bundle reads`)
  for (const file of ['package.json', 'package-lock.json', 'tsconfig.json']) t.ok(isCopied(file), `the build stage copies ${file}`)
  t.ok(isCopied('build/bundle.mjs') || isCopied('build'), 'the build stage copies build/bundle.mjs, which npm run bundle runs')
  t.notOk(isCopied('test'), 'the build stage copies no test/ (the simulator)')

  // iproute2's ip, from the Debian release the runtime image is built on
  t.equal(iproute2.from, 'debian:bookworm-slim', 'ip comes from Debian 12 (bookworm), the runtime’s release')
  t.ok(
    ops(iproute2, 'RUN').some(r => /apt-get install\b.*--no-install-recommends.*\biproute2\b/.test(r)),
    'apt-get installs iproute2 alone',
  )
  const scriptCopy = ops(iproute2, 'COPY')
    .map(copyWords)
    .find(w => w[0] === 'build/copy-ip.sh')
  t.ok(scriptCopy, 'the stage gets build/copy-ip.sh, the script this file runs outside Docker (below)')
  const ipRun = ops(iproute2, 'RUN').find(r => /copy-ip\.sh/.test(r)) ?? ''
  const ipOut = /copy-ip\.sh\s+(\S+)/.exec(ipRun)?.[1]
  t.ok(scriptCopy && ipRun.includes(scriptCopy[1]), 'and runs that copy')
  t.ok(ipOut, `into ${ipOut}`)

  // runtime: the bundle and ip's tree; no node_modules, no package.json, nothing from the context
  t.match(runtime.from, /^gcr\.io\/distroless\/nodejs22-debian12(:|$)/, 'the runtime is distroless Node.js 22 on Debian 12')
  const runtimeCopies = ops(runtime, 'COPY')
  t.same(
    runtimeCopies.filter(c => !/--from=\S+/.test(c)),
    [],
    'every file of the image comes from a build stage (none from the source tree)',
  )
  t.same(
    runtimeCopies.filter(c => /node_modules|package\.json|\.ts\b|\btest\b/.test(c)),
    [],
    'no node_modules, package.json, TypeScript or test code',
  )
  const buildWorkdir = ops(build, 'WORKDIR').at(-1) ?? '/'
  const bundleCopy = runtimeCopies.map(c => ({ from: /--from=(\S+)/.exec(c)?.[1], words: copyWords(c) })).find(c => c.from === build.name)
  t.same(bundleCopy?.words.slice(0, -1), [path.posix.join(buildWorkdir, bundleFile)], `the image gets ${bundleFile} from the build stage, alone`)
  t.ok(
    runtimeCopies.some(c => c.includes(`--from=${iproute2.name}`) && new RegExp(`^${ipOut}/?$`).test(copyWords(c)[0]) && copyWords(c)[1] === '/'),
    `and ${ipOut} laid over its root (ip at /usr/sbin/ip)`,
  )

  const [entrypoint] = ops(runtime, 'ENTRYPOINT')
  t.ok(entrypoint, 'an ENTRYPOINT')
  const argv = execForm(entrypoint ?? '')
  t.ok(entrypoint?.startsWith('['), 'exec form, so node is PID 1 and gets SIGTERM itself')
  t.equal(argv[0], '/nodejs/bin/node', "runs distroless's node")
  const workdir = ops(runtime, 'WORKDIR').at(-1) ?? '/'
  const bundleDest = bundleCopy?.words.at(-1) ?? ''
  const bundlePath = bundleDest.endsWith('/') ? path.posix.join(workdir, bundleDest, path.posix.basename(bundleFile)) : path.posix.resolve(workdir, bundleDest)
  t.equal(path.posix.resolve(workdir, argv[1] ?? ''), bundlePath, `runs the bundle it copied (${bundlePath})`)

  const users = ops(runtime, 'USER')
  t.ok(users.length > 0, 'a USER')
  const user = users.at(-1) ?? ''
  t.notMatch(user, /^(0|root)(:|$)/, `not root by default (${user})`)
})

t.test('.dockerignore keeps local state out of the build context', async t => {
  const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8')
    .split(/\r?\n/)
    .map(l => l.trim().replace(/^\//, '').replace(/\/$/, ''))
    .filter(l => l !== '' && !l.startsWith('#'))
  for (const entry of ['node_modules', 'dist', '.git', '.tap']) t.ok(ignored.includes(entry), `${entry} is ignored`)
  for (const dir of [...buildConfig.include, 'build']) t.notOk(ignored.includes(dir), `${dir}/ is not ignored (the build copies it)`)
})

t.test('npm run bundle: one ES module of production code', async t => {
  t.equal(built.status, 0, `npm run bundle exits 0 (${buildMs} ms)`, { stderr: built.stderr.slice(-2000) })
  if (built.status !== 0) return
  for (let up = dir; ; up = path.dirname(up)) {
    t.notOk(existsSync(path.join(up, 'node_modules')), `no ${path.join(up, 'node_modules')} for the bundle to lean on`)
    if (path.dirname(up) === up) break
  }
  if (!meta) return
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
