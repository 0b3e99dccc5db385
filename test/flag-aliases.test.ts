// A YurtHub user's command line: every YurtHub flag outpost takes, what it sets, and what it
// refuses with a note; "did you mean" for a typo; --version through the real command.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { parseFlags, usage, UsageError } from '../cmd/flags.ts'
import { sameNameFlags, yurthubFlags } from '../cmd/flag-aliases.ts'
import { editDistance, suggest } from '../cmd/suggest.ts'
import { defaults, type HubConfig } from '../lib/config.ts'
import { filterNames } from '../filters/registry.ts'

const root = fileURLToPath(new URL('..', import.meta.url))

function config(argv: string[]): HubConfig {
  const result = parseFlags(argv, {})
  if (result.help) throw new Error('unexpected help')
  return result.config
}

function problem(argv: string[]): string {
  try {
    parseFlags(argv, {})
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    if (/[\r\n]/.test(err.message)) throw new Error(`not one line: ${err.message}`)
    return err.message
  }
  return 'no error'
}

// [the YurtHub flag as typed (without its value), its value, the config field, what it must hold]
const aliases: [string, string, keyof HubConfig, unknown][] = [
  ['--server-addr', 'https://10.0.0.1:6443', 'servers', ['https://10.0.0.1:6443/']],
  ['--server-addr', '10.0.0.1:6443,10.0.0.2:6443', 'servers', ['https://10.0.0.1:6443/', 'https://10.0.0.2:6443/']],
  ['--nodepool-name', 'hangzhou', 'nodePool', 'hangzhou'],
  ['--disk-cache-path', '/var/lib/outpost/yurt-cache', 'cacheDir', '/var/lib/outpost/yurt-cache'],
  ['--disabled-resource-filters', 'servicetopology,discardcloudservice', 'disabledFilters', ['servicetopology', 'discardcloudservice']],
  ['--enable-resource-filter', 'false', 'disabledFilters', [...filterNames]],
  ['--enable-resource-filter', 'true', 'disabledFilters', []],
  ['--proxy-port', '10300', 'port', 10300],
  ['--proxy-secure-port', '10301', 'securePort', 10301],
  ['--bind-proxy-address', '127.0.0.2', 'bindAddress', '127.0.0.2'],
  ['--serve-port', '10302', 'adminPort', 10302],
  ['--multiplexer-port', '10303', 'poolPort', 10303],
  ['--pool-scope-resources', '/v1/services,discovery.k8s.io/v1/endpointslices', 'sharedResources', ['v1/services', 'discovery.k8s.io/v1/endpointslices']],
  ['--max-requests-in-flight', '250', 'maxRequestsInflight', 250],
  ['--heartbeat-interval-seconds', '10', 'healthIntervalMs', 10_000],
  ['--heartbeat-timeout-seconds', '3', 'healthTimeoutMs', 3_000],
  ['--heartbeat-failed-retry', '5', 'healthFailures', 5],
  ['--heartbeat-healthy-threshold', '4', 'healthSuccesses', 4],
  ['--dummy-if-ip', '169.254.2.9', 'podAddress', '169.254.2.9'],
  ['--dummy-if-name', 'hub-dummy0', 'podInterface', 'hub-dummy0'],
  ['--enable-dummy-if', 'false', 'podAddress', null],
  ['--enable-dummy-if', 'true', 'podAddress', defaults.podAddress],
  ['--bootstrap-file', '/var/lib/yurthub/bootstrap-hub.conf', 'bootstrapKubeconfig', '/var/lib/yurthub/bootstrap-hub.conf'],
  ['-v', '0', 'logLevel', 'info'],
  ['-v', '2', 'logLevel', 'info'],
  ['-v', '3', 'logLevel', 'debug'],
  ['-v', '4', 'logLevel', 'debug'],
  ['-v', '5', 'logLevel', 'trace'],
  ['--v', '2', 'logLevel', 'info'],
  ['--v', '6', 'logLevel', 'trace'],
]

const shown = (v: unknown) => (Array.isArray(v) && v[0] instanceof URL ? v.map(u => u.href) : v)

t.test('each YurtHub alias, as --alias value and --alias=value, sets what its outpost flag sets', async t => {
  const switches = yurthubFlags.filter(f => f.boolean).map(f => `--${f.name}`)
  for (const [flag, raw, key, want] of aliases) {
    // a switch takes its value only with =, as in pflag (tested below)
    if (!switches.includes(flag)) t.strictSame(shown(config([flag, raw])[key]), want, `${flag} ${raw}`)
    t.strictSame(shown(config([`${flag}=${raw}`])[key]), want, `${flag}=${raw}`)
  }
  t.equal(config(['-v4']).logLevel, 'debug', "klog's -v4, as pflag takes a shorthand")
  t.equal(config(['--enable-dummy-if']).podAddress, defaults.podAddress, 'a bare YurtHub switch is true')
  t.equal(config(['--enable-resource-filter=0']).disabledFilters.length, filterNames.length, "Go's 0 is false")
})

