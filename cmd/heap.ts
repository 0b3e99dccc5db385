// V8's old-generation growth, set by the hub itself because Node refuses the flag in NODE_OPTIONS.
//
// After each full GC, V8 sets the next limit at live × a growing factor, and caps that factor at
// 1.3 when --max-old-space-size is small (the static pod's 256). With the hub's ~33 MB live heap
// (10,000 slices indexed and watched), incremental marking then began again once the old
// generation had grown 1-4 MB past what the last GC left (--trace-incremental-marking): about 20
// full mark-compacts in a 20,000-event watch burst, about a quarter of the hub's CPU there. At 1.4,
// measured side by side, the hub's CPU per JSON slice event went 126-141 → 110-116 µs with writes
// starting right after the list, and RSS idle and loaded stayed as they were (at 1.6 and more the
// loaded RSS rose by 20 MiB). The factor is then the same on every Node version (V8's own choice
// depends on the version and, in later ones, on the machine's memory).
import v8 from 'node:v8'

export const heapGrowingPercent = 40

const flag = '--heap-growing-percent'

/** Sets V8's heap growing factor unless node's own command line sets it; returns what it set. */
export function tuneHeapGrowth(execArgv: readonly string[]): string | undefined {
  // V8 reads '-' and '_' in a flag's name alike
  if (execArgv.some(arg => arg.split('=')[0].replaceAll('_', '-') === flag)) return undefined
  const setting = `${flag}=${heapGrowingPercent}`
  v8.setFlagsFromString(setting)
  return setting
}
