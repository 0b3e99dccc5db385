// A directory made for a new cache collection (or certificate) must reach the disk with the files
// synced inside it: each new directory's entry is fsync'ed into its parent. Checked on the
// syscalls themselves (strace), where the machine has strace.
import t from 'tap'
import type { Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { durableMkdir, nodeDirFs, syncDir } from '../lib/durable-dirs.ts'
import type { DirFs } from '../lib/durable-dirs.ts'

const helper = fileURLToPath(new URL('./helpers/durable-mkdir.ts', import.meta.url))
const hasStrace = spawnSync('strace', ['-V']).status === 0

function scratch(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-dirs-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** The directories under `root` that durableMkdir(target) fsyncs, read from strace's record of its syscalls. */
function syncedDirs(t: Test, root: string, target: string): string[] {
  const trace = path.join(scratch(t), 'trace')
  const run = spawnSync('strace', ['-f', '-e', 'trace=openat,fsync', '-o', trace, process.execPath, '--import', 'tsx', helper, target], { encoding: 'utf8' })
  t.equal(run.status, 0, run.stderr)
  const byFd = new Map<string, string>()
  const synced: string[] = []
  for (const line of readFileSync(trace, 'utf8').split('\n')) {
    const opened = /openat\(AT_FDCWD, "([^"]+)", O_RDONLY\|O_CLOEXEC\) = (\d+)/.exec(line)
    if (opened) byFd.set(opened[2], opened[1])
    const fsync = /fsync\((\d+)\)\s+= 0/.exec(line)
    if (fsync && byFd.get(fsync[1])?.startsWith(root)) synced.push(byFd.get(fsync[1])!)
  }
  return synced
}

t.test('new directories are made 0700, and an existing one is left as it is', async t => {
  const base = scratch(t)
  const target = path.join(base, 'kubelet', 'pods.v1.core')
  await durableMkdir(target)
  for (const dir of [path.join(base, 'kubelet'), target]) t.equal(statSync(dir).mode & 0o777, 0o700, dir)
  await durableMkdir(target)
  t.ok(statSync(target).isDirectory())
})

t.test('each new directory is synced into its parent; the last is left to the caller', { skip: hasStrace ? false : 'strace is not installed' }, async t => {
  const base = scratch(t)
  const target = path.join(base, 'a', 'b', 'c')
  t.same(syncedDirs(t, base, target), [base, path.join(base, 'a'), path.join(base, 'a', 'b')])
  t.same(syncedDirs(t, base, target), [], 'nothing made, nothing synced')
})

/** The real directory operations, with the fsync of a directory failing with `code`; counts what it closes. */
function failingSync(code: string): DirFs & { opened: number; closed: number } {
  const fs = {
    opened: 0,
    closed: 0,
    mkdir: nodeDirFs.mkdir,
    open: async (file: string, flags: 'r') => {
      const handle = await nodeDirFs.open(file, flags)
      fs.opened++
      return {
        sync: () => Promise.reject(Object.assign(new Error(`${code}: fsync '${file}'`), { code })),
        close: () => {
          fs.closed++
          return handle.close()
        },
      }
    },
  }
  return fs
}

t.test('a directory fsync that fails is an error (EIO), except where the filesystem cannot fsync directories; the handle is closed either way', async t => {
  const base = scratch(t)
  const eio = failingSync('EIO')
  await t.rejects(syncDir(base, eio), { code: 'EIO' })
  await t.rejects(durableMkdir(path.join(base, 'a', 'b'), eio), { code: 'EIO' }, 'a new directory whose entry could not be synced')
  for (const code of ['EINVAL', 'ENOTSUP', 'EISDIR']) await syncDir(base, failingSync(code))
  t.equal(eio.closed, eio.opened, `${eio.opened} directories opened, all closed`)
})
