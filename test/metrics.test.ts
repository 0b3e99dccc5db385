// What a Prometheus user expects of /metrics: counters are counters named *_total (rate() and
// increase() work on them, and they never go down), prom-client's process_* and nodejs_* series (RSS
// against the pod's memory limit), outpost_build_info with the package's version, from the source
// as from the image's bundle, and label bounds written in the help.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import t from 'tap'
import { createMetrics } from '../lib/observe/metrics.ts'
import type { WatchCacheState } from '../lib/observe/metrics.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }

/** `# TYPE name type` of an exposition */
const types = (text: string) => new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(m => [m[1], m[2]]))
const sample = (text: string, series: string) => {
  const line = text.split('\n').find(l => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

t.test("every counter is a Counter named *_total, and none of the hub's other series is named so", async t => {
  const text = await createMetrics().registry.metrics()
  const all = types(text)
  t.ok(all.size > 40, `${all.size} metrics`)
  for (const [name, type] of all) {
    if (type === 'counter') t.match(name, /_total$/, `${name}: a counter, named *_total`)
    // (prom-client's nodejs_active_*_total are gauges of its own naming: a sum over kinds, not a count of events)
    else if (name.startsWith('outpost_')) t.notMatch(name, /_total$/, `${name}: a ${type}, not named *_total`)
  }
  t.equal(all.get('outpost_watch_cache_replayed_events_total'), 'counter')
  t.equal(all.get('outpost_watch_cache_expired_total'), 'counter')
  t.notOk(all.has('outpost_watch_cache_replayed_events') || all.has('outpost_watch_cache_expired'), 'the old gauges are gone')
})

t.test("prom-client's process and Node.js series, and the build's, in every hub's registry", async t => {
  // two hubs in one process (as tests and the bench run them): the process series are shared, not
  // registered twice (prom-client would throw)
  const [a, b] = [createMetrics(), createMetrics()]
  for (const [which, metrics] of [
    ['first', a],
    ['second', b],
  ] as const) {
    const text = await metrics.registry.metrics()
    const all = types(text)
    for (const name of ['process_resident_memory_bytes', 'process_open_fds', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_p99_seconds']) {
      t.equal(all.get(name), 'gauge', `${which}: ${name}`)
    }
    t.equal(all.get('process_cpu_seconds_total'), 'counter', `${which}: process_cpu_seconds_total`)
    t.equal(all.get('nodejs_gc_duration_seconds'), 'histogram', `${which}: nodejs_gc_duration_seconds`)
    t.ok((sample(text, 'process_resident_memory_bytes') ?? 0) > 10 * 2 ** 20, `${which}: RSS, in bytes`)
    t.equal(sample(text, `outpost_build_info{version="${pkg.version}",node_version="${process.version}"}`), 1, `${which}: outpost_build_info`)
  }
})

t.test('the label bounds are in the help', async t => {
  const text = await createMetrics().registry.metrics()
  const help = (name: string) => new RegExp(`^# HELP ${name} (.*)$`, 'm').exec(text)?.[1] ?? ''
  t.match(help('outpost_requests_total'), /component: .*the first 64 distinct.*then other/)
  t.match(help('outpost_requests_total'), /resource: .*the first 256 distinct, then other/)
  t.match(help('outpost_open_watches'), /component: .*the first 64 distinct/)
  t.match(help('outpost_cache_objects'), /--cache-components.*first 32/)
  t.match(help('outpost_watch_cache_expired_total'), /--shared-resources/)
})

t.test('the watch caches: replayed events and 410s only ever go up, across a cache dropped and made again', async t => {
  const metrics = createMetrics()
  const cache = (replayed: number, expired: number): WatchCacheState => ({
    resource: 'services',
    scope: 'all',
    format: 'json',
    watchers: 1,
    replayed,
    expired,
    windowBytes: 0,
  })
  let now: WatchCacheState[] = [cache(0, 0)]
  metrics.observeWatchCaches(() => now)
  const read = async () => {
    const text = await metrics.registry.metrics()
    const labels = '{resource="services",scope="all",format="json"}'
    return [sample(text, `outpost_watch_cache_replayed_events_total${labels}`), sample(text, `outpost_watch_cache_expired_total${labels}`)]
  }
  t.strictSame(await read(), [0, 0], 'at 0 while nothing happened: an alert on increase() has a series')
  now = [cache(5, 1)]
  t.strictSame(await read(), [5, 1])
  now = [cache(7, 1)]
  t.strictSame(await read(), [7, 1])
  now = [] // dropped: nobody used it
  t.strictSame(await read(), [7, 1], 'a dropped cache keeps its total')
  now = [cache(2, 1)] // made anew, counting from 0
  t.strictSame(await read(), [9, 2], "the new cache's counts add to it")
  now = [cache(1, 0)] // dropped and made again between two scrapes
  t.strictSame(await read(), [10, 2], 'a count that went down started again: all of it is new')
})

t.test("outpost_build_info's version in the image's bundle, which has no package.json beside it", async t => {
  // built as build/bundle.mjs builds it, outside the repository
  const dir = tempDir(t, 'outpost-build-info-')
  const outfile = path.join(dir, 'build-info.mjs')
  await build({
    absWorkingDir: root,
    stdin: { contents: "import { version } from './lib/observe/build-info.ts'; console.log(version)", resolveDir: root, loader: 'ts' },
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    banner: { js: "import { createRequire as __outpostCreateRequire } from 'node:module'; const require = __outpostCreateRequire(import.meta.url);" },
    minify: true,
    logLevel: 'warning',
  })
  const run = spawnSync(process.execPath, [outfile], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } })
  t.equal(run.status, 0, 'runs', { stderr: run.stderr })
  t.equal(run.stdout.trim(), pkg.version, 'the version, inlined')
})
