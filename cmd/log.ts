// The hub's logger: JSON lines (what log collectors read on a node), or pino-pretty's coloured lines
// when a person watches the terminal. pino-pretty is a dev dependency, loaded only when asked for
// and absent from the image (build/bundle.mjs leaves it out), where the logs stay JSON lines.
import { pino } from 'pino'
import type { Logger, LoggerOptions } from 'pino'
import type { LogLevel } from '../lib/config.ts'
import { repeatLimitHook } from '../lib/log-limit.ts'

export interface LogOptions {
  level: LogLevel
  /** pino-pretty when it can be loaded; JSON lines otherwise */
  pretty: boolean
  /** called on every line logged at an enabled level (the demo waits for the logs to go quiet) */
  onLine?: () => void
}

export async function createLogger(options: LogOptions): Promise<Logger> {
  // repeated warnings and errors are summarized (lib/log-limit.ts)
  const limited = repeatLimitHook()
  const onLine = options.onLine
  const settings: LoggerOptions = {
    level: options.level,
    name: 'outpost',
    hooks: {
      logMethod(args, method, level) {
        onLine?.()
        limited.call(this, args, method, level)
      },
    },
  }
  if (options.pretty) {
    const pretty = await loadPretty()
    // A stream in this thread, written synchronously: a transport's worker thread would cost the
    // process a second V8 isolate, and its lines could land after the demo's banner.
    if (pretty) return pino(settings, pretty({ sync: true, colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,name' }))
  }
  return pino(settings)
}

async function loadPretty(): Promise<typeof import('pino-pretty') | undefined> {
  try {
    return (await import('pino-pretty')).default
  } catch {
    return undefined // not installed (the image): JSON lines, as in production
  }
}
