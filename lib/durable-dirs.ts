// Directories that survive a power cut: a new file's or directory's entry is durable only once the
// directory holding it has been fsync'ed, whatever was synced inside it.
import { mkdir, open } from 'node:fs/promises'
import path from 'node:path'

/**
 * The file operations these functions make: node:fs/promises by default; the disk cache passes its
 * own (lib/cache/disk-io.ts), so that a fault injected there reaches directory syncs too.
 */
export interface DirFs {
  open(file: string, flags: 'r'): Promise<{ sync(): Promise<void>; close(): Promise<void> }>
  /** mkdir -p with `mode`: the first directory it made, undefined when `dir` existed */
  mkdir(dir: string, mode: number): Promise<string | undefined>
}

export const nodeDirFs: DirFs = {
  open: (file, flags) => open(file, flags),
  mkdir: (dir, mode) => mkdir(dir, { recursive: true, mode }),
}

/** Errors of fsync on a directory that mean "this filesystem cannot", not "this failed". */
const cannotSyncDirectories = ['EINVAL', 'ENOTSUP', 'EISDIR']

/** fsync a directory, so the entries made in it (files created, renamed in, directories made) survive a power cut. */
export async function syncDir(dir: string, fs: DirFs = nodeDirFs): Promise<void> {
  const handle = await fs.open(dir, 'r')
  try {
    await handle.sync()
  } catch (error) {
    // some filesystems cannot fsync a directory; the entry is as durable as they allow
    if (!cannotSyncDirectories.includes((error as NodeJS.ErrnoException).code ?? '')) throw error
  } finally {
    await handle.close()
  }
}

/**
 * mkdir -p (0700), with each new directory's entry synced into its parent. `dir` itself is left to
 * the caller to sync once its files are in it.
 */
export async function durableMkdir(dir: string, fs: DirFs = nodeDirFs): Promise<void> {
  const first = await fs.mkdir(dir, 0o700)
  if (first === undefined) return
  let parent = path.dirname(first)
  await syncDir(parent, fs)
  for (const part of path.relative(parent, dir).split(path.sep).slice(0, -1)) {
    parent = path.join(parent, part)
    await syncDir(parent, fs)
  }
}
