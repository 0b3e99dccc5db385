import os from 'node:os'
import t from 'tap'
import { flags, parseFlags, usage, UsageError } from '../cmd/flags.ts'
import { defaults, type HubConfig } from '../lib/config.ts'

/** a subtest's `t` */
type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

function config(argv: string[], env: Record<string, string | undefined> = {}): HubConfig {
  const result = parseFlags(argv, env)
  if (result.help) throw new Error('unexpected help')
  return result.config
}

/** The UsageError message parseFlags throws, checking it is a UsageError and one line. */
function usageError(t: Tap, argv: string[], env: Record<string, string | undefined> = {}): string {
  try {
    parseFlags(argv, env)
  } catch (err) {
    t.type(err, UsageError, 'a UsageError')
    const message = (err as Error).message
    t.notMatch(message, /[\r\n]/, 'one line')
    t.ok(message.length > 0 && message.length < 240, 'short')
    return message
  }
  t.fail(`no error for ${JSON.stringify(argv)} ${JSON.stringify(env)}`)
  return ''
}

t.test('defaults', async t => {
  const c = config([])
  t.strictSame(c.servers, [])
  t.equal(c.kubeconfig, undefined)
  t.equal(c.nodeName, os.hostname().toLowerCase())
  t.equal(c.nodePool, undefined)
  t.equal(c.bindAddress, '127.0.0.1')
  t.equal(c.port, 10261)
  t.equal(c.adminPort, 10267)
  t.equal(c.cacheDir, '/var/lib/outpost/cache')
  t.equal(c.logLevel, 'info')
  t.strictSame(defaults, {
    bindAddress: '127.0.0.1',
    port: 10261,
    insecureAllowRemote: false,
    adminAddress: '127.0.0.1',
    adminPort: 10267,
    securePort: 10268,
    secureBindAddress: '127.0.0.1',
    podAddress: '169.254.2.1',
    podInterface: 'outpost0',
    servingCert: 'self-signed',
    certDir: '/var/lib/outpost/pki',
    nodeIps: [],
    maxRequestBytes: 3 * 1024 * 1024,
    maxRequestsInflight: 200,
    maxLongRunningRequests: 1000,
    maxWatchBacklogBytes: 4194304,
    stallTimeoutMs: 60_000,
    podOverlayTtlMs: 300_000,
    nodeCondition: true,
    maxListBytes: 134217728,
    headerTimeoutMs: 10_000,
    idleTimeoutMs: 90_000,
    cacheDir: '/var/lib/outpost/cache',
    logLevel: 'info',
    logFormat: 'auto',
    cacheComponents: ['kubelet', 'kube-proxy', 'coredns', 'flanneld', 'outpost'],
    cacheMemoryMiB: 256,
    topologyComponents: ['kube-proxy', 'coredns', 'nginx-ingress-controller'],
    healthIntervalMs: 5000,
    healthTimeoutMs: 2000,
    healthFailures: 3,
    healthSuccesses: 1,
    http2: true,
    http2MaxStreamsPerConnection: 1_000,
    http2ReadIdleTimeoutMs: 30_000,
    http2PingTimeoutMs: 15_000,
    watchSilenceTimeoutMs: 150_000,
    sharedWatches: true,
    sharedResources: ['v1/services', 'v1/endpoints', 'v1/nodes', 'v1/pods', 'discovery.k8s.io/v1/endpointslices', 'discovery.k8s.io/v1beta1/endpointslices'],
    filters: [
      'localendpoints',
      'servicetopology',
      'masterservice',
      'serviceenvupdater',
      'forwardkubesvctraffic',
      'discardcloudservice',
      'nodeportisolation',
      'inclusterconfig',
    ],
    disabledFilters: [],
    filterComponents: {},
    poolSharing: false,
    poolPort: 10269,
    poolBindAddress: '0.0.0.0',
    poolLeaseNamespace: 'kube-system',
    poolLeaseDurationMs: 15_000,
    poolRenewDeadlineMs: 10_000,
    poolRetryPeriodMs: 2_000,
  })
})

