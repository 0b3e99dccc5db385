// The builds and the image: `npm run build` emits JavaScript that runs with plain node (no tsx), the
// bench's baseline; the Dockerfile bundles the hub (npm run bundle, test/bundle.e2e.ts runs it) and
// runs that one file, beside iproute2's ip (build/copy-ip.sh), with nothing else of the source.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { builtinModules } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const root = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  type?: string
  scripts: Record<string, string>
  dependencies: Record<string, string>
}
const buildConfig = JSON.parse(readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')) as {
  include: string[]
  compilerOptions: { outDir: string }
}
const outDir = buildConfig.compilerOptions.outDir.replace(/^\.\//, '').replace(/\/$/, '') // dist
const entry = 'cmd/outpost.js'

// ---- the Dockerfile, as instructions grouped by stage ---------------------------------------------

interface Instruction {
  op: string
  args: string
}
interface Stage {
  from: string
  name?: string
  instructions: Instruction[]
}

function dockerfileStages(text: string): Stage[] {
  const logical = text
    .replace(/\\\r?\n/g, ' ') // line continuations
    .split(/\r?\n/)
    .map(l => l.trim())
    .filter(l => l !== '' && !l.startsWith('#'))
  const stages: Stage[] = []
  for (const line of logical) {
    const [, op, args] = /^(\S+)\s*(.*)$/.exec(line) as RegExpExecArray
    const upper = op.toUpperCase()
    if (upper === 'FROM') {
      const words = args.split(/\s+/).filter(w => !w.startsWith('--'))
      const as = words.findIndex(w => w.toUpperCase() === 'AS')
      stages.push({ from: words[0], name: as === -1 ? undefined : words[as + 1], instructions: [] })
    } else {
      if (stages.length === 0) throw new Error(`Dockerfile: ${upper} before FROM`)
      stages[stages.length - 1].instructions.push({ op: upper, args })
    }
  }
  return stages
}

const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8')
const stages = dockerfileStages(dockerfile)
const runtime = stages[stages.length - 1]
const ops = (stage: Stage, op: string) => stage.instructions.filter(i => i.op === op).map(i => i.args)

/** The exec form's array (`["a", "b"]`), or the shell form split on blanks. */
function execForm(args: string): string[] {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/)
}

/** The build stage: the one that runs `npm run bundle`; the stage that runs build/copy-ip.sh. */
const build = stages.find(s => ops(s, 'RUN').some(r => /\bnpm run bundle\b/.test(r)))
const iproute2 = stages.find(s => ops(s, 'RUN').some(r => /\bcopy-ip\.sh\b/.test(r)))
/** COPY's words without its --flags: sources…, destination */
const copyWords = (args: string) => args.split(/\s+/).filter(w => !w.startsWith('--'))

// ---- the emitted tree -------------------------------------------------------------------------------

function jsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const full = path.join(dir, name)
    return statSync(full).isDirectory() ? jsFiles(full) : full.endsWith('.js') ? [full] : []
  })
}

/** Module specifiers of static imports/exports and of dynamic imports with a literal, with which kind. */
function specifiers(source: string): { spec: string; dynamic: boolean }[] {
  const found: { spec: string; dynamic: boolean }[] = []
  for (const m of source.matchAll(/(?:^|[\s;])(?:import|export)\s[^'"]*?\sfrom\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]/gm)) {
    found.push({ spec: m[1] ?? m[2], dynamic: false })
  }
  for (const m of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ spec: m[1], dynamic: true })
  return found
}

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageName(spec: string): string {
  const parts = spec.split('/')
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
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

  // What the bundle is made of, as npm run bundle reports it: every source folder it reads is
  // copied into the build stage. Written where the Dockerfile's build writes it (dist/, ignored by git).
  const metaDir = t.testdir({})
  const bundled = spawnSync('npm', ['run', 'bundle', '--', '--metafile', path.join(metaDir, 'meta.json')], { cwd: root, encoding: 'utf8', timeout: 120_000 })
  t.equal(bundled.status, 0, 'npm run bundle exits 0', { stderr: bundled.stderr.slice(-2000) })
  if (bundled.status !== 0) return
  const meta = JSON.parse(readFileSync(path.join(metaDir, 'meta.json'), 'utf8')) as { inputs: Record<string, unknown>; outputs: Record<string, unknown> }
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
  t.ok(scriptCopy, 'the stage gets build/copy-ip.sh, the script test/bundle.e2e.ts runs outside Docker')
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
