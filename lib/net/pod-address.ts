// The link-local address pods reach the hub on (169.254.2.1 by default, as YurtHub's): kept on a
// dummy interface of the hub's own, put back whenever someone removes or changes it. iproute2's
// `ip` does the netlink work: Node has no netlink socket, and a native addon would cost the bundle
// its single file for a handful of calls a minute.
import { execFile, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import type { ChildProcess } from 'node:child_process'
import { isIPv6 } from 'node:net'
import type { Logger } from 'pino'

/** Where iproute2 puts it (the image: /usr/sbin/ip), whatever PATH a static pod's container gets */
const ipBinary = ['/usr/sbin/ip', '/sbin/ip', '/bin/ip'].find(p => existsSync(p)) ?? 'ip'

/** Runs `ip` with these arguments; resolves with its stdout, rejects with what it printed on stderr. */
const runIp = (args: string[]): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile(ipBinary, args, { timeout: 10_000, maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout)
      const code = (error as NodeJS.ErrnoException).code
      const said = String(stderr).trim().split('\n')[0]
      reject(new Error(code === 'ENOENT' ? "iproute2's ip is not installed (/usr/sbin/ip, or on PATH)" : said || error.message))
    })
  })

export interface PodAddressState {
  address: string
  interface: string
  /** the address is on the interface, up, as of the last check */
  held: boolean
  /** why it is not, when it is not */
  reason?: string
  /** dummy, or bridge where the kernel has no dummy driver */
  kind?: string
  /** this hub made the interface, so it removes it on a clean shutdown */
  createdByHub: boolean
  /** times it was found removed or changed and put back */
  restored: number
  checkedAt?: string
}

interface LinkInfo {
  ifname: string
  flags?: string[]
  linkinfo?: { info_kind?: string }
  addr_info?: { local?: string; prefixlen?: number }[]
}

/** kinds of interface that hold the address: the ones the hub makes */
const holderKinds = ['dummy', 'bridge']

const permissionDenied = /Operation not permitted|Permission denied/i

export interface PodAddressOptions {
  address: string
  interfaceName: string
  log: Logger
  /** a check this often besides the ones `ip monitor` prompts (it may not be running) */
  periodMs?: number
}

export class PodAddressKeeper {
  private readonly prefix: string
  private current: PodAddressState
  private timer: NodeJS.Timeout | undefined
  private monitor: ChildProcess | undefined
  private checking: Promise<PodAddressState> | undefined
  private again = false
  private stopped = false
  private kind = 'dummy'

  constructor(private readonly options: PodAddressOptions) {
    this.prefix = `${options.address}/${isIPv6(options.address) ? 128 : 32}`
    this.current = { address: options.address, interface: options.interfaceName, held: false, createdByHub: false, restored: 0 }
  }

  get state(): PodAddressState {
    return { ...this.current }
  }

  /** One check, putting back what is missing; concurrent callers share it, and a call during one runs one more after it. */
  ensure(): Promise<PodAddressState> {
    if (this.checking) {
      this.again = true
      return this.checking
    }
    this.checking = this.check().finally(() => {
      this.checking = undefined
      if (this.again && !this.stopped) {
        this.again = false
        void this.ensure()
      }
    })
    return this.checking
  }

  /** Keeps it from now on: `ip monitor` for changes as they happen, a periodic check in case the monitor is gone. */
  start(): void {
    this.timer = setInterval(() => {
      if (!this.monitor) this.watchChanges()
      void this.ensure()
    }, this.options.periodMs ?? 30_000)
    this.timer.unref()
    this.watchChanges()
  }

  /** Stops keeping it; removes the interface only if this hub made it. */
  async close(): Promise<void> {
    this.stopped = true
    clearInterval(this.timer)
    this.monitor?.kill()
    await this.checking?.catch(() => {})
    if (!this.current.createdByHub) return
    try {
      await runIp(['link', 'del', this.options.interfaceName])
      this.options.log.info({ interface: this.options.interfaceName }, 'pod address interface removed')
    } catch (error) {
      this.options.log.warn({ interface: this.options.interfaceName, err: (error as Error).message }, 'pod address interface not removed')
    }
  }

  private watchChanges(): void {
    if (this.stopped) return
    let monitor: ChildProcess
    try {
      monitor = spawn(ipBinary, ['-o', 'monitor', 'link', 'address'], { stdio: ['ignore', 'pipe', 'ignore'] })
    } catch {
      return
    }
    this.monitor = monitor
    let pending: NodeJS.Timeout | undefined
    // a burst of changes (ours included) is one check; other interfaces' (a pod's veth) are none
    monitor.stdout?.on('data', (chunk: Buffer) => {
      if (pending || !chunk.toString('latin1').includes(this.options.interfaceName)) return
      pending = setTimeout(() => {
        pending = undefined
        if (!this.stopped) void this.ensure()
      }, 50)
    })
    monitor.on('error', () => {})
    monitor.on('exit', () => {
      clearTimeout(pending)
      if (this.monitor === monitor) this.monitor = undefined
    })
    monitor.unref()
    ;(monitor.stdout as unknown as { unref?: () => void } | null)?.unref?.()
  }

