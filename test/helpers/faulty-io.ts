// A DiskIO over the real filesystem that fails as disks fail: the Nth write short, with ENOSPC or
// EIO; a disk that fills up and is freed again; a read-only root; a failing fsync; and a kill -9:
// from the Nth operation on nothing completes (a write cut there leaves half of its bytes first).
// Every operation is counted, so a test can put a fault or a kill at each step.
import type { FileHandle } from 'node:fs/promises'
import { nodeDiskIO } from '../../lib/cache/disk-io.ts'
import type { DirEntry, DiskFile, DiskIO } from '../../lib/cache/disk-io.ts'

export type WriteFault = 'short' | 'short-then-ENOSPC' | 'ENOSPC' | 'EIO'

export interface FaultPlan {
  /** the nth writev (1-based, over every file) fails this way; 'short' writes half and returns, the rest may follow */
  failWrite?: { nth: number; fault: WriteFault }
  /** which writes count for failWrite: all, or only those to files whose name passes */
  writesTo?: (file: string) => boolean
  /** every writev from the nth on fails ENOSPC, and no new file can be made, until heal() */
  diskFullFrom?: number
  /** which files a full disk refuses: all, or only those whose name passes (a snapshot that needs more room than an append) */
  diskFullFor?: (file: string) => boolean
  /** the nth datasync fails EIO */
  failSync?: number
  /** every operation that would change the filesystem fails EROFS */
  readOnly?: boolean
  /** chmod fails with this code */
  chmod?: string
  /** from the nth operation on, nothing completes (as if the process were killed there) */
  freezeAt?: number
  /** how much of a write the kill cuts the kernel had taken: 0 to 1, half by default */
  tear?: number
  /** faults and counts start at arm(), not at once (so that open() is not part of the steps) */
  armLater?: boolean
  /** freeze right after the first write that failed */
  freezeAfterFailure?: boolean
}