t.test('every alias row of the table is tested above', async t => {
  const tested = new Set(aliases.map(([flag]) => flag.replace(/^-+/, '')))
  for (const f of yurthubFlags.filter(f => f.kind === 'alias')) t.ok(tested.has(f.name), `--${f.name} has a row`)
})

t.test("YurtHub's static pod command line, as its Helm chart writes it, runs outpost", async t => {
  // openyurt charts/yurthub/templates/yurthub-yurtstaticset.yaml (less --join-token / token bootstrap)
  const c = config([
    '--v=2',
    '--bind-address=127.0.0.1',
    '--server-addr=https://172.18.0.2:6443',
    '--node-name=kind-worker2',
    '--nodepool-name=shanghai',
    '--bootstrap-file=/var/lib/yurthub/bootstrap-hub.conf',
    '--working-mode=edge',
    '--namespace=kube-system',
  ])
  t.equal(c.logLevel, 'info')
  t.strictSame(
    c.servers.map(u => u.href),
    ['https://172.18.0.2:6443/'],
  )
  t.equal(c.nodeName, 'kind-worker2')
  t.equal(c.nodePool, 'shanghai')
  t.equal(c.bootstrapKubeconfig, '/var/lib/yurthub/bootstrap-hub.conf')
  t.equal(c.bindAddress, '127.0.0.1')
})

t.test('an alias and its outpost flag: the later one wins, a list adds up', async t => {
  t.equal(config(['--port', '1000', '--proxy-port', '2000']).port, 2000)
  t.equal(config(['--proxy-port', '2000', '--port', '1000']).port, 1000)
  t.strictSame(
    config(['--server', 'https://a:6443', '--server-addr', 'b:6443']).servers.map(u => u.href),
    ['https://a:6443/', 'https://b:6443/'],
  )
})

t.test('accepted with no effect: the value outpost already behaves as', async t => {
  const base = config([])
  for (const argv of [
    ['--working-mode=edge'],
    ['--bootstrap-mode', 'token'],
    ['--lb-mode=priority'],
    ['--namespace', 'kube-system'],
    ['--gc-frequency=120'],
    ['--profiling'],
    ['--profiling=false'],
    ['--enable-iptables=false'],
    ['--enable-node-pool=true'],
    ['--kubelet-health-grace-period=40s'],
    ['--min-request-timeout', '30m'],
    ['--log-flush-frequency=5s'],
  ]) {
    t.strictSame(config(argv), base, argv.join(' '))
  }
})

