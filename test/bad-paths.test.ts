// An operator's bad paths, as the outpost command meets them on a node: every --cache-dir it cannot
// use is named at once, in one error line with the real cause, and the hub serves on with offline
// autonomy off and says so in readyz; a port another process holds names its flag, and the hub exits.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import pino from 'pino'
import { request } from 'undici'
import { CacheDirUnusableError, DiskCache } from '../lib/cache/disk.ts'
import { eventually, freePort } from './helpers/hub.ts'
import { createTestPki } from './helpers/pki.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const entry = new URL('../cmd/outpost.ts', import.meta.url).pathname
// From spawn: tsx compiles the hub first (1.3-1.9 s for --help alone on a busy 2-core box, 3-5 s
// with two hubs starting at once under a load of 8); the check itself takes milliseconds. What the
// waits guard against never comes at all (/proc/x looped in mkdir -p with no output).
const lineWithinMs = 30_000

interface Run {
  /** stdout and stderr lines, each with the ms since spawn it came at */
  lines: { at: number; text: string }[]
  exited: Promise<number | null>
  adminPort: number
  stop(): Promise<void>
}

/** The outpost command against a dead apiserver, with `args`; `prefix` runs it under another command (setpriv, unshare). */
async function outpost(args: string[], prefix: string[] = []): Promise<Run> {
  const [port, adminPort, deadServer] = [await freePort(), await freePort(), await freePort()]
  const flags = [
    '--server',
    `http://127.0.0.1:${deadServer}`,
    '--port',
    String(port),
    '--admin-port',
    String(adminPort),
    '--secure-port',
    '0',
    '--node-name',
    'n1',
    ...args,
  ]
  const command = [...prefix, process.execPath, '--import', 'tsx', entry, ...flags]
  const started = Date.now()
  const child = spawn(command[0], command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: Run['lines'] = []
  for (const stream of [child.stdout, child.stderr]) {
    let partial = ''
    stream.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString()).split('\n')
      partial = parts.pop()!
      for (const text of parts) lines.push({ at: Date.now() - started, text })
    })
  }
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  }
  return { lines, exited, adminPort, stop }
}

/** The line the hub writes once it serves (lib/hub.ts's 'outpost serving'), JSON or text. */
const isServing = (text: string): boolean => /\boutpost serving\b/.test(text)

/** An error-level log line, JSON or text, whatever the log format. */
function isError(text: string): boolean {
  try {
    return JSON.parse(text).level >= 50
  } catch {
    return /\bERROR\b/.test(text)
  }
}

const messageOf = (text: string) => {
  try {
    return String(JSON.parse(text).msg)
  } catch {
    return text
  }
}

async function readyz(adminPort: number): Promise<string | undefined> {
  try {
    const res = await request(`http://127.0.0.1:${adminPort}/v1/readyz`)
    return await res.body.text()
  } catch {
    return undefined
  }
}

/** Why `prefix` cannot run the hub here, or false when it can. */
function cannotRun(prefix: string[], script = 'true'): string | false {
  const ran = spawnSync(prefix[0], [...prefix.slice(1), 'sh', '-c', script], { encoding: 'utf8' })
  return ran.status === 0 ? false : `${prefix.join(' ')} cannot run here: ${(ran.stderr || ran.error?.message || `exit ${ran.status}`).trim()}`
}

const base = tempDir(t, 'outpost-bad-paths-')
const readOnlyMount = path.join(base, 'ro')
mkdirSync(readOnlyMount)
// a read-only mount in a mount namespace of the hub's own: nothing to unmount, nothing left behind
const inReadOnlyMount = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', `mount -t tmpfs -o ro tmpfs ${readOnlyMount} && exec "$@"`, 'sh']
const readOnlySkip = cannotRun(inReadOnlyMount.slice(0, -4), `mount -t tmpfs -o ro tmpfs ${readOnlyMount}`)
// root writes everywhere: the permission case runs as nobody when this is root and may drop to it
const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
const root = process.getuid?.() === 0
const permissionSkip = root ? cannotRun(asNobody, `test -r ${entry}`) : false

const file = path.join(base, 'a-file')
writeFileSync(file, 'not a directory')
symlinkSync(path.join(base, 'nowhere'), path.join(base, 'dangling'))
const rootOnly = path.join(base, 'root-only')
mkdirSync(rootOnly, { mode: 0o755 })
// not root: a dir it cannot write, made so; root: a dir of root's, which nobody cannot write
if (!root) chmodSync(rootOnly, 0o555)
// nobody must reach it to be refused by it, not by the scratch dir above
chmodSync(base, 0o755)

const cases: { name: string; dir: string; cause: RegExp; prefix?: string[]; skip?: string | false }[] = [
  { name: 'a pseudo-filesystem (/proc: mkdir -p used to loop there forever)', dir: '/proc/outpost-cache', cause: /\/proc is on a proc pseudo-filesystem/ },
  {
    name: 'a read-only mount (not ENOENT)',
    dir: path.join(readOnlyMount, 'outpost', 'cache'),
    cause: /read-only filesystem \(EROFS\)/,
    prefix: inReadOnlyMount,
    skip: readOnlySkip,
  },
  {
    name: `a dir this user cannot write (${root ? 'as uid 65534 under setpriv' : 'as this user'})`,
    dir: path.join(rootOnly, 'cache'),
    cause: /not writable by .*\(EACCES\); give --cache-dir a directory this user can write/,
    prefix: root ? asNobody : [],
    skip: permissionSkip,
  },
  { name: 'a file', dir: file, cause: /it is a file, not a directory/ },
  { name: 'a file in the way', dir: path.join(file, 'cache'), cause: new RegExp(`${file} is a file, not a directory`) },
]

