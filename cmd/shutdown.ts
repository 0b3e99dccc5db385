// SIGTERM/SIGINT: stop gracefully within a bound; a second signal means the operator wants out now.
export interface ShutdownOptions {
  /** ends watches, flushes the cache, closes the servers */
  close(): Promise<unknown>
  exit(code: number): void
  log(signal: string): void
  /** past this, exit 1 whatever is still pending */
  deadlineMs: number
}

export function shutdownHandler(options: ShutdownOptions): (signal: string) => void {
  let stopping = false
  return signal => {
    if (stopping) return options.exit(1)
    stopping = true
    options.log(signal)
    const deadline = setTimeout(() => options.exit(1), options.deadlineMs)
    deadline.unref()
    options.close().then(
      () => {
        clearTimeout(deadline)
        options.exit(0)
      },
      () => options.exit(1),
    )
  }
}

/**
 * Started by npm (`npm start`, `npx tsx cmd/outpost.ts`), the hub runs under npm, sh and tsx, and
 * a signal to npm's PID does not reach it: npm and sh end, tsx and the hub stay, holding the ports.
 * npm leads the process group the hub is in; once that leader is gone, the command a person
 * started is, and `onGone` stops the hub. Not under npm (the static pod, systemd, nohup), nothing
 * is watched. Linux: the group is read from /proc.
 */
export function stopWithLauncher(env: Record<string, string | undefined>, onGone: () => void, readFile: (path: string) => string, everyMs = 1_000): () => void {
  if (!env.npm_execpath && !env.npm_command) return () => {}
  let group: number
  try {
    // /proc/self/stat: "pid (comm) state ppid pgrp …"; comm may hold spaces, so read after its ')'
    const stat = readFile('/proc/self/stat')
    group = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
  } catch {
    return () => {}
  }
  if (!Number.isInteger(group) || group <= 1 || group === process.pid) return () => {}
  const alive = () => {
    try {
      readFile(`/proc/${group}/stat`)
      return true
    } catch {
      return false
    }
  }
  const timer = setInterval(() => {
    if (alive()) return
    clearInterval(timer)
    onGone()
  }, everyMs)
  timer.unref()
  return () => clearInterval(timer)
}
