// V8's old-generation growth, set by the hub itself because Node refuses the flag in NODE_OPTIONS.
//
// After each full GC, V8 sets the next limit at live × a growing factor, and caps that factor at
// 1.3 when --max-old-space-size is small (the static pod's 256). It starts the next incremental
// marking as soon as the room left under that limit is no larger than the young generation. With
// the hub's ~35 MB live heap (10,000 slices indexed and watched) and 8 MiB semi-spaces, a full
// mark-compact then ran after every ~3 MB promoted: 20 of them in a 20,000-event watch burst, about
// a quarter of the hub's CPU. At 1.4 they run about half as often; `npm run bench` measured the
// hub's CPU per JSON slice event 127-136 → 113-119 µs, and RSS idle and loaded unchanged (60 or
// more raised the loaded RSS by 20 MiB). The factor is then the same on every Node version (V8's
// own choice depends on the version and, in later ones, on the machine's memory).
import v8 from 'node:v8'

export const heapGrowingPercent = 40

const flag = '--heap-growing-percent'

/** Sets V8's heap growing factor unless node's own command line sets it; returns what it set. */
export function tuneHeapGrowth(execArgv: readonly string[]): string | undefined {
  if (execArgv.some(arg => arg === flag || arg.startsWith(`${flag}=`) || arg.startsWith('--heap_growing_percent'))) return undefined
  const setting = `${flag}=${heapGrowingPercent}`
  v8.setFlagsFromString(setting)
  return setting
}