// [flag, raw value, the config field, the parsed value]
const each: [string, string, keyof HubConfig, unknown][] = [
  ['kubeconfig', '/etc/outpost/kubelet.conf', 'kubeconfig', '/etc/outpost/kubelet.conf'],
  ['kubeconfig', 'relative/kubeconfig', 'kubeconfig', 'relative/kubeconfig'],
  ['node-name', 'kind-worker2', 'nodeName', 'kind-worker2'],
  ['node-name', 'edge-1.example.com', 'nodeName', 'edge-1.example.com'],
  ['nodepool', 'shanghai', 'nodePool', 'shanghai'],
  ['nodepool', 'Pool_A.1', 'nodePool', 'Pool_A.1'],
  ['bind-address', '127.0.0.2', 'bindAddress', '127.0.0.2'],
  ['bind-address', '::1', 'bindAddress', '::1'],
  ['secure-bind-address', '169.254.2.1', 'secureBindAddress', '169.254.2.1'],
  ['secure-bind-address', '0.0.0.0', 'secureBindAddress', '0.0.0.0'],
  ['secure-port', '6443', 'securePort', 6443],
  ['secure-port', '0', 'securePort', null],
  ['admin-address', '0.0.0.0', 'adminAddress', '0.0.0.0'],
  ['serving-cert', 'csr', 'servingCert', 'csr'],
  ['cert-dir', '/etc/outpost/pki', 'certDir', '/etc/outpost/pki'],
  ['node-ip', '10.0.0.5,fd00::5', 'nodeIps', ['10.0.0.5', 'fd00::5']],
  ['client-ca-file', '/etc/kubernetes/pki/ca.crt', 'clientCaFile', '/etc/kubernetes/pki/ca.crt'],
  ['bootstrap-kubeconfig', '/etc/kubernetes/bootstrap-kubelet.conf', 'bootstrapKubeconfig', '/etc/kubernetes/bootstrap-kubelet.conf'],
  ['max-request-bytes', '1048576', 'maxRequestBytes', 1048576],
  ['header-timeout', '5s', 'headerTimeoutMs', 5000],
  ['idle-timeout', '2m', 'idleTimeoutMs', 120_000],
  ['port', '10300', 'port', 10300],
  ['port', '1', 'port', 1],
  ['port', '65535', 'port', 65535],
  ['admin-port', '10400', 'adminPort', 10400],
  ['cache-dir', '/tmp/outpost cache', 'cacheDir', '/tmp/outpost cache'],
  ['log-level', 'debug', 'logLevel', 'debug'],
  ['log-level', 'silent', 'logLevel', 'silent'],
  ['log-level', 'trace', 'logLevel', 'trace'],
  ['log-format', 'text', 'logFormat', 'text'],
  ['log-format', 'json', 'logFormat', 'json'],
  ['log-format', 'auto', 'logFormat', 'auto'],
  ['cache-components', 'kubelet,Kube-Proxy', 'cacheComponents', ['kubelet', 'kube-proxy']],
  ['cache-components', '*', 'cacheComponents', ['*']],
  ['cache-memory', '64', 'cacheMemoryMiB', 64],
  ['watch-window-memory', '16', 'watchWindowMiB', 16],
  ['health-interval', '500ms', 'healthIntervalMs', 500],
  ['health-interval', '2m', 'healthIntervalMs', 120_000],
  ['health-timeout', '3s', 'healthTimeoutMs', 3000],
  ['health-failures', '5', 'healthFailures', 5],
  ['health-successes', '1', 'healthSuccesses', 1],
  ['watch-silence', '90s', 'watchSilenceTimeoutMs', 90_000],
  ['filters', 'servicetopology,masterservice', 'filters', ['servicetopology', 'masterservice']],
  [
    'filters',
    'all',
    'filters',
    [
      'localendpoints',
      'servicetopology',
      'masterservice',
      'serviceenvupdater',
      'forwardkubesvctraffic',
      'discardcloudservice',
      'nodeportisolation',
      'inclusterconfig',
    ],
  ],
  ['disable-filters', 'discardcloudservice', 'disabledFilters', ['discardcloudservice']],
  ['filter-components', 'masterservice=kubelet,my-agent', 'filterComponents', { masterservice: ['kubelet', 'my-agent'] }],
  ['advertise-address', '169.254.2.1', 'advertiseAddress', '169.254.2.1'],
  ['pod-address', '169.254.20.10', 'podAddress', '169.254.20.10'],
  ['pod-address', 'off', 'podAddress', null],
  ['max-requests-inflight', '50', 'maxRequestsInflight', 50],
  ['max-requests-inflight', '0', 'maxRequestsInflight', 0],
  ['max-long-running', '300', 'maxLongRunningRequests', 300],
  ['max-watch-backlog', '1048576', 'maxWatchBacklogBytes', 1048576],
  ['stall-timeout', '15s', 'stallTimeoutMs', 15_000],
  ['pod-overlay-ttl', '90s', 'podOverlayTtlMs', 90_000],
  ['max-list-bytes', '33554432', 'maxListBytes', 33554432],
  ['pod-interface', 'edge-hub0', 'podInterface', 'edge-hub0'],
  ['pool-sharing', 'on', 'poolSharing', true],
  ['pool-sharing', 'off', 'poolSharing', false],
  ['pool-port', '10300', 'poolPort', 10300],
  ['pool-port', '0', 'poolPort', 0],
  ['pool-bind-address', '192.168.1.7', 'poolBindAddress', '192.168.1.7'],
  ['pool-advertise-address', '192.168.1.7', 'poolAdvertiseAddress', '192.168.1.7'],
  ['pool-lease-namespace', 'edge-system', 'poolLeaseNamespace', 'edge-system'],
  ['pool-lease-name', 'hubs.shanghai', 'poolLeaseName', 'hubs.shanghai'],
  ['pool-client-ca-file', '/etc/kubernetes/pki/ca.crt', 'poolClientCaFile', '/etc/kubernetes/pki/ca.crt'],
  ['pool-lease-duration', '30s', 'poolLeaseDurationMs', 30_000],
  ['pool-renew-deadline', '5s', 'poolRenewDeadlineMs', 5_000],
  ['pool-retry-period', '500ms', 'poolRetryPeriodMs', 500],
]

