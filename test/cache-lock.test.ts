// One hub per cache dir: a second one fails at once naming the holder, before it reads or writes
// anything in the dir; a holder killed with -9 never blocks the next start.
import t from 'tap'
import type { Test } from 'tap'
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { CacheDirLockedError, CacheDirUnusableError, DiskCache } from '../lib/cache/disk.ts'
import { acquireDirLock } from '../lib/cache/lock.ts'
import type { CachedObject, ResourceKey } from '../lib/cache/types.ts'
import { eventually } from './helpers/hub.ts'

const log = pino({ level: process.env.OUTPOST_TEST_LOG ?? 'silent' })
const holder = fileURLToPath(new URL('./helpers/disk-lock-holder.ts', import.meta.url))
const configMaps: ResourceKey = { component: 'kubelet', group: '', version: 'v1', resource: 'configmaps' }

async function scratch(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-lock-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

function configMap(name: string): CachedObject {
  const body = Buffer.from(JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: '1' } }))
  return { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name, resourceVersion: '1', format: 'json', body }
}

async function rejection(attempt: Promise<unknown>): Promise<unknown> {
  return attempt.then(
    () => undefined,
    (error: unknown) => error,
  )
}

/** Every file under `dir` with its bytes and mtime: what a second hub must leave as it was. */
async function contents(dir: string): Promise<Record<string, string>> {
  const seen: Record<string, string> = {}
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name)
    const info = await stat(file)
    seen[path.relative(dir, file)] = entry.isFile()
      ? `${(await readFile(file)).toString('base64')} ${info.mtimeMs}`
      : `${entry.isSocket() ? 'socket' : 'dir'} ${info.mtimeMs}`
  }
  return seen
}

/** The holder helper in a child process; resolves once it says what it did. */
function startHolder(t: Test, dir: string): { child: ChildProcess; said: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', holder, dir], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let out = ''
  child.stdout!.setEncoding('utf8')
  const said = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: string) => {
      out += chunk
      if (out.includes('\n')) resolve(out.trim())
    })
    // 'close' comes after the output is read ('exit' may come before it)
    child.on('close', code => reject(new Error(`holder exited ${code} having said ${JSON.stringify(out)}`)))
  })
  said.catch(() => {})
  return { child, said }
}

for (const [what, depth] of [
  ['a short path', 0],
  ['a path too long for a socket address (over 107 bytes)', 6],
] as const) {
  t.test(`two DiskCaches on one dir in one process (${what}): the second is refused naming this process, and touches nothing`, async t => {
    const base = await scratch(t)
    const dir = path.join(base, ...Array.from({ length: depth }, (_, i) => `level-${i}-${'d'.repeat(12)}`), 'cache')
    if (depth > 0) t.ok(Buffer.byteLength(path.join(dir, '.lock.sock')) > 107, `${Buffer.byteLength(dir)} bytes of path`)
    const first = await DiskCache.open(dir, log)
    t.teardown(() => first.close())
    await first.put(configMaps, configMap('a'))
    await first.flush()
    const before = await contents(dir)
    const refused = await rejection(DiskCache.open(dir, log))
    t.ok(refused instanceof CacheDirLockedError, 'CacheDirLockedError')
    t.match(refused, { pid: process.pid, path: dir, message: new RegExp(`in use by process ${process.pid}`) })
    t.same(await contents(dir), before, 'nothing in the dir was written, cut or removed')
    await first.put(configMaps, configMap('b'))
    await first.close()
    const second = await DiskCache.open(dir, log)
    t.teardown(() => second.close())
    const names: string[] = []
    await second.load(e => names.push(e.object.name))
    t.same(names.sort(), ['a', 'b'], 'once the first is closed, the dir opens, with all it wrote')
  })
}

t.test(
  'another process holding the dir: a second one exits at once naming it, the first one’s files untouched; after a kill -9 of the holder the dir opens',
  async t => {
    const dir = path.join(await scratch(t), 'cache')
    const first = startHolder(t, dir)
    const ready = await first.said
    t.equal(ready, `ready ${first.child.pid}`)
    const before = await contents(dir)
    t.ok(
      Object.keys(before).some(f => f.endsWith('journal.0')),
      'the holder wrote a journal',
    )

    const second = startHolder(t, dir)
    const [code] = await once(second.child, 'exit')
    t.equal(code, 3, 'the second process gave up')
    t.equal(await second.said, `locked ${first.child.pid}`, "naming the holder's pid")
    const refused = await rejection(DiskCache.open(dir, log))
    t.match(refused, { pid: first.child.pid }, 'so does an open in this process')
    t.same(await contents(dir), before, 'the holder’s journal and everything else: same bytes, same times')

    first.child.kill('SIGKILL')
    await once(first.child, 'exit')
    const next = await DiskCache.open(dir, log)
    t.teardown(() => next.close())
    const names: string[] = []
    t.same((await next.load(e => names.push(e.object.name))).failed, [])
    t.same(names, [`from-${first.child.pid}`], 'the killed holder’s lock did not block the next start, and its objects load')
  },
)

t.test('a cache dir that cannot be created is refused with why', async t => {
  const base = await scratch(t)
  await writeFile(path.join(base, 'file'), 'not a directory')
  for (const dir of [path.join(base, 'file'), path.join(base, 'file', 'cache')]) {
    const refused = await rejection(DiskCache.open(dir, log))
    t.ok(refused instanceof CacheDirUnusableError, dir)
    t.match(refused, { code: 'ENOTDIR', path: dir, message: /not a directory/ })
  }
})

t.test('a holder whose lock file was removed or replaced finds out, and writes nothing more', async t => {
  const dir = path.join(await scratch(t), 'cache')
  const disk = await DiskCache.open(dir, log, { lockCheckMs: 20 })
  t.teardown(() => disk.close())
  await disk.put(configMaps, configMap('a'))
  await unlink(path.join(dir, '.lock.sock'))
  await eventually(() => !disk.health().durable, 10_000, 'the lost lock to be noticed')
  t.match(disk.health(), { durable: false, error: /lock failed in .*was removed or replaced/ })
  await t.rejects(disk.put(configMaps, configMap('b')), /another process may be writing the cache dir/)

  const other = await scratch(t)
  const lost: string[] = []
  const lock = await acquireDirLock(other, { checkMs: 20, onLost: reason => lost.push(reason) })
  t.teardown(() => lock.release())
  await unlink(path.join(other, '.lock.sock'))
  await writeFile(path.join(other, '.lock.sock'), 'someone else')
  await eventually(() => lost.length > 0, 10_000, 'a replaced lock to be noticed')
  await lock.release()
  t.equal(await readFile(path.join(other, '.lock.sock'), 'utf8'), 'someone else', 'a lost lock is not removed from its new owner on release')
})
