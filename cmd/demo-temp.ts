// The demo's temporary dirs (its PKI, CA key included, and its cache), removed when the process
// ends however it ends: a normal exit, `q`, Ctrl-C or SIGTERM (the shutdown handler's exit), a
// failed start, or a signal that comes before the hub has installed its handlers. Only a SIGKILL
// leaves them.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const made: string[] = []
let hooked = false

/** the CA key, then the other private keys (certs/selfsigned.ts; a .pem may hold a key and its certificate) */
const keysFirst = (names: string[]) => [...names.filter(n => n === 'ca.key'), ...names.filter(n => n !== 'ca.key' && /\.(key|pem)$/.test(n))]

/** Keys first: were the removal cut short, a key is not what is left. */
function remove(dir: string): void {
  try {
    for (const name of keysFirst(readdirSync(dir))) rmSync(path.join(dir, name), { force: true })
  } catch {
    // gone already, or not readable: the rm below says no more
  }
  try {
    rmSync(dir, { recursive: true, force: true })
  } catch {
    // ENOTEMPTY: a file landed during the rm; the next round takes it
  }
}

const settleMs = 25
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/**
 * Removes the dirs until they stay gone. A process that exits mid-start can have fs work in flight
 * on libuv's threads (the cache's mkdir -p, a journal being created): it lands after a single rm
 * and makes the dir again. Blocking here lets those threads finish; they need no event loop.
 */
export function removeDemoDirs(): void {
  const dirs = made.splice(0)
  for (let round = 0; round < 20 && dirs.length > 0; round++) {
    for (const dir of dirs) remove(dir)
    sleepSync(settleMs)
    if (!dirs.some(dir => existsSync(dir))) return
  }
}

/**
 * A signal before the shutdown handler is in place would kill the process without an 'exit' event:
 * until a handler comes after this one, this removes the dirs and ends as the signal would have.
 * (Handlers from before, such as a preloaded signal-exit, only act when they are alone.)
 */
function untilHandled(signal: NodeJS.Signals, code: number): void {
  let handledLater = false
  process.on(signal, () => {
    if (handledLater) return
    removeDemoDirs()
    process.exit(code)
  })
  process.on('newListener', event => {
    if (event === signal) handledLater = true
  })
}

/** A fresh dir under the OS temp dir, removed when the process ends. */
export function demoTempDir(prefix: string): string {
  if (!hooked) {
    hooked = true
    process.once('exit', removeDemoDirs)
    untilHandled('SIGINT', 130)
    untilHandled('SIGTERM', 143)
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  made.push(dir)
  return dir
}