t.test('each flag, as --flag value and --flag=value', async t => {
  for (const [flag, raw, key, want] of each) {
    t.strictSame(config([`--${flag}`, raw])[key], want, `--${flag} ${raw}`)
    t.strictSame(config([`--${flag}=${raw}`])[key], want, `--${flag}=${raw}`)
  }
})

t.test('the plain port binds beyond loopback only when asked to by name', async t => {
  t.match(usageError(t, ['--bind-address', '0.0.0.0']), /not loopback.*--insecure-allow-remote/)
  t.match(usageError(t, ['--bind-address', '169.254.2.1']), /not loopback/)
  t.equal(config(['--bind-address', '0.0.0.0', '--insecure-allow-remote']).bindAddress, '0.0.0.0', 'a bare switch means true')
  t.equal(config(['--insecure-allow-remote', '--bind-address', '0.0.0.0']).insecureAllowRemote, true, 'the switch takes no value')
  t.match(usageError(t, ['--insecure-allow-remote=yes']), /must be true or false/)
  t.equal(config(['--insecure-allow-remote=false']).insecureAllowRemote, false)
  t.match(usageError(t, ['--insecure-allow-remote', 'false']), /unexpected argument "false"/, 'like Go flags, a switch takes its value only with =')
})

t.test('--shared-watches is a switch, as in Go flags', async t => {
  t.equal(config(['--shared-watches=false']).sharedWatches, false)
  t.equal(config(['--shared-watches']).sharedWatches, true, 'a bare switch means true')
  t.equal(config(['--shared-watches', '--port', '1234']).port, 1234, 'and takes no value')
  t.equal(config([], { OUTPOST_SHARED_WATCHES: 'false' }).sharedWatches, false)
})

t.test('TLS flags that go together', async t => {
  t.match(usageError(t, ['--tls-cert-file', '/a.crt']), /go together/)
  t.match(usageError(t, ['--secure-port', '10261']), /must differ/)
  t.equal(config(['--tls-cert-file', '/a.crt', '--tls-private-key-file', '/a.key']).tlsKeyFile, '/a.key')
})

