// One owner per cache dir. Two hubs writing one dir destroy each other's journals, and Node has no
// flock(), so the lock is a unix domain socket at <dir>/.lock.sock that its holder listens on:
// - held: a connect succeeds (the holder answers with its pid, also kept in <dir>/.lock);
// - free: there is no socket file, or its holder died (a kill -9 leaves the file, but nothing
//   listens: connect fails ECONNREFUSED), and the file is taken away.
// The kernel ends a dead holder's listening, so a kill -9 never leaves a lock that blocks the next
// start. A socket is bound at a name of its own and linked into place: link() never replaces a
// name, so of two starters only one gets it, and the holder knows its socket's inode (the lock is
// checked now and then: a holder whose socket file was removed or replaced knows it lost the lock).
import { randomBytes } from 'node:crypto'
import { lstat, link, open, readdir, readFile, rename, unlink } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { nodeDiskIO, writeFully } from './disk-io.ts'
import type { DiskIO } from './disk-io.ts'

export const lockSocketName = '.lock.sock'
export const lockPidName = '.lock'
/** names of the lock's own files in the cache dir (the socket, the pid, a socket being set up or taken away) */
export const lockFilePrefix = '.lock'

/** sun_path holds 108 bytes with the terminating NUL */
const maxSocketPathBytes = 107
const defaultCheckMs = 10_000
/** how long a live holder has to say its pid (it may be busy: the connect alone says it is alive) */
const greetingMs = 1_000
const recheckMs = 200

export class CacheDirLockedError extends Error {
  constructor(
    /** the cache dir */
    readonly path: string,
    /** the holder's pid (in its pid namespace), when it said or left it */
    readonly pid: number | undefined,
  ) {
    super(`cache dir ${path} is in use by ${pid === undefined ? 'another process' : `process ${pid}`}: one hub per cache dir`)
    this.name = 'CacheDirLockedError'
  }
}

export interface DirLock {
  readonly dir: string
  /** Closes the socket and removes its file, unless the lock was lost to someone else. */
  release(): Promise<void>
}

export interface DirLockOptions {
  /** writes the pid file (the first write in the dir: it says whether the dir can be written) */
  io?: DiskIO
  /** how often the holder checks that the socket file is still its own */
  checkMs?: number
  /** told once when the socket file was removed or replaced: someone else may own the dir now */
  onLost?: (reason: string) => void
}

function codeOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException).code
}

async function inodeOf(file: string): Promise<number | undefined> {
  try {
    return (await lstat(file)).ino
  } catch (error) {
    if (codeOf(error) === 'ENOENT') return undefined
    throw error
  }
}

/**
 * Socket addresses: the path itself when it fits in sun_path, else through /proc/self/fd/N of the
 * directory, held open for as long as a socket is bound there (libuv unlinks the address it bound
 * when the server closes).
 */
class Addresses {
  private constructor(
    readonly dir: string,
    private readonly dirHandle: FileHandle | undefined,
  ) {}

  static async of(dir: string): Promise<Addresses> {
    const longest = path.join(dir, `${lockSocketName}.${'0'.repeat(32)}`)
    if (Buffer.byteLength(longest) <= maxSocketPathBytes) return new Addresses(dir, undefined)
    return new Addresses(dir, await open(dir, 'r'))
  }

  of(name: string): string {
    return this.dirHandle ? `/proc/self/fd/${this.dirHandle.fd}/${name}` : path.join(this.dir, name)
  }

  async close(): Promise<void> {
    await this.dirHandle?.close()
  }
}

/** Connects to a lock socket: alive (with the pid it says), or why not (ECONNREFUSED: its holder died). */
function knock(address: string): Promise<{ alive: true; pid: number | undefined } | { alive: false; code: string | undefined }> {
  return new Promise(resolve => {
    const socket = net.connect(address)
    let said = ''
    let connected = false
    const done = () => {
      clearTimeout(timer)
      socket.destroy()
      const pid = Number.parseInt(said, 10)
      resolve({ alive: true, pid: Number.isInteger(pid) && pid > 0 ? pid : undefined })
    }
    const timer = setTimeout(done, greetingMs)
    socket.setEncoding('utf8')
    socket.on('connect', () => (connected = true))
    socket.on('data', (chunk: string) => {
      said += chunk
      if (said.includes('\n')) done()
    })
    socket.on('end', done)
    socket.on('error', error => {
      clearTimeout(timer)
      socket.destroy()
      resolve(connected ? { alive: true, pid: undefined } : { alive: false, code: codeOf(error) })
    })
  })
}

async function pidFromFile(dir: string): Promise<number | undefined> {
  const pid = Number.parseInt(await readFile(path.join(dir, lockPidName), 'utf8').catch(() => ''), 10)
  return Number.isInteger(pid) && pid > 0 ? pid : undefined
}

