// The hub's heap growth (cmd/heap.ts), checked on the Node that runs the tests: V8 reports the
// factor it used for the old generation's next limit (--trace-gc-verbose) after a full GC, in a
// process with the static pod's heap limit (where Node 20's V8 picks 1.3 on its own).
import { spawnSync } from 'node:child_process'
import { pathToFileURL, fileURLToPath } from 'node:url'
import t from 'tap'
import { heapGrowingPercent } from '../cmd/heap.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const heapModule = pathToFileURL(`${root}cmd/heap.ts`).href

/** Runs a process with the pod's 256 MB old space and returns what tuneHeapGrowth returned and the factors V8 used. */
function run(nodeArgs: string[]): { returned: string; factors: string[] } {
  const script = [
    `const { tuneHeapGrowth } = await import(${JSON.stringify(heapModule)})`,
    'const returned = tuneHeapGrowth(process.execArgv)',
    // live data enough for V8 to size the next limit from it
    'const held = []; for (let i = 0; i < 200000; i++) held.push({ i, name: "object-" + i })',
    'globalThis.gc()',
    'console.log("returned", String(returned), held.length)',
  ].join('\n')
  const result = spawnSync(process.execPath, ['--max-old-space-size=256', '--expose-gc', '--trace-gc-verbose', ...nodeArgs, '--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`node exited ${result.status}: ${result.stderr}`)
  const returned = /^returned (\S+)/m.exec(result.stdout)?.[1] ?? ''
  // Node 20 prints the factor it used on the limit's line ("[HeapController] Limit: old size: 24395
  // KB, new limit: 50260 KB (1.4)"), and an earlier line with V8's own choice; later V8s print the
  // factor used on a line of its own ("[HeapController] factor 1.4 based on mu=...")
  const onLimits = [...result.stdout.matchAll(/\[HeapController\] Limit: .*\(([\d.]+)\)/g)].map(m => m[1])
  const factors = onLimits.length > 0 ? onLimits : [...result.stdout.matchAll(/\[HeapController\] factor ([\d.]+) based on/g)].map(m => m[1])
  return { returned, factors }
}

t.test('the hub sets the factor to 1 + heapGrowingPercent / 100', async t => {
  const { returned, factors } = run([])
  t.equal(returned, `--heap-growing-percent=${heapGrowingPercent}`)
  t.ok(factors.length > 0, 'V8 reported a limit')
  t.ok(factors.every(f => Number(f) === 1 + heapGrowingPercent / 100), `factors ${factors.join(', ')}`)
})

t.test("a value on node's command line wins, spelled with '-' or '_'", async t => {
  for (const given of ['--heap-growing-percent=60', '--heap_growing_percent=60']) {
    const { returned, factors } = run([given])
    t.equal(returned, 'undefined', `${given}: the hub set nothing`)
    t.ok(factors.length > 0 && factors.every(f => f === '1.6'), `${given}: factors ${factors.join(', ')}`)
  }
})
