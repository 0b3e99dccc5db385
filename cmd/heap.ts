// V8's garbage collector, tuned by the hub itself because Node refuses these flags in NODE_OPTIONS.
// A setting on node's own command line wins.
//
// Old-generation growth. After each full GC, V8 sets the next limit at live × a growing factor,
// and caps that factor at 1.3 when --max-old-space-size is small (the static pod's 256). With the
// hub's ~33 MB live heap (10,000 slices indexed and watched), incremental marking then began again
// once the old generation had grown 1-4 MB past what the last GC left (--trace-incremental-marking):
// about 20 full mark-compacts in a 20,000-event watch burst, about a quarter of the hub's CPU there.
// At 1.4, measured side by side, the hub's CPU per JSON slice event went 126-141 → 110-116 µs with
// writes starting right after the list, and RSS idle and loaded stayed as they were (at 1.6 and more
// the loaded RSS rose by 20 MiB). The factor is then the same on every Node version (V8's own choice
// depends on the version and, in later ones, on the machine's memory).
//
// Concurrent marking. In that burst the hub's four V8 worker threads took as much CPU as its main
// thread (/proc per thread: 43-50 µs per event against 42-48), nearly all of it marking the old
// generation concurrently while the main thread kept changing it. Marked in steps on the main
// thread instead, the same work cost the process 77-87 µs per event, not 97-103 (Node 20; Node 22
// 80-87 against 92-94, Node 24 91 against 101): the main thread does about 10 µs more, the workers
// about 25 less. The hub shares a small node's cores with kubelet and the workloads, so its whole
// CPU is what counts; a main-thread pause stays one short step. Parallel marking and scavenging
// (the GC's own pauses, shortened by the workers) stay on: Node aborts when those are switched at
// run time.
import v8 from 'node:v8'

export const heapGrowingPercent = 40

interface Setting {
  /** the flag's name, as node's command line may spell it (with or without `no-`) */
  flag: string
  /** what the hub sets */
  value: string
}

const settings: readonly Setting[] = [
  { flag: 'heap-growing-percent', value: `--heap-growing-percent=${heapGrowingPercent}` },
  { flag: 'concurrent-marking', value: '--no-concurrent-marking' },
]

/** A flag's name as V8 compares it: '-' and '_' alike, without `--`, `no-` and a value. */
function flagName(arg: string): string {
  return arg
    .split('=')[0]
    .replaceAll('_', '-')
    .replace(/^--(no-)?/, '')
}

/**
 * Sets V8's GC flags, each unless node's own command line sets it; returns what it set. Runs
 * before the hub's libraries load (cmd/gc-settings.ts), while no collection is under way.
 */
export function tuneGarbageCollector(execArgv: readonly string[]): string[] {
  const given = new Set(execArgv.map(flagName))
  const set = settings.filter(s => !given.has(s.flag)).map(s => s.value)
  for (const value of set) v8.setFlagsFromString(value)
  return set
}
