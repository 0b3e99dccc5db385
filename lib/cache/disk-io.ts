// The file operations of the disk cache, as one small interface: node:fs/promises by default, a
// stub in tests that fails the Nth write short, with ENOSPC or EIO, or stops answering as a killed
// process would (test/helpers/faulty-io.ts).
import { chmod, link, mkdir, open, readdir, readFile, rename, rm, stat, statfs, truncate, unlink } from 'node:fs/promises'

/** The subset of a FileHandle the disk cache uses. */
export interface DiskFile {
  /** appends (a file opened 'a') or writes at the file position; may write fewer bytes than asked */
  writev(buffers: Buffer[]): Promise<{ bytesWritten: number }>
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>
  stat(): Promise<{ size: number }>
  truncate(length: number): Promise<void>
  datasync(): Promise<void>
  sync(): Promise<void>
  close(): Promise<void>
}

export interface DirEntry {
  name: string
  isDirectory(): boolean
}

export interface DiskIO {
  open(file: string, flags: 'r' | 'a' | 'w', mode?: number): Promise<DiskFile>
  readFile(file: string): Promise<Buffer>
  readdir(dir: string): Promise<DirEntry[]>
  /** mkdir -p: the first directory made, undefined when `dir` existed */
  mkdir(dir: string, mode: number): Promise<string | undefined>
  chmod(file: string, mode: number): Promise<void>
  rename(from: string, to: string): Promise<void>
  link(existing: string, newPath: string): Promise<void>
  unlink(file: string): Promise<void>
  truncate(file: string, length: number): Promise<void>
  /** rm -rf */
  rm(file: string): Promise<void>
  /** free space for an unprivileged writer: bavail blocks of bsize bytes */
  statfs(dir: string): Promise<{ bavail: number; bsize: number }>
  /** a file's size (the load reads small collections first) */
  stat(file: string): Promise<{ size: number }>
}

export const nodeDiskIO: DiskIO = {
  open: (file, flags, mode) => open(file, flags, mode),
  readFile: file => readFile(file),
  readdir: dir => readdir(dir, { withFileTypes: true }),
  mkdir: (dir, mode) => mkdir(dir, { recursive: true, mode }),
  chmod: (file, mode) => chmod(file, mode),
  rename: (from, to) => rename(from, to),
  link: (existing, newPath) => link(existing, newPath),
  unlink: file => unlink(file),
  truncate: (file, length) => truncate(file, length),
  rm: file => rm(file, { recursive: true, force: true }),
  statfs: dir => statfs(dir),
  stat: file => stat(file),
}

export function errorCode(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' ? code : undefined
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}

/**
 * Writes all of `parts` (`bytes` long) at the file's position. A short write (the kernel took part
 * of it: a disk filling up, a signal) goes on with the rest, so it either completes or fails with
 * the error the rest meets (ENOSPC): never quietly short. One writev in the usual case.
 */
export async function writeFully(file: DiskFile, parts: Buffer[], bytes: number): Promise<void> {
  let written = (await file.writev(parts)).bytesWritten
  while (written < bytes) {
    const rest = remainingParts(parts, written)
    const more = (await file.writev(rest)).bytesWritten
    if (more <= 0) throw Object.assign(new Error(`short write: ${written} of ${bytes} bytes, and no progress`), { code: 'EIO' })
    written += more
  }
}

/** `parts` without their first `skip` bytes (no copy: views of the same buffers). */
function remainingParts(parts: Buffer[], skip: number): Buffer[] {
  let i = 0
  while (i < parts.length && skip >= parts[i].length) skip -= parts[i++].length
  const rest = parts.slice(i)
  if (rest.length > 0 && skip > 0) rest[0] = rest[0].subarray(skip)
  return rest
}