function errno(code: string, what: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${what}`), { code })
}

const never = new Promise<never>(() => {})

export class FaultyIO implements DiskIO {
  /** operations so far, of every kind */
  ops = 0
  writes = 0
  syncs = 0
  /** what each operation was, in order: `<op> <file>` */
  readonly trace: string[] = []
  readonly frozen: Promise<void>
  isFrozen = false
  private full: boolean
  private armed: boolean
  private markFrozen!: () => void
  private readonly handles = new Set<FileHandle>()

  constructor(
    private plan: FaultPlan = {},
    private readonly real: DiskIO = nodeDiskIO,
  ) {
    this.full = false
    this.armed = !plan.armLater
    this.frozen = new Promise(resolve => (this.markFrozen = resolve))
  }

  /** A new plan, from now on (counts start again; the disk is no longer full). */
  replan(plan: FaultPlan): void {
    this.plan = plan
    this.full = false
    this.arm()
  }

  /** Faults and counts start now. */
  arm(): void {
    this.armed = true
    this.ops = 0
    this.writes = 0
    this.syncs = 0
  }

  /** the disk has room again */
  heal(): void {
    this.plan.diskFullFrom = undefined
    this.full = false
  }

  /** Counts an operation; false once frozen (the caller then never completes). */
  private step(what: string): boolean {
    if (this.isFrozen) return false
    if (!this.armed) return true
    this.ops++
    this.trace.push(what)
    if (this.plan.freezeAt !== undefined && this.ops >= this.plan.freezeAt) {
      this.freeze()
      return false
    }
    return true
  }

  private freeze(): void {
    this.isFrozen = true
    this.markFrozen()
  }

  private mutating(what: string): void {
    if (this.plan.readOnly) throw errno('EROFS', `read-only file system, ${what}`)
  }

  private creating(what: string, file: string): void {
    this.mutating(what)
    if (this.isFull(file)) throw errno('ENOSPC', `no space left on device, ${what}`)
  }

  private isFull(file: string): boolean {
    return this.full && (!this.plan.diskFullFor || this.plan.diskFullFor(file))
  }

  async open(file: string, flags: 'r' | 'a' | 'w', mode?: number): Promise<DiskFile> {
    if (!this.step(`open ${flags} ${file}`)) return never
    if (flags !== 'r') this.creating(`open '${file}'`, file)
    const handle = (await this.real.open(file, flags, mode)) as FileHandle
    this.handles.add(handle)
    return this.file(file, handle)
  }

  private file(name: string, handle: FileHandle): DiskFile {
    return {
      writev: async buffers => {
        if (!this.step(`writev ${name}`)) {
          // killed in the middle of this write: the kernel had taken part of it
          const bytes = Buffer.concat(buffers)
          await handle.writev([bytes.subarray(0, Math.floor(bytes.length * (this.plan.tear ?? 0.5)))])
          return never
        }
        this.mutating(`write '${name}'`)
        if (!this.armed) return handle.writev(buffers)
        const counted = !this.plan.writesTo || this.plan.writesTo(name)
        if (counted) this.writes++
        const fault = counted && this.plan.failWrite?.nth === this.writes ? this.plan.failWrite.fault : undefined
        if (this.plan.diskFullFrom !== undefined && this.writes >= this.plan.diskFullFrom) this.full = true
        if (fault === 'EIO') return this.failWrite('EIO', name)
        if (this.isFull(name) || fault === 'ENOSPC') return this.failWrite('ENOSPC', name)
        if (fault === 'short' || fault === 'short-then-ENOSPC') {
          const bytes = Buffer.concat(buffers)
          const { bytesWritten } = await handle.writev([bytes.subarray(0, bytes.length >> 1)])
          if (fault === 'short-then-ENOSPC') this.full = true
          return { bytesWritten }
        }
        return handle.writev(buffers)
      },
      read: (buffer, offset, length, position) => (this.step(`read ${name}`) ? handle.read(buffer, offset, length, position) : never),
      stat: () => (this.step(`stat ${name}`) ? handle.stat() : never),
      truncate: async length => {
        if (!this.step(`truncate ${name}`)) return never
        this.mutating(`truncate '${name}'`)
        return handle.truncate(length)
      },
      datasync: async () => {
        if (!this.step(`datasync ${name}`)) return never
        if (this.armed) this.syncs++
        if (this.armed && this.plan.failSync === this.syncs) throw errno('EIO', `i/o error, fdatasync '${name}'`)
        return handle.datasync()
      },
      sync: () => (this.step(`sync ${name}`) ? handle.sync() : never),
      close: async () => {
        if (!this.step(`close ${name}`)) return never
        this.handles.delete(handle)
        return handle.close()
      },
    }
  }

  private failWrite(code: 'ENOSPC' | 'EIO', name: string): never {
    if (this.plan.freezeAfterFailure) this.freeze()
    throw errno(code, `${code === 'EIO' ? 'i/o error' : 'no space left on device'}, write '${name}'`)
  }

  async readFile(file: string): Promise<Buffer> {
    return this.step(`readFile ${file}`) ? this.real.readFile(file) : never
  }

  async readdir(dir: string): Promise<DirEntry[]> {
    return this.step(`readdir ${dir}`) ? this.real.readdir(dir) : never
  }

  async mkdir(dir: string, mode: number): Promise<string | undefined> {
    if (!this.step(`mkdir ${dir}`)) return never
    if (this.plan.readOnly || this.full) {
      // an existing directory is no change
      const exists = await this.real.readdir(dir).then(
        () => true,
        () => false,
      )
      if (exists) return undefined
      this.creating(`mkdir '${dir}'`, dir)
    }
    return this.real.mkdir(dir, mode)
  }

  async chmod(file: string, mode: number): Promise<void> {
    if (!this.step(`chmod ${file}`)) return never
    this.mutating(`chmod '${file}'`)
    if (this.plan.chmod) throw errno(this.plan.chmod, `chmod '${file}'`)
    return this.real.chmod(file, mode)
  }

  async rename(from: string, to: string): Promise<void> {
    if (!this.step(`rename ${from} ${to}`)) return never
    this.mutating(`rename '${from}'`)
    return this.real.rename(from, to)
  }

  async link(existing: string, newPath: string): Promise<void> {
    if (!this.step(`link ${existing} ${newPath}`)) return never
    this.creating(`link '${newPath}'`, newPath)
    return this.real.link(existing, newPath)
  }

  async unlink(file: string): Promise<void> {
    if (!this.step(`unlink ${file}`)) return never
    this.mutating(`unlink '${file}'`)
    return this.real.unlink(file)
  }

  async truncate(file: string, length: number): Promise<void> {
    if (!this.step(`truncate ${file}`)) return never
    this.mutating(`truncate '${file}'`)
    return this.real.truncate(file, length)
  }

  async rm(file: string): Promise<void> {
    if (!this.step(`rm ${file}`)) return never
    this.mutating(`rm '${file}'`)
    return this.real.rm(file)
  }

  async stat(file: string): Promise<{ size: number }> {
    return this.step(`stat ${file}`) ? this.real.stat(file) : never
  }

  async statfs(dir: string): Promise<{ bavail: number; bsize: number }> {
    // not counted: the health report's look at free space is no step of a write
    if (this.isFrozen) return never
    return this.full ? { bavail: 0, bsize: 4096 } : this.real.statfs(dir)
  }

  /** Closes the real files the cache left open (a killed process's files, closed by its kernel). */
  async closeAll(): Promise<void> {
    for (const handle of this.handles) await handle.close().catch(() => {})
    this.handles.clear()
  }
}
