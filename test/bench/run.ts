// npm run bench: the built hub measured side by side with its baselines, every row in one run.
// Three processes: the apiserver simulator (test/bench/simulator-process.ts), the hub
// (node <build>/cmd/outpost.js) and this one, the load generator. Prints a table of
// hub / baseline ratios with each row's target, and writes bench/results.json.
//   BENCH_QUICK=1       small counts, one round: under a minute
//   --smoke             (npm run bench:smoke) quick, and exits 1 unless every row has its number
//                       (test/bench/smoke.ts); CI runs it after the tests. No target is judged.
//   BENCH_OUT=path      where the results go (default bench/results.json, quick: bench/results-quick.json)
//   BENCH_BUILD_DIR=dir build the hub there instead of dist/
//   BENCH_DEBUG=1       the hub's debug log and the simulator's output on this terminal
//   BENCH_HUB_ARGS      extra flags for every hub started (e.g. "--shared-watches=false")
//   BENCH_HUB_NODE_ARGS node options for the hub's processes (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p")
//   BENCH_HUB_LOGS=dir  the pool group's hubs write their whole output to dir/<node>.log
//   BENCH_ONLY=a,b      only these groups (their ids: get list watch watchers memory bundle kill disk
//                       multiplexer attack fleet pool reboot link real in-process); the smoke then checks only the rows of those groups
//   OUTPOST_BENCH_KUBE_APISERVER=path  a real kube-apiserver binary (../shared/tools/kube-apiserver/build.sh):
//                       group 15 measures the hub against it (etcd from PATH); without it the group is left out and
//                       results.json says why
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { request } from 'undici'
import { fullCounts, quickCounts } from './context.ts'
import type { Context } from './context.ts'
import { buildHub, cleanupScratch, hubExtraArgs, HubProcess, root, SimProcess } from './processes.ts'
import { protobufType } from './load.ts'
import { formatTable, machine, naRow, writeResults } from './report.ts'
import type { Results, Row } from './report.ts'
import { deliveryRows, getRows, listRows, watchRows } from './rows-proxy.ts'
import { buildBundle, bundleRows, killRows, memoryRows } from './rows-cache.ts'
import { listOverCapRows } from './rows-list-cap.ts'
import { compactionKillRows, damagedColdStartRows } from './rows-disk.ts'
import { inProcessRows } from './topology.ts'
import { localEndpointsRows } from './localendpoints.ts'
import { fleetRows } from './fleet.ts'
import { multiplexerRows } from './rows-multiplexer.ts'
import { attackRows } from './rows-attack.ts'
import { poolRows } from './rows-pool.ts'
import { rebootRows } from './rows-reboot.ts'
import { smokeProblems } from './smoke.ts'
import { linkRows } from './rows-link.ts'
import { realRows } from './rows-real.ts'
import { realApiserverEnv, realApiserverProblem } from './real-apiserver.ts'

const smoke = process.argv.includes('--smoke')
const quick = smoke || process.env.BENCH_QUICK === '1'
const counts = quick ? quickCounts : fullCounts
const out = process.env.BENCH_OUT ?? path.join(root, 'bench', quick ? 'results-quick.json' : 'results.json')
const started = performance.now()
const only = process.env.BENCH_ONLY?.split(',').map(g => g.trim())
const wanted = (id: string): boolean => only === undefined || only.includes(id)
const progress = (what: string) => process.stderr.write(`bench [${((performance.now() - started) / 1000).toFixed(1)} s] ${what}\n`)

/** The commit measured (BENCH_COMMIT names it when running from an export of a commit, not a work tree). */
function gitState(): { commit: string; dirty: boolean } {
  if (process.env.BENCH_COMMIT) return { commit: process.env.BENCH_COMMIT, dirty: false }
  const git = (...args: string[]) => spawnSync('git', args, { cwd: root, encoding: 'utf8' }).stdout?.trim() ?? ''
  return {
    commit: git('rev-parse', 'HEAD') || 'unknown',
    dirty: git('status', '--porcelain', '--untracked-files=no', '--', 'lib', 'cmd', 'filters', 'certs') !== '',
  }
}

/** Why the protobuf rows have no figure, or undefined when the simulator answers protobuf. */
async function protobufProblem(simUrl: string): Promise<string | undefined> {
  const res = await request(`${simUrl}/apis/discovery.k8s.io/v1/endpointslices?limit=1`, { headers: { accept: protobufType } })
  await res.body.dump()
  const type = String(res.headers['content-type'] ?? '')
  if (res.statusCode === 406) return `the simulator answers 406 to Accept: ${protobufType} (it speaks JSON only)`
  if (res.statusCode !== 200 || !type.startsWith(protobufType)) return `the simulator answered ${res.statusCode} ${type} to Accept: ${protobufType}`
  return undefined
}

/** Runs one group of rows; if it throws, one n/a row says so and the run goes on. */
async function group(rows: Row[], id: string, what: string, measure: () => Promise<Row[]>): Promise<void> {
  if (!wanted(id)) return
  progress(what)
  try {
    rows.push(...(await measure()))
  } catch (error) {
    console.error(`bench: ${what}: ${(error as Error).stack}`)
    rows.push(naRow({ id: `${id}.failed`, name: what, unit: '', baselineLabel: '' }, 'lower', '—', `failed: ${(error as Error).message.split('\n')[0]}`))
  }
}

