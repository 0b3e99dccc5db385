// The production build and the image built from it: `npm run build` emits JavaScript that runs
// with plain node (no tsx), and the Dockerfile runs the file the build produces, with what that
// file needs at run time.
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

/** The build stage: the one that runs `npm run build`. */
const build = stages.find(s => ops(s, 'RUN').some(r => /\bnpm run build\b/.test(r)))

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
  t.match(demo.stderr, /^outpost: no apiserver given and the demo needs a source checkout/, 'saying what to give instead')

  // What the image needs of the emitted code: the image has the production dependencies only, and
  // no test/ (the Dockerfile removes the simulator tsc pulls in through the demo's import).
  const allowedBare = new Set(Object.keys(pkg.dependencies))
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
      t.ok(allowedBare.has(packageName(spec)), `${rel}: ${packageName(spec)} is a runtime dependency (the image installs --omit=dev)`)
    }
  }
})

t.test('the Dockerfile runs what the build produces', async t => {
  t.ok(build, 'a build stage runs npm run build')
  t.ok(stages.length >= 2, 'multi-stage')
  if (!build) return
  t.match(build.from, /^node:22-/, 'built with Node.js 22')
  t.ok(
    ops(build, 'RUN').some(r => /\bnpm ci\b/.test(r) && !/--omit=dev/.test(r)),
    'the build stage installs with npm ci, dev dependencies included (tsc)',
  )
  // every folder tsconfig.build.json compiles is copied into the build stage
  const copied = ops(build, 'COPY').flatMap(c =>
    c
      .split(/\s+/)
      .filter(w => !w.startsWith('--'))
      .slice(0, -1),
  )
  for (const dir of buildConfig.include) {
    t.ok(
      copied.some(c => c === dir || c === `${dir}/` || c === `./${dir}` || c === '.'),
      `the build stage copies ${dir}/`,
    )
  }
  for (const file of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
    t.ok(copied.includes(file) || copied.includes('.') || copied.includes('./'), `the build stage copies ${file}`)
  }
  t.ok(
    ops(build, 'RUN').some(r => new RegExp(`rm -rf ${outDir}/test\\b`).test(r)),
    'the build leaves the simulator (dist/test) out of the image',
  )

  // runtime stage: production dependencies, dist/, package.json (ESM), the entry point
  const runtimeCopies = ops(runtime, 'COPY')
  t.ok(
    runtimeCopies.some(c => /--from=\S+/.test(c) && new RegExp(`/${outDir}\\s+\\S*${outDir}/?$`).test(c)),
    `the image gets ${outDir}/ from the build stage`,
  )
  t.ok(
    runtimeCopies.some(c => /node_modules/.test(c)),
    'the image gets node_modules',
  )
  t.ok(
    runtimeCopies.some(c => /package\.json\s+\S+$/.test(c)),
    'the image gets package.json ("type": "module")',
  )
  const depsStage = stages.find(s => ops(s, 'RUN').some(r => /\bnpm ci\b.*--omit=dev/.test(r)))
  t.ok(depsStage, 'production dependencies come from npm ci --omit=dev')
  if (depsStage && depsStage !== runtime) {
    t.ok(
      runtimeCopies.some(c => c.includes(`--from=${depsStage.name}`) && /node_modules/.test(c)),
      `node_modules copied from the ${depsStage.name} stage`,
    )
  }

  const [entrypoint] = ops(runtime, 'ENTRYPOINT')
  t.ok(entrypoint, 'an ENTRYPOINT')
  const argv = execForm(entrypoint ?? '')
  t.ok(entrypoint?.startsWith('['), 'exec form, so node is PID 1 and gets SIGTERM itself')
  t.match(argv[0], /(^|\/)node(js)?$|\/node$/, 'runs node')
  const script = argv.find(a => a.endsWith('.js'))
  t.equal(script, `${outDir}/${entry}`, `names ${outDir}/${entry}, the file npm run build produces`)
  const workdir = ops(runtime, 'WORKDIR').at(-1)
  t.ok(workdir, 'the runtime stage sets WORKDIR, which the relative script path is read from')

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
  for (const dir of buildConfig.include) t.notOk(ignored.includes(dir), `${dir}/ is not ignored (the build copies it)`)
})