function uniqueName(kind: string): string {
  return `${lockSocketName}.${kind}.${process.pid}.${randomBytes(6).toString('hex')}`
}

/**
 * Takes a dead holder's socket file away, unless it changed since it was found dead (someone took
 * the lock meanwhile): then it is put back. A rename, not an unlink, so the check sees what it moved.
 */
async function discardStale(dir: string, staleInode: number): Promise<void> {
  const socketPath = path.join(dir, lockSocketName)
  const aside = path.join(dir, uniqueName('stale'))
  try {
    await rename(socketPath, aside)
  } catch (error) {
    if (codeOf(error) === 'ENOENT') return
    throw error
  }
  if ((await inodeOf(aside)) !== staleInode) await link(aside, socketPath).catch(() => {})
  await unlink(aside).catch(() => {})
}

function listen(server: net.Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(address, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise(resolve => server.close(() => resolve()))
}

/**
 * Takes the cache dir's lock, before anything else in the dir is read or written. Throws
 * CacheDirLockedError when a live process holds it; an errno error when the dir cannot hold a
 * socket or be written (EROFS, EACCES, ENOSPC, ...).
 */
export async function acquireDirLock(dir: string, options: DirLockOptions = {}): Promise<DirLock> {
  const socketPath = path.join(dir, lockSocketName)
  const addresses = await Addresses.of(dir)
  try {
    for (let attempt = 0; ; attempt++) {
      if (attempt === 8) throw Object.assign(new Error(`cannot take ${socketPath}: it keeps changing`), { code: 'EBUSY' })
      const found = await inodeOf(socketPath)
      if (found !== undefined) {
        const answer = await knock(addresses.of(lockSocketName))
        if (answer.alive) throw new CacheDirLockedError(dir, answer.pid ?? (await pidFromFile(dir)))
        if (answer.code === 'ECONNREFUSED') await discardStale(dir, found)
        else if (answer.code !== 'ENOENT') throw Object.assign(new Error(`cannot reach ${socketPath}: ${answer.code}`), { code: answer.code })
        continue
      }
      const held = await bindAndLink(dir, addresses)
      if (held) return await holding(dir, addresses, held, options)
    }
  } catch (error) {
    await addresses.close().catch(() => {})
    throw error
  }
}

/** A socket of our own, linked into place; undefined when someone else's got there first. */
async function bindAndLink(dir: string, addresses: Addresses): Promise<{ server: net.Server; inode: number } | undefined> {
  const own = uniqueName('new')
  const server = net.createServer(connection => {
    connection.on('error', () => {})
    connection.end(`${process.pid}\n`)
  })
  await listen(server, addresses.of(own))
  server.unref()
  const ownPath = path.join(dir, own)
  try {
    const inode = (await lstat(ownPath)).ino
    await link(ownPath, path.join(dir, lockSocketName))
    return { server, inode }
  } catch (error) {
    await closeServer(server)
    // EEXIST: another starter linked first; ENOENT: a new holder tidied our name away
    if (codeOf(error) === 'EEXIST' || codeOf(error) === 'ENOENT') return undefined
    throw error
  } finally {
    await unlink(ownPath).catch(() => {})
  }
}

async function holding(dir: string, addresses: Addresses, held: { server: net.Server; inode: number }, options: DirLockOptions): Promise<DirLock> {
  const socketPath = path.join(dir, lockSocketName)
  let lost = false
  let released = false
  const release = async () => {
    if (released) return
    released = true
    clearInterval(check)
    if (!lost && (await inodeOf(socketPath).catch(() => undefined)) === held.inode) await unlink(socketPath).catch(() => {})
    await closeServer(held.server)
    await addresses.close().catch(() => {})
  }
  const ours = async () => (await inodeOf(socketPath).catch(() => held.inode)) === held.inode
  const check = setInterval(() => {
    void (async () => {
      if (await ours()) return
      // a starter that found a dead holder's file moves it aside and puts back what was not dead:
      // look again before calling the lock lost
      await new Promise(resolve => setTimeout(resolve, recheckMs).unref())
      if (released || lost || (await ours())) return
      lost = true
      clearInterval(check)
      options.onLost?.(`the lock ${socketPath} was removed or replaced: another process may be writing the cache dir`)
    })()
  }, options.checkMs ?? defaultCheckMs)
  check.unref()
  try {
    // what the holders before us left of their own attempts (taken names of dead starters)
    for (const name of await readdir(dir)) if (name.startsWith(`${lockSocketName}.`)) await unlink(path.join(dir, name)).catch(() => {})
    const io = options.io ?? nodeDiskIO
    const pidFile = await io.open(path.join(dir, lockPidName), 'w', 0o600)
    try {
      const pid = Buffer.from(`${process.pid}\n`)
      await writeFully(pidFile, [pid], pid.length)
    } finally {
      await pidFile.close()
    }
  } catch (error) {
    await release()
    throw error
  }
  return { dir, release }
}