  private async check(): Promise<PodAddressState> {
    const name = this.options.interfaceName
    const was = this.current
    let repaired = false
    let step = `ip -d addr show dev ${name}`
    try {
      let link = await this.show()
      if (!link) {
        step = `ip link add ${name} type ${this.kind}`
        await this.add()
        this.current = { ...this.current, createdByHub: true }
        repaired = was.held
        link = await this.show()
        if (!link) throw new Error('the interface was made and is gone again')
      }
      const kind = link.linkinfo?.info_kind
      if (!holderKinds.includes(kind ?? '')) {
        return this.settle({ held: false, reason: `interface ${name} exists and is not a dummy (${kind ?? 'no kind'}): left alone` })
      }
      this.current = { ...this.current, kind }
      if (!link.flags?.includes('UP')) {
        step = `ip link set ${name} up`
        await runIp(['link', 'set', name, 'up'])
        repaired ||= was.held
      }
      if (!link.addr_info?.some(a => a.local === this.options.address)) {
        step = `ip addr add ${this.prefix} dev ${name}`
        await runIp(['addr', 'add', this.prefix, 'dev', name])
        repaired ||= was.held
      }
    } catch (error) {
      const said = (error as Error).message
      const reason = permissionDenied.test(said) ? `no CAP_NET_ADMIN: ${step}: ${said}` : `${step}: ${said}`
      return this.settle({ held: false, reason })
    }
    if (repaired) {
      this.current = { ...this.current, restored: this.current.restored + 1 }
      this.options.log.warn({ interface: name, address: this.options.address }, 'pod address was removed or changed: put back')
    }
    return this.settle({ held: true })
  }

  private settle(next: { held: boolean; reason?: string }): PodAddressState {
    const before = this.current
    this.current = { ...before, held: next.held, reason: next.reason, checkedAt: new Date().toISOString() }
    if (!next.held && (before.held || before.reason !== next.reason)) {
      this.options.log.warn({ interface: before.interface, address: before.address, reason: next.reason }, 'pod address not held')
    } else if (next.held && !before.held && before.checkedAt === undefined) {
      this.options.log.info({ interface: before.interface, address: before.address, createdByHub: this.current.createdByHub }, 'pod address held')
    }
    return this.state
  }

  /** A dummy interface; a kernel built without the dummy driver gets a bridge with no ports, which holds a local address the same way. */
  private async add(): Promise<void> {
    try {
      await runIp(['link', 'add', this.options.interfaceName, 'type', this.kind])
    } catch (error) {
      if (this.kind !== 'dummy' || !/Unknown device type/i.test((error as Error).message)) throw error
      this.kind = 'bridge'
      this.options.log.warn({ interface: this.options.interfaceName }, 'the kernel has no dummy interfaces: a bridge with no ports holds the pod address')
      await runIp(['link', 'add', this.options.interfaceName, 'type', this.kind])
    }
  }

  private async show(): Promise<LinkInfo | undefined> {
    let out: string
    try {
      out = await runIp(['-j', '-d', 'addr', 'show', 'dev', this.options.interfaceName])
    } catch (error) {
      if (/does not exist|Cannot find device/i.test((error as Error).message)) return undefined
      throw error
    }
    const links = JSON.parse(out || '[]') as LinkInfo[]
    return links.find(l => l.ifname === this.options.interfaceName)
  }
}

/** The pod address as the hub uses it: what to advertise, and what to tell the operator. */
export interface PodAddress {
  /** the address, when the hub held it at start: the HTTPS port listens on it and the filters point pods at it */
  advertised: string | undefined
  /** why pods cannot reach the hub on it, now; undefined while it is held */
  problem(): string | undefined
  /** the problem, when the hub meant to keep it and could not (for /v1/readyz); a configuration's choice is no note */
  note(): string | undefined
  describe(): PodAddressState | { address: string | null; held: false; reason: string }
  close(): Promise<void>
}

/** Starts keeping the pod address, unless `problem` (from the configuration) says it is not to be kept. */
export async function keepPodAddress(
  options: { address: string | null; interfaceName: string; log: Logger },
  problem: string | undefined,
  tried = false,
): Promise<PodAddress> {
  if (problem !== undefined || options.address === null) {
    const reason = problem ?? 'turned off'
    const said = `pod address${options.address ? ` ${options.address}` : ''} not kept: ${reason}`
    return {
      advertised: undefined,
      problem: () => said,
      note: () => (tried ? said : undefined),
      describe: () => ({ address: options.address, held: false, reason }),
      close: async () => {},
    }
  }
  const keeper = new PodAddressKeeper({ address: options.address, interfaceName: options.interfaceName, log: options.log })
  const first = await keeper.ensure()
  // decided once, at start: the filters' rewrites and the HTTPS port's listeners are made from it
  if (!first.held) {
    await keeper.close()
    return keepPodAddress(options, `${first.reason} (on ${first.interface}; decided at start: restart the hub once it can be kept)`, true)
  }
  keeper.start()
  const podProblem = () => {
    const now = keeper.state
    return now.held ? undefined : `pod address ${now.address} on ${now.interface} not held: ${now.reason}`
  }
  return {
    advertised: first.address,
    problem: podProblem,
    note: podProblem,
    describe: () => keeper.state,
    close: () => keeper.close(),
  }
}