t.test('--server', async t => {
  const hrefs = (argv: string[], env: Record<string, string> = {}) => config(argv, env).servers.map(u => u.href)
  t.strictSame(hrefs(['--server', 'https://10.0.0.1:6443']), ['https://10.0.0.1:6443/'])
  t.strictSame(hrefs(['--server=https://10.0.0.1:6443']), ['https://10.0.0.1:6443/'])
  t.strictSame(hrefs(['--server', 'https://a:6443,https://b:6443']), ['https://a:6443/', 'https://b:6443/'], 'comma list')
  t.strictSame(
    hrefs(['--server', 'https://a:6443', '--port', '1234', '--server=https://b:6443,http://c']),
    ['https://a:6443/', 'https://b:6443/', 'http://c/'],
    'repeatable, order kept',
  )
  t.strictSame(hrefs(['--server', ' https://a:6443 , https://b:6443,']), ['https://a:6443/', 'https://b:6443/'], 'blanks and empty items dropped')
  t.strictSame(hrefs(['--server', 'https://[fd00::1]:6443']), ['https://[fd00::1]:6443/'], 'IPv6')
  t.strictSame(hrefs(['--server', 'https://lb.example.com/k8s']), ['https://lb.example.com/k8s'], 'a path prefix is kept')
  const c = config(['--server', 'https://a:6443'])
  t.type(c.servers[0], URL)
})

t.test('environment', async t => {
  const env = {
    OUTPOST_SERVER: 'https://a:6443,https://b:6443',
    OUTPOST_KUBECONFIG: '/etc/kubernetes/kubelet.conf',
    OUTPOST_NODE_NAME: 'kind-worker2',
    OUTPOST_NODEPOOL: 'beijing',
    OUTPOST_BIND_ADDRESS: '0.0.0.0',
    OUTPOST_INSECURE_ALLOW_REMOTE: 'true',
    OUTPOST_PORT: '20261',
    OUTPOST_ADMIN_PORT: '20267',
    OUTPOST_CACHE_DIR: '/tmp/cache',
    OUTPOST_LOG_LEVEL: 'warn',
    OUTPOST_LOG_FORMAT: 'json',
  }
  const c = config([], env)
  t.strictSame(
    c.servers.map(u => u.href),
    ['https://a:6443/', 'https://b:6443/'],
  )
  t.equal(c.kubeconfig, '/etc/kubernetes/kubelet.conf')
  t.equal(c.nodeName, 'kind-worker2')
  t.equal(c.nodePool, 'beijing')
  t.equal(c.bindAddress, '0.0.0.0')
  t.equal(c.port, 20261)
  t.equal(c.adminPort, 20267)
  t.equal(c.cacheDir, '/tmp/cache')
  t.equal(c.logLevel, 'warn')
  t.equal(c.logFormat, 'json')

  t.equal(config([], { OUTPOST_PORT: '' }).port, 10261, 'an empty variable counts as unset')
  t.equal(config([], { OUTPOST_NODE_NAME: '' }).nodeName, os.hostname().toLowerCase())
  t.equal(config([], { OUTPOST_PORT: undefined }).port, 10261)
  t.equal(config([], { PORT: '1', OUTPOST_PORTS: '2' }).port, 10261, 'other variables are ignored')
})

