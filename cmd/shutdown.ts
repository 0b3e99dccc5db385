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

/** The fields of a /proc/<pid>/stat line the launcher watch reads; comm may hold spaces and parentheses. */
function statOf(line: string): { comm: string; parent: number; start: string } {
  const close = line.lastIndexOf(')')
  // after comm: state (field 3), ppid (4), …, starttime (22)
  const rest = line.slice(close + 2).split(' ')
  return { comm: line.slice(line.indexOf('(') + 1, close), parent: Number(rest[1]), start: rest[19] ?? '' }
}

/**
 * Started by npm (`npm start`, `npx tsx cmd/outpost.ts`), the hub runs under npm, sh and tsx, and
 * a signal to npm's PID does not reach it: npm and sh end, tsx and the hub stay, holding the ports.
 * So the nearest npm among the hub's ancestors (npm names itself `npm …`) is watched, and once it is
 * gone (or its PID is another process's), `onGone` stops the hub. Not the process group's leader:
 * a script run without job control (CI) leaves a group whose leader may be long gone. Not under
 * npm (the static pod, systemd, nohup), nothing is watched. Linux: read from /proc.
 */
export function stopWithLauncher(env: Record<string, string | undefined>, onGone: () => void, readFile: (path: string) => string, everyMs = 1_000): () => void {
  if (!env.npm_execpath && !env.npm_command) return () => {}
  let npm: { pid: number; start: string } | undefined
  try {
    for (let pid = statOf(readFile('/proc/self/stat')).parent, depth = 0; pid > 1 && depth < 32 && !npm; depth++) {
      const stat = statOf(readFile(`/proc/${pid}/stat`))
      if (stat.comm === 'npm' || stat.comm.startsWith('npm ')) npm = { pid, start: stat.start }
      pid = stat.parent
    }
  } catch {
    return () => {}
  }
  if (!npm) return () => {}
  const { pid, start } = npm
  const alive = () => {
    try {
      return statOf(readFile(`/proc/${pid}/stat`)).start === start
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