/** The groups that use the simulator process (seeded with the bench's cluster), and those of them that share one hub. */
const simGroups = ['get', 'list', 'watch', 'watchers', 'memory', 'bundle', 'kill', 'disk', 'multiplexer', 'attack']
const simHubGroups = ['get', 'list', 'watch', 'watchers']
const wantedAny = (ids: string[]): boolean => ids.some(wanted)

/** Rows 1-7, 9, 10 and 12, against the simulator process; says why the protobuf rows have no figure, if so. */
async function simulatorRows(sim: SimProcess, hubEntry: string, bundleEntry: string | undefined, rows: Row[]): Promise<string | undefined> {
  progress(`simulator: ${counts.slices} slices, ${counts.pods} pods, ${counts.configMaps} ConfigMaps`)
  await sim.call('seed', { slices: counts.slices, pods: counts.pods, configMaps: counts.configMaps })
  const noProtobuf = await protobufProblem(sim.url)
  if (noProtobuf) progress(`protobuf rows n/a: ${noProtobuf}`)
  const ctx: Context = { sim, hubEntry, bundleEntry, counts, noProtobuf }

  if (wantedAny(simHubGroups)) {
    const hub = await HubProcess.start(hubEntry, { server: sim.url })
    try {
      await group(rows, 'get', '1. GET of a small object', () => getRows(ctx, hub))
      await group(rows, 'list', '2. LIST of the slices (a fresh hub per round)', () => listRows(ctx))
      await group(rows, 'watch', '3. watch streams of slice events', () => watchRows(ctx, hub))
      await group(rows, 'watchers', '4. delivery delay to many watchers', () => deliveryRows(ctx, hub))
    } finally {
      await hub.stop()
    }
  }
  await group(rows, 'memory', '5-6. RSS idle and loaded, cold start offline; RSS while a list over --max-list-bytes is relayed', async () => [
    ...(await memoryRows(ctx)),
    ...(await listOverCapRows(ctx, quick ? 64 : 256)),
  ])
  await group(rows, 'bundle', "5-6 for the image's build: the bundle (npm run bundle) vs dist/, RSS idle and at start, cold start offline", () =>
    bundleRows(ctx),
  )
  await group(rows, 'kill', '7. SIGKILL mid-burst, restart offline', () => killRows(ctx))
  await group(rows, 'disk', '9. the disk cache under faults: kill -9 mid-compaction on a full disk; a cold start on a damaged snapshot', async () => [
    ...(await compactionKillRows(quick ? 2_000 : 10_000)),
    ...(await damagedColdStartRows(ctx, quick ? 2_000 : 20_000)),
  ])
  await group(rows, 'multiplexer', '10. the multiplexer: selectors on one upstream watch; GET and LIST at resourceVersion=0 from memory', () =>
    multiplexerRows(ctx, { selectors: quick ? 20 : 300 }),
  )
  await group(
    rows,
    'attack',
    '12. local clients that misbehave: watches and lists never read, reading watches, paged lists never continued, 1,000 connections',
    () =>
      attackRows(ctx, {
        unread: 50,
        holdMs: quick ? 3_000 : 20_000,
        // quick: a short --stall-timeout, so that its row has its figure within the smoke's minute
        afterStallMs: quick ? 8_000 : 70_000,
        unreadHubArgs: quick ? ['--stall-timeout', '5s'] : [],
        readingWatches: 20,
        pagedLists: 30,
        connections: 1_000,
        eventProbes: quick ? 3 : 5,
      }),
  )
  return noProtobuf
}