t.test('flags win over the environment', async t => {
  const env = {
    OUTPOST_SERVER: 'https://env:6443',
    OUTPOST_KUBECONFIG: '/env/kubeconfig',
    OUTPOST_NODE_NAME: 'env-node',
    OUTPOST_NODEPOOL: 'env-pool',
    OUTPOST_BIND_ADDRESS: '10.0.0.1',
    OUTPOST_INSECURE_ALLOW_REMOTE: 'true',
    OUTPOST_PORT: '1111',
    OUTPOST_ADMIN_PORT: '2222',
    OUTPOST_CACHE_DIR: '/env/cache',
    OUTPOST_LOG_LEVEL: 'error',
    OUTPOST_LOG_FORMAT: 'json',
  }
  const c = config(
    [
      '--server=https://flag:6443',
      '--kubeconfig=/flag/kubeconfig',
      '--node-name=flag-node',
      '--nodepool=flag-pool',
      '--bind-address=10.0.0.2',
      '--port=3333',
      '--admin-port=4444',
      '--cache-dir=/flag/cache',
      '--log-level=trace',
      '--log-format=text',
    ],
    env,
  )
  t.strictSame(
    c.servers.map(u => u.href),
    ['https://flag:6443/'],
    'flag servers replace, not extend, the env list',
  )
  t.equal(c.kubeconfig, '/flag/kubeconfig')
  t.equal(c.nodeName, 'flag-node')
  t.equal(c.nodePool, 'flag-pool')
  t.equal(c.bindAddress, '10.0.0.2')
  t.equal(c.port, 3333)
  t.equal(c.adminPort, 4444)
  t.equal(c.cacheDir, '/flag/cache')
  t.equal(c.logLevel, 'trace')
  t.equal(c.logFormat, 'text')

  t.equal(config(['--port', '3333'], { OUTPOST_PORT: 'junk' }).port, 3333, 'a bad variable shadowed by its flag is not an error')
  t.equal(config(['--port', '1', '--port', '2']).port, 2, 'the last occurrence of a flag wins')
  t.equal(config(['--cache-dir=-odd']).cacheDir, '-odd', 'a value starting with "-" in the = form')
})

