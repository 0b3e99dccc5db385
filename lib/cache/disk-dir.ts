// What makes a --cache-dir unusable, found before anything is created in it, and told in the
// operator's terms: the flag, the path at fault and the real cause. Node's recursive mkdir cannot be
// trusted with this: on a pseudo-filesystem (/proc/x: mkdir says ENOENT while the parent exists) it
// retries forever at full CPU, it makes a cgroup of /sys/fs/cgroup/x, and under a read-only mount
// it reports ENOENT for what the kernel refused with EROFS.
import { constants } from 'node:fs'
import { access, lstat, readlink, stat, statfs } from 'node:fs/promises'
import path from 'node:path'

/** The cache dir cannot be created, locked or written: the hub runs without a disk cache. */
export class CacheDirUnusableError extends Error {
  constructor(
    readonly path: string,
    /** errno code: EROFS, EACCES, ENOTDIR, ENOSPC, ...; ENOTSUP for a pseudo-filesystem */
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'CacheDirUnusableError'
  }
}

/** statfs f_type of the filesystems that hold kernel state, not files: nothing written there is kept */
const pseudoFilesystems: ReadonlyMap<number, string> = new Map([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x1cd1, 'devpts'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0xcafe4a11, 'bpf'],
  [0x62656570, 'configfs'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
  [0x42494e4d, 'binfmt_misc'],
  [0x65735543, 'fusectl'],
  [0x19800202, 'mqueue'],
  [0xf97cff8c, 'selinuxfs'],
  [0x6e736673, 'nsfs'],
])

const writableHint = 'give --cache-dir a directory this user can write (e.g. $HOME/.cache/outpost), or run outpost as its owner'

function codeOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? 'EIO'
}

/** The cause in a person's words, with the errno for a search. */
function said(error: unknown): string {
  const code = codeOf(error)
  const plain: Record<string, string> = {
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EROFS: 'read-only filesystem',
    ENOSPC: 'no space left on the device',
    EDQUOT: 'disk quota exceeded',
    ELOOP: 'too many levels of symbolic links',
    ENAMETOOLONG: 'the name is too long',
    ENOTDIR: 'not a directory',
    EIO: 'input/output error',
  }
  return plain[code] ? `${plain[code]} (${code})` : (error as Error).message
}

/** The error of `--cache-dir <root>`, with `what` said after it. */
export function cacheDirError(root: string, code: string, what: string): CacheDirUnusableError {
  return new CacheDirUnusableError(root, code, `--cache-dir ${root}: ${what}`)
}

function owner(uid: number): string {
  return uid === 0 ? 'root' : `uid ${uid}`
}

/**
 * The nearest of `root` and its ancestors that exists, and what stands in the way of the rest: a
 * component that is a file, a symlink to nowhere, a directory that cannot be searched.
 */
async function nearestExisting(root: string): Promise<string> {
  for (let dir = root; ; dir = path.dirname(dir)) {
    try {
      const found = await stat(dir)
      if (found.isDirectory()) return dir
      throw cacheDirError(root, 'ENOTDIR', dir === root ? 'it is a file, not a directory' : `${dir} is a file, not a directory`)
    } catch (error) {
      if (error instanceof CacheDirUnusableError) throw error
      const code = codeOf(error)
      if (code === 'EACCES') throw cacheDirError(root, code, `permission denied (EACCES) searching ${path.dirname(dir)}; ${writableHint}`)
      // ENOTDIR: a component above is a file; the walk up finds which
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw cacheDirError(root, code, `${dir}: ${said(error)}`)
      // a symlink that points nowhere: mkdir would report ENOENT (or ENOTDIR below it), not why
      const link = await lstat(dir).catch(() => undefined)
      if (link?.isSymbolicLink())
        throw cacheDirError(root, 'ENOENT', `${dir} is a symbolic link to ${await readlink(dir).catch(() => '?')}, which does not exist`)
      if (dir === path.dirname(dir)) throw cacheDirError(root, code, said(error))
    }
  }
}

/**
 * Checks, before anything is made, that `root` (absolute) can be the cache dir: a directory, or
 * creatable under its nearest existing ancestor, on a filesystem that keeps files, writable by this
 * user. Throws CacheDirUnusableError naming the flag and the cause; only stats, so a second start
 * while a hub holds the dir changes nothing in it.
 */
export async function checkCacheDir(root: string): Promise<void> {
  const existing = await nearestExisting(root)
  const fs = await statfs(existing).catch(() => undefined)
  const pseudo = fs && pseudoFilesystems.get(fs.type)
  if (pseudo)
    throw cacheDirError(
      root,
      'ENOTSUP',
      `${existing} is on a ${pseudo} pseudo-filesystem (kernel state, not storage): nothing can be cached there; give a directory on a disk`,
    )
  try {
    await access(existing, constants.W_OK | constants.X_OK)
  } catch (error) {
    const code = codeOf(error)
    const where = existing === root ? 'it' : `cannot create it: ${existing}`
    if (code === 'EROFS') throw cacheDirError(root, code, `${where} is on a read-only filesystem (EROFS); give a directory on a writable mount`)
    if (code === 'EACCES' || code === 'EPERM') {
      const info = await stat(existing).catch(() => undefined)
      const uid = process.getuid?.()
      const ownedBy = info ? `owned by ${owner(info.uid)} and ` : ''
      throw cacheDirError(root, code, `${where} is ${ownedBy}not writable by ${uid === undefined ? 'this user' : owner(uid)} (${code}); ${writableHint}`)
    }
    throw cacheDirError(root, code, `${existing}: ${said(error)}`)
  }
}