async function main(): Promise<number> {
  progress(`npm run build${process.env.BENCH_BUILD_DIR ? ` (into ${process.env.BENCH_BUILD_DIR})` : ''}`)
  const hubEntry = buildHub(process.env.BENCH_BUILD_DIR)
  const noRealApiserver = realApiserverProblem()
  const bundled = wanted('bundle') || (wanted('real') && !noRealApiserver)
  if (bundled) progress('npm run bundle')
  const bundle = bundled ? buildBundle() : undefined
  const rows: Row[] = []
  let inProcess: Row[] = []
  let noProtobuf: string | undefined
  const sim = wantedAny(simGroups) ? await SimProcess.start() : undefined
  try {
    if (sim) noProtobuf = await simulatorRows(sim, hubEntry, bundle?.entry, rows)
  } finally {
    await sim?.close()
    cleanupScratch()
  }
  await group(rows, 'fleet', `8. a fleet of ${counts.fleetHubs} hubs through two outages, shared watch caches vs not`, () =>
    fleetRows({
      hubs: counts.fleetHubs,
      outageMs: counts.fleetOutageMs,
      services: quick ? 50 : 200,
      healthIntervalMs: quick ? 200 : 1_000,
      settleMs: quick ? 500 : 5_000,
    }),
  )
  // 20 hubs, not the issue's 40: every hub is a node process (a leader must die by SIGKILL), and on a
  // 2-core box 40 of them take a minute per run to start and starve each other's TLS accepts
  const poolHubs = quick ? 4 : 10
  await group(rows, 'pool', `11. leader hubs: ${2 * poolHubs} hubs in 2 pools through leader kills and a cloud outage, --pool-sharing on vs off`, () =>
    poolRows(
      hubEntry,
      {
        pools: 2,
        hubsPerPool: poolHubs,
        services: quick ? 20 : 100,
        churnIntervalMs: 250,
        steadyMs: quick ? 3_000 : 8_000,
        outageMs: quick ? 3_000 : 6_000,
        settleMs: quick ? 1_000 : 1_500,
        timings: { leaseDurationMs: 5_000, renewDeadlineMs: 3_000, retryPeriodMs: 500, healthIntervalMs: 1_000 },
        resyncCapMs: 20_000,
        scaleNote: quick
          ? undefined
          : "2 × 10 hubs, not the issue's 2 × 20: each hub is a node process of the build (a leader must die by SIGKILL), and 40 of them on a 2-core box take a minute per run to start and starve each other (a new leader's TLS accepts time out)",
      },
      progress,
    ),
  )
  // the node's pods beside a few Services of other nodes, then beside many: what an overlay change costs grows with the slices cached
  const rebootPods = quick ? 20 : 100
  const reboot = { pods: rebootPods, podsPerService: 10, othersPerSlice: 5, concurrency: 10, settleMs: quick ? 500 : 2_000 }
  await group(rows, 'reboot', `13. offline after a reboot: ${rebootPods} pods' status written by kubelet → kube-proxy's watch events`, async () => [
    ...(await rebootRows(hubEntry, 'status-to-event', { ...reboot, otherServices: quick ? 10 : 50 }, progress)),
    ...(await rebootRows(hubEntry, 'status-to-event-many-slices', { ...reboot, otherServices: quick ? 200 : 1_000 }, progress)),
  ])
  await group(rows, 'link', '14. the link to the cloud: HTTP/2 vs HTTP/1.1 (--http2=false), per-object watches, outages, relayed GETs, idle bytes', () =>
    linkRows(
      hubEntry,
      { watches: [100, quick ? 300 : 1_000], outages: quick ? 1 : 3, getMs: quick ? 2_000 : 10_000, idleMs: quick ? 10_000 : 60_000 },
      progress,
    ),
  )
  if (wanted('real') && noRealApiserver) progress(`15. real kube-apiserver rows left out: ${noRealApiserver}`)
  if (!noRealApiserver)
    await group(rows, 'real', `15. against a real kube-apiserver (${process.env[realApiserverEnv]}): reads from memory, first lists, idle RSS, WatchList`, () =>
      realRows(hubEntry, bundle?.entry, { seconds: quick ? 1 : 4, rounds: quick ? 1 : 3, idleMs: quick ? 2_000 : 20_000, watches: quick ? 5 : 20 }, progress),
    )
  cleanupScratch()
  bundle?.remove()
  if (wanted('in-process')) {
    progress('in-process filter rows')
    inProcess = [...(await inProcessRows(quick ? 5_000 : 50_000)), ...localEndpointsRows(quick ? 1_000 : 10_000)]
  }

  const results: Results = {
    quick,
    ...gitState(),
    hubArgs: hubExtraArgs,
    startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
    seconds: Math.round((performance.now() - started) / 100) / 10,
    machine: machine(),
    counts: { ...counts },
    simulatorSpeaksProtobuf: noProtobuf === undefined,
    realApiserver: noRealApiserver ?? process.env[realApiserverEnv]!,
    rows,
    inProcess,
  }
  writeResults(out, results)
  console.log(`\n${formatTable(`outpost bench${quick ? ' (BENCH_QUICK)' : ''}: the built hub in its own process vs its baseline, same run`, rows)}`)
  console.log(`\n${formatTable('filters in-process (no network): service topology per watch frame, the localendpoints byte check per slice', inProcess)}`)
  const missed = rows.filter(r => r.met === false).map(r => r.id)
  console.log(
    `\n${results.seconds} s, hub built from ${results.commit.slice(0, 10)}${results.dirty ? ' + uncommitted changes' : ''}${hubExtraArgs.length > 0 ? ` with ${hubExtraArgs.join(' ')}` : ''}, on ${results.machine.cpus} x ${results.machine.cpuModel} (load ${results.machine.loadAverage.join(' ')}); written to ${path.relative(process.cwd(), out)}`,
  )
  console.log(missed.length === 0 ? 'every target met' : `targets missed: ${missed.join(', ')}`)
  if (smoke) {
    const problems = smokeProblems(results, only)
    for (const problem of problems) console.log(`bench smoke: ${problem}`)
    console.log(
      problems.length === 0
        ? `bench smoke: every row has its number (${results.rows.length} rows, ${inProcess.length} in-process)`
        : `bench smoke: ${problems.length} problems`,
    )
    return problems.length === 0 ? 0 : 1
  }
  return 0
}

main().then(
  code => process.exit(code),
  error => {
    console.error(error)
    process.exit(1)
  },
)