t.test('errors are one-line UsageErrors', async t => {
  const cases: [string[], Record<string, string>, string][] = [
    [['--foo'], {}, 'unknown flag --foo'],
    [['--foo=bar'], {}, 'unknown flag --foo'],
    [['-x'], {}, 'unknown flag -x'],
    [['-port', '1'], {}, 'unknown flag -port; did you mean --port?'],
    [['--Port', '1'], {}, 'unknown flag --Port; did you mean --port?'],
    [['extra'], {}, 'unexpected argument "extra"'],
    [['--', 'extra'], {}, 'unexpected argument "extra"'],
    [['--port'], {}, 'missing value for --port'],
    [['--port', '--admin-port', '1'], {}, 'missing value for --port'],
    [['--server'], {}, 'missing value for --server'],
    [['--node-name', '-x'], {}, 'missing value for --node-name'],
    [['--help=yes'], {}, 'flag --help takes no value'],
    [['--port', 'abc'], {}, 'invalid value "abc" for --port: must be an integer from 1 to 65535'],
    [['--port=0'], {}, 'invalid value "0" for --port: must be an integer from 1 to 65535'],
    [['--port=65536'], {}, 'invalid value "65536" for --port: must be an integer from 1 to 65535'],
    [['--port=-1'], {}, 'invalid value "-1" for --port: must be an integer from 1 to 65535'],
    [['--port=80.5'], {}, 'invalid value "80.5" for --port: must be an integer from 1 to 65535'],
    [['--port=1e3'], {}, 'invalid value "1e3" for --port: must be an integer from 1 to 65535'],
    [['--port='], {}, 'invalid value "" for --port: must be an integer from 1 to 65535'],
    [['--port', ' 80'], {}, 'invalid value " 80" for --port: must be an integer from 1 to 65535'],
    [['--admin-port', '99999'], {}, 'invalid value "99999" for --admin-port: must be an integer from 1 to 65535'],
    [['--port', '10267'], {}, '--port and --admin-port are both 10267; they must differ'],
    [['--server', 'ftp://x'], {}, 'invalid value "ftp://x" for --server: must be an http or https URL with a host, like https://10.0.0.1:6443'],
    [['--server', '10.0.0.1:6443'], {}, 'invalid value "10.0.0.1:6443" for --server: must be an http or https URL with a host, like https://10.0.0.1:6443'],
    [
      ['--server', 'https://a:6443,not a url'],
      {},
      'invalid value "not a url" for --server: must be an http or https URL with a host, like https://10.0.0.1:6443',
    ],
    [['--server', 'https://'], {}, 'invalid value "https://" for --server: must be an http or https URL with a host, like https://10.0.0.1:6443'],
    [['--server', 'https://a:6443/?x=1'], {}, 'invalid value "https://a:6443/?x=1" for --server: must not have a query or fragment'],
    [['--server='], {}, 'invalid value "" for --server: must not be empty'],
    [['--server', ','], {}, 'invalid value "," for --server: must not be empty'],
    [['--bind-address', 'localhost'], {}, 'invalid value "localhost" for --bind-address: must be an IP address, like 127.0.0.1 or ::1'],
    [['--bind-address', '1.2.3.4.5'], {}, 'invalid value "1.2.3.4.5" for --bind-address: must be an IP address, like 127.0.0.1 or ::1'],
    [['--health-interval', '5'], {}, 'invalid value "5" for --health-interval: must be a duration like 500ms, 5s or 1m'],
    [['--health-failures', '0'], {}, 'invalid value "0" for --health-failures: must be a whole number of at least 1'],
    [
      ['--cache-components', 'kube proxy'],
      {},
      'invalid value "kube proxy" for --cache-components: must be component names (User-Agent up to the first "/") or *',
    ],
    [['--log-level', 'verbose'], {}, 'invalid value "verbose" for --log-level: must be one of fatal, error, warn, info, debug, trace, silent'],
    [['--log-level', 'INFO'], {}, 'invalid value "INFO" for --log-level: must be one of fatal, error, warn, info, debug, trace, silent'],
    [['--log-format', 'pretty'], {}, 'invalid value "pretty" for --log-format: must be one of auto, text, json'],
    [['--log-format='], {}, 'invalid value "" for --log-format: must be one of auto, text, json'],
    [['--log-format'], {}, 'missing value for --log-format'],
    [[], { OUTPOST_LOG_FORMAT: 'JSON' }, 'invalid value "JSON" for OUTPOST_LOG_FORMAT: must be one of auto, text, json'],
    [
      ['--filters', 'topology'],
      {},
      'invalid value "topology" for --filters: must be one of localendpoints, servicetopology, masterservice, serviceenvupdater, forwardkubesvctraffic, discardcloudservice, nodeportisolation, inclusterconfig',
    ],
    [
      ['--disable-filters', 'servicetopology,nope'],
      {},
      'invalid value "nope" for --disable-filters: must be one of localendpoints, servicetopology, masterservice, serviceenvupdater, forwardkubesvctraffic, discardcloudservice, nodeportisolation, inclusterconfig',
    ],
    [['--filter-components', 'kubelet'], {}, 'invalid value "kubelet" for --filter-components: must be FILTER=COMPONENTS, like masterservice=kubelet,my-agent'],
    [
      ['--filter-components', 'topology=kube-proxy'],
      {},
      'invalid value "topology" for --filter-components: must be one of localendpoints, servicetopology, masterservice, serviceenvupdater, forwardkubesvctraffic, discardcloudservice, nodeportisolation, inclusterconfig',
    ],
    [['--advertise-address', 'node-1'], {}, 'invalid value "node-1" for --advertise-address: must be an IP address, like 127.0.0.1 or ::1'],
    [['--pod-address', 'none'], {}, 'invalid value "none" for --pod-address: must be an IP address, like 127.0.0.1 or ::1'],
    [
      ['--pod-interface', 'a-name-too-long-for-linux'],
      {},
      'invalid value "a-name-too-long-for-linux" for --pod-interface: must be an interface name of 1 to 15 letters, digits, _ . -',
    ],
    [['--pod-interface', 'eth0/1'], {}, 'invalid value "eth0/1" for --pod-interface: must be an interface name of 1 to 15 letters, digits, _ . -'],
    [['--node-name='], {}, 'invalid value "" for --node-name: must not be empty'],
    [['--node-name', ' '], {}, 'invalid value " " for --node-name: must not be empty'],
    [
      ['--node-name', 'Kind-Worker2'],
      {},
      'invalid value "Kind-Worker2" for --node-name: must be a Kubernetes node name: lower-case letters, digits, "-" and ".", at most 253 characters',
    ],
    [
      ['--node-name', 'a_b'],
      {},
      'invalid value "a_b" for --node-name: must be a Kubernetes node name: lower-case letters, digits, "-" and ".", at most 253 characters',
    ],
    [['--nodepool='], {}, 'invalid value "" for --nodepool: must not be empty'],
    [['--nodepool', 'a/b'], {}, 'invalid value "a/b" for --nodepool: must be a label value: letters, digits, "-", "_" and ".", at most 63 characters'],
    [
      ['--nodepool', 'x'.repeat(64)],
      {},
      `invalid value "${'x'.repeat(64)}" for --nodepool: must be a label value: letters, digits, "-", "_" and ".", at most 63 characters`,
    ],
    [['--pool-sharing', 'true'], {}, 'invalid value "true" for --pool-sharing: must be on or off'],
    [
      ['--pool-lease-namespace', 'Kube_System'],
      {},
      'invalid value "Kube_System" for --pool-lease-namespace: must be a namespace name: lower-case letters, digits and "-", at most 63 characters',
    ],
    [
      ['--pool-sharing=on', '--pool-lease-duration', '10s', '--pool-renew-deadline', '10s'],
      {},
      '--pool-retry-period (2000 ms) < --pool-renew-deadline (10000 ms) < --pool-lease-duration (10000 ms) must hold: a leader stops before its lease can be taken',
    ],
    [['--pool-sharing=on', '--pool-port', '10261'], {}, '--pool-port 10261 is already another port of the hub'],
    [['--kubeconfig='], {}, 'invalid value "" for --kubeconfig: must not be empty'],
    [['--cache-dir='], {}, 'invalid value "" for --cache-dir: must not be empty'],
    [
      ['--node-name', 'bad\nname'],
      {},
      'invalid value "bad\\nname" for --node-name: must be a Kubernetes node name: lower-case letters, digits, "-" and ".", at most 253 characters',
    ],
    // environment: the variable is named
    [[], { OUTPOST_PORT: 'abc' }, 'invalid value "abc" for OUTPOST_PORT: must be an integer from 1 to 65535'],
    [[], { OUTPOST_ADMIN_PORT: '0' }, 'invalid value "0" for OUTPOST_ADMIN_PORT: must be an integer from 1 to 65535'],
    [
      [],
      { OUTPOST_SERVER: 'https://a:6443,ftp://b' },
      'invalid value "ftp://b" for OUTPOST_SERVER: must be an http or https URL with a host, like https://10.0.0.1:6443',
    ],
    [[], { OUTPOST_SERVER: ' , ' }, 'invalid value " , " for OUTPOST_SERVER: must not be empty'],
    [[], { OUTPOST_BIND_ADDRESS: 'any' }, 'invalid value "any" for OUTPOST_BIND_ADDRESS: must be an IP address, like 127.0.0.1 or ::1'],
    [[], { OUTPOST_LOG_LEVEL: 'loud' }, 'invalid value "loud" for OUTPOST_LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent'],
    [
      [],
      { OUTPOST_NODE_NAME: 'UPPER' },
      'invalid value "UPPER" for OUTPOST_NODE_NAME: must be a Kubernetes node name: lower-case letters, digits, "-" and ".", at most 253 characters',
    ],
    [
      [],
      { OUTPOST_NODEPOOL: 'a b' },
      'invalid value "a b" for OUTPOST_NODEPOOL: must be a label value: letters, digits, "-", "_" and ".", at most 63 characters',
    ],
    [[], { OUTPOST_PORT: '10267' }, '--port and --admin-port are both 10267; they must differ'],
  ]
  for (const [argv, env, want] of cases) {
    t.equal(usageError(t, argv, env), want, JSON.stringify([argv, env]))
  }
})

