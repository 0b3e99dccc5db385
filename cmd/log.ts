// The hub's logger. JSON lines for a node's log collector; text lines for a person at a terminal
// (`--log-format=auto`, the default, picks by whether stdout is a terminal, as kube components do
// with --logging-format). The text format is pino's JSON line reformatted here, not pino-pretty:
// the image's bundle has no dev dependencies, and a person running it in a shell must still be
// able to read it.
import { pino } from 'pino'
import type { DestinationStream, Logger, LoggerOptions } from 'pino'
import type { LogFormat, LogLevel } from '../lib/config.ts'
import { repeatLimitHook } from '../lib/log-limit.ts'

export interface LogOptions {
  level: LogLevel
  /** 'auto': text when stdout is a terminal, JSON lines otherwise */
  format: LogFormat
  /** called on every line logged at an enabled level (the demo waits for the logs to go quiet) */
  onLine?: () => void
  /** lines are held here, not written, until it opens (the demo's banner comes first) */
  gate?: LogGate
  /** where lines go; stdout by default (tests) */
  out?: { write(text: string): unknown }
  /** whether `out` is a terminal; stdout's by default */
  tty?: boolean
}

export function resolveFormat(format: LogFormat, tty: boolean): 'text' | 'json' {
  return format === 'auto' ? (tty ? 'text' : 'json') : format
}

export function createLogger(options: LogOptions): Logger {
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
  const tty = options.tty ?? Boolean(process.stdout.isTTY)
  const text = resolveFormat(options.format, tty) === 'text'
  if (!text && !options.gate && !options.out) return pino(settings) // pino's own synchronous stdout writer, as before
  // synchronous like pino's default: a line logged just before process.exit is not lost
  const out = options.out ?? pino.destination({ fd: 1, sync: true })
  const colour = tty && !process.env.NO_COLOR
  const render = text ? (line: string) => textLine(line, colour) : (line: string) => line
  const gate = options.gate
  const stream: DestinationStream = {
    write(line: string) {
      if (gate?.holding) gate.hold(line)
      else out.write(render(line))
    },
  }
  gate?.attach(line => out.write(render(line)))
  return pino(settings, stream)
}

/**
 * Holds the JSON lines logged until it opens, then writes the ones `keep` returns (a line may be
 * rewritten) and everything after as it comes.
 */
export class LogGate {
  holding = true
  private readonly held: string[] = []
  private write: (line: string) => void = () => {}

  hold(line: string): void {
    this.held.push(line)
  }

  attach(write: (line: string) => void): void {
    this.write = write
  }

  open(keep: (held: LogEntry[]) => LogEntry[] = held => held): void {
    if (!this.holding) return
    this.holding = false
    const entries = this.held.splice(0).map(line => JSON.parse(line) as LogEntry)
    for (const entry of keep(entries)) this.write(`${JSON.stringify(entry)}\n`)
  }
}

/** A line as pino writes it. */
export interface LogEntry {
  level: number
  time: number
  msg?: string
  [key: string]: unknown
}

const levelNames: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' }
/** ANSI colours per level, for a terminal */
const levelColours: Record<number, string> = { 10: '90', 20: '90', 30: '32', 40: '33', 50: '31', 60: '35' }
/** pino's fields that say nothing to a person reading the line */
const hidden = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name', 'v'])

/** One pino JSON line as `HH:MM:SS.mmm LEVEL message key=value …` (local time, as a terminal's clock). */
export function textLine(line: string, colour = false): string {
  let entry: LogEntry
  try {
    entry = JSON.parse(line)
  } catch {
    return line.endsWith('\n') ? line : `${line}\n` // not pino's: as it is
  }
  const time = new Date(typeof entry.time === 'number' ? entry.time : Date.now())
  const pad = (n: number, width = 2) => String(n).padStart(width, '0')
  const clock = `${pad(time.getHours())}:${pad(time.getMinutes())}:${pad(time.getSeconds())}.${pad(time.getMilliseconds(), 3)}`
  const name = (levelNames[entry.level] ?? `L${entry.level}`).padEnd(5)
  const level = colour ? `\x1b[${levelColours[entry.level] ?? '0'}m${name}\x1b[0m` : name
  const fields = Object.entries(entry)
    // a value the message already says (the server in "apiserver … down") would only repeat it
    .filter(
      ([key, value]) =>
        !hidden.has(key) && value !== undefined && value !== null && !(typeof value === 'string' && value.length > 3 && entry.msg?.includes(value)),
    )
    .map(([key, value]) => `${key}=${fieldValue(key, value)}`)
  return `${[clock, level, entry.msg ?? '', ...fields].filter(Boolean).join(' ')}\n`
}

function fieldValue(key: string, value: unknown): string {
  // an Error as pino serializes it: its message says it; the stack is for the JSON lines
  if (key === 'err' && typeof value === 'object' && value !== null && 'message' in value) value = (value as { message: unknown }).message
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
  return JSON.stringify(value)
}
