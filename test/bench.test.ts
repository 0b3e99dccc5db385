// Keeps the bench from rotting: the quick bench (BENCH_QUICK=1) runs once, in a child process,
// and every row must have produced a number. No timing is asserted here: the figures and their
// targets are the bench's report, not a test (a loaded machine must not fail npm test).
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import type { Results, Row } from './bench/report.ts'

const root = fileURLToPath(new URL('..', import.meta.url))

/** every row the bench prints, by id */
const expectedRows = [
  'get.throughput', 'get.added-p99', 'get.cached', 'get.floor',
  'list.json.first', 'list.json.relist', 'list.json.pass-through',
  'list.protobuf.first', 'list.protobuf.relist', 'list.protobuf.pass-through',
  'watch.json.recorded', 'watch.json.pass-through', 'watch.protobuf.recorded', 'watch.protobuf.pass-through',
  'watchers.p99', 'rss.idle', 'rss.idle-floor', 'rss.loaded', 'coldstart', 'kill.lost', 'kill.load-errors',
  'fleet.watches', 'fleet.relists', 'fleet.relists-410', 'fleet.client-relists', 'fleet.bytes',
]

t.test('the quick bench produces a number for every row', async t => {
  // inside the repository (.tap/ is ignored by git), so the hub built there finds node_modules
  const dir = t.testdir({})
  const out = path.join(dir, 'results.json')
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/run.ts'], {
    cwd: root,
    env: { ...process.env, BENCH_QUICK: '1', BENCH_OUT: out, BENCH_BUILD_DIR: path.join(dir, 'dist') },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', chunk => (output += chunk))
  child.stderr.on('data', chunk => (output += chunk))
  const timer = setTimeout(() => child.kill('SIGKILL'), 110_000)
  const [code] = await once(child, 'exit')
  clearTimeout(timer)
  t.equal(code, 0, 'BENCH_QUICK=1 test/bench/run.ts exits 0', { output: output.slice(-6000) })
  if (code !== 0) return

  const results = JSON.parse(readFileSync(out, 'utf8')) as Results
  t.equal(results.quick, true, 'a quick run')
  const ids = results.rows.map(r => r.id)
  t.same([...ids].sort(), [...expectedRows].sort(), 'every row is there, and no group failed')
  const finite = (row: Row) => Number.isFinite(row.hub) && Number.isFinite(row.baseline)
  for (const row of results.rows) {
    if (row.na !== undefined && row.protobuf && !results.simulatorSpeaksProtobuf) {
      t.pass(`${row.id}: n/a while the simulator speaks no protobuf (${row.na})`)
      continue
    }
    t.ok(finite(row), `${row.id}: a number for the hub and its baseline`, { row })
  }
  t.ok(results.inProcess.length > 0 && results.inProcess.every(finite), 'the in-process filter rows have numbers')
})
