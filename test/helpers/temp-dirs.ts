// Temporary directories the tests make, and their removal: a run of `npm test` leaves nothing in
// the OS temp dir.
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

/**
 * A fresh directory under the OS temp dir, removed when the test ends. Make it before what writes
 * into it (a hub, a child process): tap runs teardowns last-registered first, so its removal comes
 * after theirs.
 */
export function tempDir(t: { teardown(fn: () => unknown): void }, prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const untilExit = new Set<string>()
let removalOnExit = false

/**
 * A fresh directory under the OS temp dir for a helper that has no test to tie it to (a default
 * config, a module-level kubeconfig): removed when the test process exits, or earlier by
 * removeNow().
 */
export function processTempDir(prefix: string): string {
  if (!removalOnExit) {
    removalOnExit = true
    process.once('exit', removeAllNow)
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  untilExit.add(dir)
  return dir
}

/** Removes a directory processTempDir() made (and forgets it). */
export function removeNow(dir: string): void {
  rmSync(dir, { recursive: true, force: true })
  untilExit.delete(dir)
}

function removeAllNow(): void {
  for (const dir of untilExit) rmSync(dir, { recursive: true, force: true })
  untilExit.clear()
}
