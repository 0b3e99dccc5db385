// Warnings and errors that repeat say so once in a while, not once each: a client sending 2,000 bad
// frames, or a disk failing every write, must not write 2,000 lines. Per message (the fixed text the
// code logs), the first `burst` lines of a window are written; the rest are counted, and a summary
// line says how many were left out when the window ends. Every one is counted for the metric
// outpost_log_lines_total. Info and debug are untouched. A pino logMethod hook, so that every child
// logger (admin, https, …) shares the limit.
import type { LogFn } from 'pino'

export interface LogLimits {
  /** lines per message and window */
  burst: number
  windowMs: number
}

export const defaultLogLimits: LogLimits = { burst: 5, windowMs: 60_000 }

/** distinct messages tracked; beyond, they share one entry (the code logs far fewer) */
const maxKinds = 200
const warnLevel = 40

interface Tally {
  windowStart: number
  written: number
  suppressed: number
  timer?: NodeJS.Timeout
}

/** Warnings and errors logged by this process, written or left out, per level: for /metrics. */
export const loggedLines = { warn: 0, error: 0, suppressed: 0 }

type Hook = (this: unknown, args: Parameters<LogFn>, method: LogFn, level: number) => void

/** pino's `hooks.logMethod`, limiting repeats as above. */
export function repeatLimitHook(limits: LogLimits = defaultLogLimits): Hook {
  const tallies = new Map<string, Tally>()
  return function (this: unknown, args, method, level) {
    if (level < warnLevel) return method.apply(this, args)
    loggedLines[level >= 50 ? 'error' : 'warn']++
    const text = typeof args[0] === 'string' ? args[0] : typeof args[1] === 'string' ? args[1] : ''
    const kind = tallies.has(text) || tallies.size < maxKinds ? text : 'other'
    const now = Date.now()
    let tally = tallies.get(kind)
    if (!tally || now - tally.windowStart >= limits.windowMs) {
      tally = { windowStart: now, written: 0, suppressed: 0 }
      tallies.set(kind, tally)
    }
    if (tally.written < limits.burst) {
      tally.written++
      return method.apply(this, args)
    }
    tally.suppressed++
    loggedLines.suppressed++
    if (tally.timer) return
    const current = tally
    const self = this
    current.timer = setTimeout(
      () => {
        current.timer = undefined
        ;(method as (this: unknown, obj: object, msg: string) => void).call(
          self,
          { suppressed: current.suppressed },
          `${current.suppressed} more like this left out in the last ${Math.round(limits.windowMs / 1000)} s: ${kind}`,
        )
      },
      Math.max(0, limits.windowMs - (now - current.windowStart)),
    )
    current.timer.unref()
  }
}
