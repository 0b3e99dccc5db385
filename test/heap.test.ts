// The hub's GC settings (cmd/heap.ts), checked on the Node that runs the tests: V8 reports the
// factor it used for the old generation's next limit (--trace-gc-verbose) after a full GC, in a
// process with the static pod's heap limit (where Node 20's V8 picks 1.3 on its own); and a heap
// churned through incremental mark-compacts with concurrent marking switched off at run time.
import { spawnSync } from 'node:child_process'
import { pathToFileURL, fileURLToPath } from 'node:url'
import t from 'tap'
import { heapGrowingPercent } from '../cmd/heap.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const heapModule = pathToFileURL(`${root}cmd/heap.ts`).href

/**
 * Runs a process with the pod's 256 MB old space and returns what tuneGarbageCollector returned,
 * the factors V8 used, and how many mark-compacts it ran.
 */
function run(nodeArgs: string[], churn = false): { returned: string; factors: string[]; markCompacts: number } {
  const script = [
    `const { tuneGarbageCollector } = await import(${JSON.stringify(heapModule)})`,
    'const returned = tuneGarbageCollector(process.execArgv)',
    // live data enough for V8 to size the next limit from it
    'const held = []; for (let i = 0; i < 200000; i++) held.push({ i, name: "object-" + i })',
    'globalThis.gc()',
    // old objects replaced as a watch burst replaces cached ones: the old generation grows until
    // incremental marking starts on its own; churned until V8 has run three mark-compacts (its gc
    // entries, read between rounds), not for a fixed number of rounds
    ...(churn
      ? [
          'const { PerformanceObserver, constants } = await import("node:perf_hooks")',
          'let majors = 0',
          'const observer = new PerformanceObserver(list => { for (const e of list.getEntries()) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++ })',
          'observer.observe({ entryTypes: ["gc"] })',
          'for (let round = 0; round < 200 && majors < 3; round++) {',
          '  for (let i = 0; i < 200000; i++) held[i] = { i, name: "object-" + round + "-" + i }',
          '  await new Promise(resolve => setImmediate(resolve))',
          '}',
          'observer.disconnect()',
        ]
      : []),
    'console.log("returned", returned.join(",") || "nothing", held.length)',
  ].join('\n')
  const result = spawnSync(
    process.execPath,
    ['--max-old-space-size=256', '--expose-gc', '--trace-gc', '--trace-gc-verbose', ...nodeArgs, '--import', 'tsx', '--input-type=module', '-e', script],
    { cwd: root, encoding: 'utf8' },
  )
  if (result.status !== 0) throw new Error(`node exited ${result.status}: ${result.stderr}`)
  const returned = /^returned (\S+)/m.exec(result.stdout)?.[1] ?? ''
  const markCompacts = [...result.stdout.matchAll(/: Mark-Compact /g)].length
  // Node 20 prints the factor it used on the limit's line ("[HeapController] Limit: old size: 24395
  // KB, new limit: 50260 KB (1.4)"), and an earlier line with V8's own choice; later V8s print the
  // factor used on a line of its own ("[HeapController] factor 1.4 based on mu=...")
  const onLimits = [...result.stdout.matchAll(/\[HeapController\] Limit: .*\(([\d.]+)\)/g)].map(m => m[1])
  const factors = onLimits.length > 0 ? onLimits : [...result.stdout.matchAll(/\[HeapController\] factor ([\d.]+) based on/g)].map(m => m[1])
  return { returned, factors, markCompacts }
}

const growth = `--heap-growing-percent=${heapGrowingPercent}`
const noConcurrentMarking = '--no-concurrent-marking'

t.test('the hub sets the factor to 1 + heapGrowingPercent / 100', async t => {
  const { returned, factors } = run([])
  t.equal(returned, `${growth},${noConcurrentMarking}`)
  t.ok(factors.length > 0, 'V8 reported a limit')
  t.ok(
    factors.every(f => Number(f) === 1 + heapGrowingPercent / 100),
    `factors ${factors.join(', ')}`,
  )
})

t.test("a value on node's command line wins, spelled with '-' or '_'", async t => {
  for (const given of ['--heap-growing-percent=60', '--heap_growing_percent=60']) {
    const { returned, factors } = run([given])
    t.equal(returned, noConcurrentMarking, `${given}: the hub did not set the factor`)
    t.ok(factors.length > 0 && factors.every(f => f === '1.6'), `${given}: factors ${factors.join(', ')}`)
  }
})

t.test("concurrent marking: off unless node's command line says, and the heap is still collected", async t => {
  for (const given of ['--concurrent-marking', '--no-concurrent-marking', '--concurrent_marking']) {
    t.equal(run([given]).returned, growth, `${given}: the hub left it`)
  }
  // Node aborts a process whose GC flags change at run time in a way V8 does not expect (it does
  // for parallel marking): a heap churned through incremental mark-compacts shows this one is not
  const { returned, markCompacts } = run([], true)
  t.equal(returned, `${growth},${noConcurrentMarking}`)
  t.ok(markCompacts >= 3, `${markCompacts} mark-compacts after the settings, and the process exited 0`)
})
