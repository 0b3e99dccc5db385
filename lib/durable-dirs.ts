// Directories that survive a power cut: a new file's or directory's entry is durable only once the
// directory holding it has been fsync'ed, whatever was synced inside it.
import { mkdir, open } from 'node:fs/promises'
import path from 'node:path'

/** fsync a directory, so the entries made in it (files created, renamed in, directories made) survive a power cut. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } catch (error) {
    // some filesystems cannot fsync a directory; the entry is as durable as they allow
    if (!['EINVAL', 'ENOTSUP', 'EISDIR'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error
  } finally {
    await handle.close()
  }
}

/**
 * mkdir -p (0700), with each new directory's entry synced into its parent. `dir` itself is left to
 * the caller to sync once its files are in it.
 */
export async function durableMkdir(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true, mode: 0o700 })
  if (first === undefined) return
  let parent = path.dirname(first)
  await syncDir(parent)
  for (const part of path.relative(parent, dir).split(path.sep).slice(0, -1)) {
    parent = path.join(parent, part)
    await syncDir(parent)
  }
}