t.test('credentials in a --server URL are refused without echoing them', async t => {
  const message = usageError(t, ['--server', 'https://admin:s3cret@10.0.0.1:6443'])
  t.notMatch(message, /s3cret/)
  t.equal(message, 'invalid value "10.0.0.1:6443" for --server: must not carry credentials; give them in --kubeconfig')
})

t.test('the first problem on the command line is the one reported', async t => {
  t.equal(usageError(t, ['--foo', '--bar']), 'unknown flag --foo')
  t.equal(usageError(t, ['--port', 'x', '--admin-port', 'y']), 'invalid value "x" for --port: must be an integer from 1 to 65535')
})

t.test('--help', async t => {
  const help = { help: true, output: usage }
  t.strictSame(parseFlags(['--help'], {}), help)
  t.strictSame(parseFlags(['-h'], {}), help)
  t.strictSame(parseFlags(['--port', '1', '-h'], {}), help)
  t.strictSame(parseFlags(['--help', '--port', 'junk', '--foo'], {}), help, 'help wins over other problems')
  t.strictSame(parseFlags(['--foo', '--help'], {}), help)
  t.strictSame(parseFlags(['--node-name', '-h'], {}), help, 'a flag is never taken as a value')
  t.strictSame(parseFlags(['-h'], { OUTPOST_PORT: 'junk' }), help)
  t.strictSame(parseFlags(['--version', '--help'], {}), help, 'help wins over --version')
  t.equal(usageError(t, ['--', '--help']), 'unexpected argument "--help"', 'after -- nothing is a flag')
  t.strictSame(parseFlags([], {}).help, false)
})

