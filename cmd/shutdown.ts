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