t.test('refused, in one line that says what to give instead', async t => {
  const cases: [string[], RegExp][] = [
    [['--working-mode=cloud'], /^--working-mode=cloud: outpost takes only edge \(it runs on edge nodes only\)$/],
    [['--working-mode', 'local'], /^--working-mode=local: outpost takes only edge/],
    [['--bootstrap-mode=kubeletcertificate'], /--kubeconfig \/etc\/kubernetes\/kubelet\.conf/],
    [['--lb-mode=rr'], /^--lb-mode=rr: outpost takes only priority \(it tries --server in order/],
    [['--enable-iptables'], /^--enable-iptables=true: outpost takes only false/],
    [['--join-token', 'abcdef.0123456789abcdef'], /^--join-token is YurtHub's; outpost has no such flag: give --bootstrap-kubeconfig/],
    [['--discovery-token-ca-cert-hash=sha256:00'], /--kubeconfig or --bootstrap-kubeconfig/],
    [['--discovery-token-unsafe-skip-ca-verification'], /always verified/],
    [['--root-dir=/var/lib/yurthub'], /give --cert-dir and --cache-dir/],
    [['--hub-cert-organizations=a'], /node's own/],
    [['--enable-pool-service-topology'], /--pool-sharing=on/],
    [['--host-control-plane-address=1.2.3.4:6443'], /give --server/],
    [['--vmodule=proxy=4'], /--log-level/],
  ]
  for (const [argv, want] of cases) t.match(problem(argv), want, argv.join(' '))
  for (const f of yurthubFlags.filter(f => f.kind === 'refused')) {
    t.ok(
      cases.some(([argv]) => argv[0].startsWith(`--${f.name}`)),
      `--${f.name} has a case`,
    )
  }
})

t.test("a bad value names the flag the user typed, and YurtHub's conversion", async t => {
  t.equal(problem(['-v', 'x']), 'invalid value "x" for -v: must be a klog verbosity, a whole number (0-2 info, 3-4 debug, 5+ trace)')
  t.equal(problem(['--heartbeat-interval-seconds=10s']), 'invalid value "10s" for --heartbeat-interval-seconds: must be a whole number of seconds, at least 1')
  t.equal(problem(['--proxy-port', '0']), 'invalid value "0" for --proxy-port: must be an integer from 1 to 65535')
  t.equal(
    problem(['--server-addr', 'ftp://x']),
    'invalid value "ftp://x" for --server-addr: must be an http or https URL with a host, like https://10.0.0.1:6443',
  )
  t.match(problem(['--disabled-resource-filters=nope']), /^invalid value "nope" for --disabled-resource-filters: must be one of /)
  t.equal(problem(['--enable-dummy-if=maybe']), 'invalid value "maybe" for --enable-dummy-if: must be true or false')
  t.equal(problem(['--nodepool-name']), 'missing value for --nodepool-name')
  t.equal(problem(['--enable-resource-filter', 'false']), 'unexpected argument "false"', 'a YurtHub switch takes its value only with =, as in pflag')
})

t.test('did you mean', async t => {
  const cases: [string, string][] = [
    ['--prot', 'unknown flag --prot; did you mean --port?'],
    ['--admin-prot', 'unknown flag --admin-prot; did you mean --admin-port?'],
    ['--cache_dir', 'unknown flag --cache_dir; did you mean --cache-dir?'],
    ['--CACHE-DIR', 'unknown flag --CACHE-DIR; did you mean --cache-dir?'],
    ['-cache-dir', 'unknown flag -cache-dir; did you mean --cache-dir?'],
    ['--admin-p', 'unknown flag --admin-p; did you mean --admin-port?'],
    ['--cache', 'unknown flag --cache; did you mean --cache-dir, --cache-components or --cache-memory?'],
    ['--logformat', 'unknown flag --logformat; did you mean --log-format?'],
    ['--severs', 'unknown flag --severs; did you mean --server?'],
    ['--server-adr', 'unknown flag --server-adr; did you mean --server-addr?'],
    ['--nodepoolname', 'unknown flag --nodepoolname; did you mean --nodepool-name?'],
    ['--verison', 'unknown flag --verison; did you mean --version?'],
    ['--no-such-flag', 'unknown flag --no-such-flag'],
    ['--x', 'unknown flag --x'],
  ]
  for (const [arg, want] of cases) t.equal(problem([arg, '1']), want, arg)
  t.equal(editDistance('prot', 'port'), 1, 'a swap of neighbours is one edit')
  t.strictSame(suggest('--zzzzzzzz', ['port']), [], 'nothing far away')
})

t.test('--version', async t => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }
  const result = parseFlags(['--version'], {})
  t.ok(result.help, 'nothing to run')
  const output = result.help ? result.output : ''
  t.equal(output.split('\n')[0], `outpost ${pkg.version}`)
  t.strictSame(parseFlags(['--version', '--no-such-flag'], { OUTPOST_PORT: 'junk' }), result, 'wins over other problems, as --help')
  t.equal(problem(['--version=true']), 'flag --version takes no value')
})

t.test('--version through the command: the version, the Kubernetes tested against, exit 0', async t => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'cmd/outpost.ts', '--version'], { cwd: root, encoding: 'utf8', timeout: 60_000 })
  t.equal(run.status, 0, run.stderr)
  t.equal(run.stderr, '')
  const lines = run.stdout.trimEnd().split('\n')
  t.equal(lines[0], `outpost ${pkg.version}`)
  t.match(lines[1], /^Kubernetes API v1\.24: a real kube-apiserver v1\.24\.0 .*test\/fixtures\/apiserver-v1\.24/)
  t.match(lines[2], /^Kubernetes clients 1\.33-1\.37: /)
  t.equal(lines.length, 3)
})

t.test('--help lists the YurtHub flags compactly', async t => {
  const start = usage.indexOf('YurtHub flags accepted')
  t.ok(start > 0, 'a YurtHub block')
  const block = usage.slice(start)
  for (const f of yurthubFlags) t.match(block, f.name === 'v' ? '-v N → --log-level' : `--${f.name}`, `lists --${f.name}`)
  for (const f of sameNameFlags.filter(f => f.note !== 'the same meaning')) t.match(block, `--${f.name}`)
  t.ok(block.split('\n').length <= 20, 'compact')
  t.strictSame(
    usage.split('\n').filter(l => l.length > 120),
    [],
    'lines fit 120 columns',
  )
})