t.test('usage text', async t => {
  const lines = usage.split('\n')
  t.match(lines[0], /^outpost\b.*caching reverse proxy for the Kubernetes API server/, 'says what outpost is in one line')
  t.match(usage, /Usage: outpost \[flags\]/)
  for (const f of flags) {
    t.match(usage, `--${f.flag} `, `mentions --${f.flag}`)
    if (f.env) t.match(usage, f.env, `mentions ${f.env}`)
    t.match(usage, `default: ${f.default}`, `shows the default of --${f.flag}`)
  }
  for (const v of ['10261', '10267', '127.0.0.1', '/var/lib/outpost/cache', 'default: info']) t.match(usage, v)
  t.match(usage, /-h, --help/)
  t.match(usage, /--version +print the version/)
  t.match(usage, /--log-format FORMAT +text or json/)
  t.strictSame(
    lines.filter(l => l.length > 120),
    [],
    'lines fit a terminal',
  )
})

t.test('the flag table follows its conventions', async t => {
  const names = new Set<string>()
  for (const f of flags) {
    t.match(f.flag, /^[a-z][a-z0-9-]*$/, `--${f.flag} is kebab-case`)
    t.notOk(names.has(f.flag), `--${f.flag} is listed once`)
    names.add(f.flag)
    t.equal(f.env, `OUTPOST_${f.flag.toUpperCase().replace(/-/g, '_')}`, `--${f.flag} reads ${f.env}`)
    t.ok(f.help.length > 0 && f.help.split('\n').every(line => line.trim().length > 0), `--${f.flag} has help, no blank lines`)
  }
})

t.test('parseFlags does not touch its inputs', async t => {
  const argv = ['--port', '1234', '--server=https://a:6443']
  const env = Object.freeze({ OUTPOST_LOG_LEVEL: 'debug' })
  const before = [...argv]
  config(argv, env)
  t.strictSame(argv, before)
  const a = config(['--server', 'https://a:6443'])
  const b = config(['--server', 'https://a:6443'])
  t.not(a.servers, b.servers, 'a fresh config each call')
})

t.test('OUTPOST_ variables that name nothing are warned about, with what they may have meant', async t => {
  const warnings = (env: Record<string, string>) => {
    const result = parseFlags([], env)
    if (result.help) throw new Error('unexpected help')
    return result.warnings
  }
  t.same(warnings({ OUTPOST_PORT: '10261', OUTPOST_DEMO_PORT: '10270', HOME: '/root' }), [], 'known ones and others: nothing')
  t.same(warnings({ OUTPOST_PROT: '1' }), ['unknown environment variable OUTPOST_PROT, ignored; did you mean OUTPOST_PORT?'])
  t.same(warnings({ OUTPOST_NODE_NAM: 'x' }), ['unknown environment variable OUTPOST_NODE_NAM, ignored; did you mean OUTPOST_NODE_NAME?'])
  t.same(warnings({ OUTPOST_ZZZZZZZZZZZZZZ: 'x' }), ['unknown environment variable OUTPOST_ZZZZZZZZZZZZZZ, ignored'], 'nothing close: named alone')
  t.equal(config([], { OUTPOST_PROT: '1' }).port, defaults.port, 'and ignored')
})