/** Runs `jobs` at most `width` at a time: a loaded box gives each its own second. */
async function inBatches<T>(jobs: (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = []
  for (let i = 0; i < jobs.length; i += width) results.push(...(await Promise.all(jobs.slice(i, i + width).map(job => job()))))
  return results
}

t.test('every unusable --cache-dir: one error line naming the flag and the cause, at once; the hub serves on, offline autonomy off in readyz', async t => {
  const runnable = cases.filter(c => !c.skip)
  for (const c of cases.filter(c => c.skip)) t.pass(c.name, { skip: c.skip })
  const seen = await inBatches(
    runnable.map(c => async () => {
      const run = await outpost(['--cache-dir', c.dir], c.prefix)
      try {
        const line = await eventually(
          () => run.lines.find(l => isError(l.text) && l.text.includes('--cache-dir')),
          lineWithinMs,
          `${c.name}: the error line`,
        ).catch(() => undefined)
        const ready = line && (await eventually(() => readyz(run.adminPort), 20_000, `${c.name}: readyz`).catch(() => undefined))
        // the line the hub writes once it serves: the error came before it, at start, not after
        const serving = ready && (await eventually(() => run.lines.find(l => isServing(l.text)), 20_000, `${c.name}: serving`).catch(() => undefined))
        return { c, line, ready, serving, errors: run.lines.filter(l => isError(l.text) && l.text.includes('--cache-dir')), exit: run.lines }
      } finally {
        await run.stop()
      }
    }),
    2,
  )
  for (const { c, line, ready, serving, errors, exit } of seen) {
    t.ok(line, `${c.name}: an error line names --cache-dir`, { output: exit.map(l => l.text).join('\n') })
    if (!line) continue
    t.match(messageOf(line.text), new RegExp(`--cache-dir ${c.dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `), `${c.name}: it names the path`)
    t.match(messageOf(line.text), c.cause, `${c.name}: and the cause`)
    t.equal(errors.length, 1, `${c.name}: one error line`)
    t.ok(serving && exit.indexOf(line) < exit.indexOf(serving), `${c.name}: at start, before the hub said it serves`)
    t.comment(`${c.name}: error line ${line.at} ms after spawn${serving ? `, serving at ${serving.at} ms` : ''}`)
    t.match(ready, /offline autonomy is off: the cache dir cannot be used \(--cache-dir /, `${c.name}: readyz says offline autonomy is off, and why`)
  }
})

t.test('a port in use: its flag named, another outpost suspected, the hub exits non-zero', async t => {
  const pki = await createTestPki()
  const ca = path.join(base, 'ca.crt')
  writeFileSync(ca, pki.ca.cert)
  const held = net.createServer()
  await new Promise<void>(resolve => held.listen(0, '127.0.0.1', resolve))
  t.teardown(() => held.close())
  const busy = (held.address() as net.AddressInfo).port
  const certDir = tempDir(t, 'outpost-bad-ports-pki-')
  const flags: Record<string, string[]> = {
    '--port': ['--port', String(busy)],
    '--admin-port': ['--admin-port', String(busy)],
    '--secure-port': ['--secure-port', String(busy), '--cert-dir', certDir],
    '--pool-port': ['--pool-sharing=on', '--pool-client-ca-file', ca, '--pool-bind-address', '127.0.0.1', '--pool-port', String(busy)],
  }
  const seen = await inBatches(
    Object.entries(flags).map(([flag, args]) => async () => {
      // each case gets a cache dir of its own: two hubs on one dir would be refused for that instead
      const run = await outpost(['--cache-dir', path.join(base, `cache${flag}`), ...args])
      const code = await Promise.race([run.exited, new Promise<'running'>(resolve => setTimeout(() => resolve('running'), 30_000))])
      await run.stop()
      return { flag, code, lines: run.lines }
    }),
    2,
  )
  for (const { flag, code, lines } of seen) {
    const named = lines.filter(l => l.text.includes(`${flag} ${busy}: 127.0.0.1:${busy} is already in use`))
    t.equal(named.length, 1, `${flag}: one line names the flag and the address`, { output: lines.map(l => l.text).join('\n') })
    t.match(named[0]?.text, /another outpost on this node/, `${flag}: it says another outpost may hold it`)
    t.not(code, 0, `${flag}: exits non-zero`)
    t.not(code, 'running', `${flag}: and does exit`)
    if (named[0]) t.comment(`${flag}: line ${named[0].at} ms after spawn`)
  }
})

t.test('in the process: a symlink to nowhere and each pseudo-filesystem, refused before mkdir, in milliseconds', async t => {
  const log = pino({ level: 'silent' })
  const dangling = path.join(base, 'dangling', 'cache')
  const refused = await DiskCache.open(dangling, log).then(
    disk => disk.close(),
    (error: unknown) => error,
  )
  t.match(refused, {
    code: 'ENOENT',
    message: `--cache-dir ${dangling}: ${path.join(base, 'dangling')} is a symbolic link to ${path.join(base, 'nowhere')}, which does not exist`,
  })
  for (const [dir, kind] of [
    ['/proc/outpost-cache/a', 'proc'],
    ['/sys/kernel/outpost-cache', 'sysfs'],
    ['/dev/pts/outpost-cache', 'devpts'],
  ]) {
    const started = performance.now()
    const refused = await DiskCache.open(dir, log).then(
      disk => disk.close(),
      (error: unknown) => error,
    )
    const ms = Math.round(performance.now() - started)
    t.ok(refused instanceof CacheDirUnusableError, `${dir}: refused`)
    t.match(refused, { code: 'ENOTSUP', message: new RegExp(`^--cache-dir ${dir}: .* is on a ${kind} pseudo-filesystem`) }, `${dir}: named as ${kind}`)
    t.comment(`${dir}: refused in ${ms} ms`)
  }
})
