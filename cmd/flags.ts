// Command line and environment → HubConfig. Pure: no files are read and nothing is started here
// (the kubeconfig's server, when --server is absent, is resolved at start).
//
// Everything is driven by the `flags` table below: one row per flag gives its name, environment
// variable, what the help text says, and how a raw string becomes a config value. Adding a flag is
// adding a row (plus a HubConfig field and a default in lib/config.ts).

import net from 'node:net'
import { defaultNodeName, defaults, logFormats, logLevels, plainBindProblem, type HubConfig, type LogFormat, type LogLevel } from '../lib/config.ts'
import { filterNames } from '../filters/registry.ts'
import { AliasRefused, AliasValueError, findYurtHubFlag, yurthubFlagNames, yurthubHelp } from './flag-aliases.ts'
import { didYouMean, suggest } from './suggest.ts'
import { versionText } from './version.ts'

/** A mistake in the command line or environment. The message is one line, fit for `outpost: <message>`. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** Thrown by a value parser; parseFlags turns it into a UsageError naming the flag or variable. */
class InvalidValue extends Error {
  constructor(
    readonly reason: string,
    /** the offending part of the raw value, when it is not the whole of it (one item of a list) */
    readonly value?: string,
  ) {
    super(reason)
  }
}

type Key = keyof HubConfig

interface FlagSpecFor<K extends Key> {
  /** long name without the dashes: `port` for --port */
  flag: string
  /** environment variable read when the flag is absent */
  env?: string
  /** placeholder shown in --help; the flag always takes a value */
  arg: string
  /** may be given several times; each occurrence's values add up (lists also split on commas) */
  repeatable?: boolean
  /** a switch: `--flag` alone means true; `--flag=false` is also accepted */
  boolean?: true
  /** the default, as --help shows it */
  default: string
  help: string
  key: K
  /** every raw value given, in order (one unless repeatable); throws InvalidValue */
  parse: (values: string[]) => HubConfig[K]
}

export type FlagSpec = { [K in Key]: FlagSpecFor<K> }[Key]

// ---- value parsers ------------------------------------------------------------------------------

function last(values: string[]): string {
  return values[values.length - 1]
}

function nonEmpty(value: string): string {
  if (value.trim() === '') throw new InvalidValue('must not be empty')
  return value
}

function port(value: string): number {
  const n = /^[0-9]{1,5}$/.test(value) ? Number(value) : NaN
  if (!(n >= 1 && n <= 65535)) throw new InvalidValue('must be an integer from 1 to 65535')
  return n
}

function ipAddress(value: string): string {
  if (net.isIP(value) === 0) throw new InvalidValue('must be an IP address, like 127.0.0.1 or ::1')
  return value
}

/** A Linux interface name: at most 15 bytes, no slash, blank or colon. */
function interfaceName(value: string): string {
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(value) || value === '.' || value === '..')
    throw new InvalidValue('must be an interface name of 1 to 15 letters, digits, _ . -')
  return value
}

function oneOf<T extends string>(choices: readonly T[]) {
  return (value: string): T => {
    if (!(choices as readonly string[]).includes(value)) throw new InvalidValue(`must be one of ${choices.join(', ')}`)
    return value as T
  }
}

/** Comma-separated items across every occurrence, blanks around items and empty items dropped. */
function listItems(values: string[]): string[] {
  const items = values
    .flatMap(v => v.split(','))
    .map(s => s.trim())
    .filter(s => s !== '')
  if (items.length === 0) throw new InvalidValue('must not be empty')
  return items
}

function serverUrl(item: string): URL {
  let url: URL
  try {
    url = new URL(item)
  } catch {
    throw new InvalidValue('must be an http or https URL with a host, like https://10.0.0.1:6443', item)
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.hostname === '') {
    throw new InvalidValue('must be an http or https URL with a host, like https://10.0.0.1:6443', item)
  }
  if (url.username !== '' || url.password !== '') {
    // credentials in a URL end up in logs; the kubeconfig is where they belong
    throw new InvalidValue('must not carry credentials; give them in --kubeconfig', url.host)
  }
  if (url.search !== '' || url.hash !== '') throw new InvalidValue('must not have a query or fragment', item)
  return url
}

/** 0 turns the port off, as kube-apiserver's --secure-port=0 does. */
function portOrOff(value: string): number | null {
  return value === '0' ? null : port(value)
}

function onOff(value: string): boolean {
  if (value === 'on') return true
  if (value === 'off') return false
  throw new InvalidValue('must be on or off')
}

/** 0 is any free port (tests, several hubs on one host). */
function portOrAny(value: string): number {
  return value === '0' ? 0 : port(value)
}

function bool(value: string): boolean {
  if (value === 'true') return true
  if (value === 'false') return false
  throw new InvalidValue('must be true or false')
}

function byteCount(value: string): number {
  const n = /^[0-9]{1,12}$/.test(value) ? Number(value) : NaN
  if (!(n >= 1024)) throw new InvalidValue('must be a number of bytes, at least 1024')
  return n
}

function countOrNone(value: string): number {
  if (!/^[0-9]{1,7}$/.test(value)) throw new InvalidValue('must be a whole number (0: no cap)')
  return Number(value)
}

function positiveInteger(value: string): number {
  const n = /^[0-9]{1,6}$/.test(value) ? Number(value) : NaN
  if (!(n >= 1)) throw new InvalidValue('must be a whole number of at least 1')
  return n
}

/** 500ms, 5s, 2m: a duration as Go's flags take it (whole units). */
function duration(value: string): number {
  const match = /^([0-9]{1,7})(ms|s|m)$/.exec(value)
  const ms = match ? Number(match[1]) * { ms: 1, s: 1000, m: 60_000 }[match[2] as 'ms' | 's' | 'm'] : NaN
  if (!(ms >= 1)) throw new InvalidValue('must be a duration like 500ms, 5s or 1m')
  return ms
}

const componentName = /^(\*|[a-z0-9]([-a-z0-9_.]*[a-z0-9])?)$/

function components(values: string[]): string[] {
  const items = listItems(values).map(c => c.toLowerCase())
  for (const item of items) {
    if (!componentName.test(item)) throw new InvalidValue('must be component names (User-Agent up to the first "/") or *', item)
  }
  return items
}

const sharedResourceName = /^(?:[a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?\/[a-z0-9]+$/

function sharedResources(values: string[]): string[] {
  const items = listItems(values)
  for (const item of items) {
    if (!sharedResourceName.test(item)) throw new InvalidValue('must be resources as group/version/resource (the core group: v1/services)', item)
  }
  return items
}

function filterList(values: string[]): string[] {
  const items = listItems(values)
  if (items.length === 1 && items[0] === 'all') return [...filterNames]
  for (const item of items) if (!filterNames.includes(item)) throw new InvalidValue(`must be one of ${filterNames.join(', ')}`, item)
  return items
}

function filterComponents(values: string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const value of values) {
    const eq = value.indexOf('=')
    const name = value.slice(0, eq)
    if (eq <= 0) throw new InvalidValue('must be FILTER=COMPONENTS, like masterservice=kubelet,my-agent', value)
    if (!filterNames.includes(name)) throw new InvalidValue(`must be one of ${filterNames.join(', ')}`, name)
    out[name] = components([value.slice(eq + 1)])
  }
  return out
}

// Kubernetes object names (a Node's name) are RFC 1123 subdomains.
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

function nodeName(value: string): string {
  nonEmpty(value)
  if (value.length > 253 || !dnsSubdomain.test(value)) {
    throw new InvalidValue('must be a Kubernetes node name: lower-case letters, digits, "-" and ".", at most 253 characters')
  }
  return value
}

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/

function namespaceName(value: string): string {
  nonEmpty(value)
  if (value.length > 63 || !dnsLabel.test(value)) throw new InvalidValue('must be a namespace name: lower-case letters, digits and "-", at most 63 characters')
  return value
}

// The pool is compared with the node label apps.openyurt.io/nodepool, so it must be a label value.
const labelValue = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/

function nodePool(value: string): string {
  nonEmpty(value)
  if (value.length > 63 || !labelValue.test(value)) {
    throw new InvalidValue('must be a label value: letters, digits, "-", "_" and ".", at most 63 characters')
  }
  return value
}

// ---- the table ----------------------------------------------------------------------------------

function spec<K extends Key>(s: FlagSpecFor<K>): FlagSpec {
  return s as unknown as FlagSpec
}

export const flags: readonly FlagSpec[] = [
  spec({
    flag: 'server',
    env: 'OUTPOST_SERVER',
    arg: 'URL[,URL...]',
    repeatable: true,
    key: 'servers',
    default: "the kubeconfig's server, else demo mode (embedded simulator)",
    help: 'apiserver URLs, tried in this order (failover); repeatable',
    parse: values => listItems(values).map(serverUrl),
  }),
  spec({
    flag: 'kubeconfig',
    env: 'OUTPOST_KUBECONFIG',
    arg: 'PATH',
    key: 'kubeconfig',
    default: 'none',
    help: "kubeconfig with the node's credentials for the apiserver",
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'node-name',
    env: 'OUTPOST_NODE_NAME',
    arg: 'NAME',
    key: 'nodeName',
    default: 'the host name, lower-cased',
    help: "this node's name, as the kubelet registers it",
    parse: values => nodeName(last(values)),
  }),
  spec({
    flag: 'nodepool',
    env: 'OUTPOST_NODEPOOL',
    arg: 'POOL',
    key: 'nodePool',
    default: "the node's apps.openyurt.io/nodepool label",
    help: "this node's pool",
    parse: values => nodePool(last(values)),
  }),
  spec({
    flag: 'bind-address',
    env: 'OUTPOST_BIND_ADDRESS',
    arg: 'IP',
    key: 'bindAddress',
    default: defaults.bindAddress,
    help: 'address of the plain-HTTP proxy port; not loopback only with --insecure-allow-remote',
    parse: values => ipAddress(last(values)),
  }),
  spec({
    flag: 'port',
    env: 'OUTPOST_PORT',
    arg: 'PORT',
    key: 'port',
    default: String(defaults.port),
    help: 'proxy port (plain HTTP, no authentication) that node components use as their apiserver',
    parse: values => port(last(values)),
  }),
  spec({
    flag: 'insecure-allow-remote',
    env: 'OUTPOST_INSECURE_ALLOW_REMOTE',
    arg: '',
    boolean: true,
    key: 'insecureAllowRemote',
    default: 'false',
    help: 'allow a non-loopback --bind-address (whoever reaches the plain port acts as this node)',
    parse: values => bool(last(values)),
  }),
  spec({
    flag: 'secure-port',
    env: 'OUTPOST_SECURE_PORT',
    arg: 'PORT',
    key: 'securePort',
    default: String(defaults.securePort),
    help: 'HTTPS proxy port (TLS 1.2+, token or client certificate required); 0 = off',
    parse: values => portOrOff(last(values)),
  }),
  spec({
    flag: 'secure-bind-address',
    env: 'OUTPOST_SECURE_BIND_ADDRESS',
    arg: 'IP',
    key: 'secureBindAddress',
    default: defaults.secureBindAddress,
    help: 'address of the HTTPS proxy port',
    parse: values => ipAddress(last(values)),
  }),
  spec({
    flag: 'tls-cert-file',
    env: 'OUTPOST_TLS_CERT_FILE',
    arg: 'PATH',
    key: 'tlsCertFile',
    default: 'generated in --cert-dir',
    help: 'serving certificate (PEM, chain allowed) of the HTTPS port; with --tls-private-key-file',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'tls-private-key-file',
    env: 'OUTPOST_TLS_PRIVATE_KEY_FILE',
    arg: 'PATH',
    key: 'tlsKeyFile',
    default: 'generated in --cert-dir',
    help: 'private key (PEM) of --tls-cert-file',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'serving-cert',
    env: 'OUTPOST_SERVING_CERT',
    arg: 'SOURCE',
    key: 'servingCert',
    default: defaults.servingCert,
    help: 'no --tls-cert-file: self-signed (own CA in --cert-dir) or csr (kubelet-serving signer)',
    parse: values => oneOf(['self-signed', 'csr'] as const)(last(values)),
  }),
  spec({
    flag: 'cert-dir',
    env: 'OUTPOST_CERT_DIR',
    arg: 'DIR',
    key: 'certDir',
    default: defaults.certDir,
    help: 'where generated and requested certificates and keys are kept (0700, keys 0600)',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'node-ip',
    env: 'OUTPOST_NODE_IP',
    arg: 'IP[,IP...]',
    key: 'nodeIps',
    repeatable: true,
    default: "this host's addresses",
    help: 'IP addresses in the serving certificate besides 127.0.0.1',
    parse: values => listItems(values).map(ipAddress),
  }),
  spec({
    flag: 'client-ca-file',
    env: 'OUTPOST_CLIENT_CA_FILE',
    arg: 'PATH',
    key: 'clientCaFile',
    default: 'none',
    help: 'HTTPS clients with a certificate from this CA use the node’s credentials',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'bootstrap-kubeconfig',
    env: 'OUTPOST_BOOTSTRAP_KUBECONFIG',
    arg: 'PATH',
    key: 'bootstrapKubeconfig',
    default: 'none',
    help: 'kubeconfig with a bootstrap token: get the node’s client certificate by CSR',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'max-request-bytes',
    env: 'OUTPOST_MAX_REQUEST_BYTES',
    arg: 'BYTES',
    key: 'maxRequestBytes',
    default: String(defaults.maxRequestBytes),
    help: 'larger request bodies get 413, as from the apiserver',
    parse: values => byteCount(last(values)),
  }),
  spec({
    flag: 'max-requests-inflight',
    env: 'OUTPOST_MAX_REQUESTS_INFLIGHT',
    arg: 'N',
    key: 'maxRequestsInflight',
    default: String(defaults.maxRequestsInflight),
    help: 'requests served at once, watches aside; past it 429 with Retry-After\n(20 % kept for kubelet and kube-proxy; 0: no cap)',
    parse: values => countOrNone(last(values)),
  }),
  spec({
    flag: 'max-long-running',
    env: 'OUTPOST_MAX_LONG_RUNNING',
    arg: 'N',
    key: 'maxLongRunningRequests',
    default: String(defaults.maxLongRunningRequests),
    help: 'watches, exec, attach and port-forward open at once; past it 429\n(20 % kept for kubelet and kube-proxy; 0: no cap)',
    parse: values => countOrNone(last(values)),
  }),
  spec({
    flag: 'max-watch-backlog',
    env: 'OUTPOST_MAX_WATCH_BACKLOG',
    arg: 'BYTES',
    key: 'maxWatchBacklogBytes',
    default: String(defaults.maxWatchBacklogBytes),
    help: 'a watch whose client leaves more unread is ended, as the apiserver ends a slow watcher\n(the client watches again from its version)',
    parse: values => byteCount(last(values)),
  }),
  spec({
    flag: 'stall-timeout',
    env: 'OUTPOST_STALL_TIMEOUT',
    arg: 'DURATION',
    key: 'stallTimeoutMs',
    default: `${defaults.stallTimeoutMs / 1000}s`,
    help: 'a watch or list whose client reads nothing of what waits for it this long is ended',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'pod-overlay-ttl',
    env: 'OUTPOST_POD_OVERLAY_TTL',
    arg: 'DURATION',
    key: 'podOverlayTtlMs',
    default: `${defaults.podOverlayTtlMs / 60_000}m`,
    help: "longest the node's endpoints keep kubelet's offline pod status once the cloud is back",
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'node-condition',
    env: 'OUTPOST_NODE_CONDITION',
    arg: '',
    boolean: true,
    key: 'nodeCondition',
    default: String(defaults.nodeCondition),
    help: "keep the OutpostAutonomy condition on this node's Node: would it survive a cut",
    parse: values => bool(last(values)),
  }),
  spec({
    flag: 'max-list-bytes',
    env: 'OUTPOST_MAX_LIST_BYTES',
    arg: 'BYTES',
    key: 'maxListBytes',
    default: String(defaults.maxListBytes),
    help: 'a bigger list from the apiserver is relayed as it comes: not cached or filtered',
    parse: values => byteCount(last(values)),
  }),
  spec({
    flag: 'header-timeout',
    env: 'OUTPOST_HEADER_TIMEOUT',
    arg: 'DURATION',
    key: 'headerTimeoutMs',
    default: `${defaults.headerTimeoutMs / 1000}s`,
    help: 'a client must send its request headers (and each chunk of a body) within this',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'idle-timeout',
    env: 'OUTPOST_IDLE_TIMEOUT',
    arg: 'DURATION',
    key: 'idleTimeoutMs',
    default: `${defaults.idleTimeoutMs / 1000}s`,
    help: 'a keep-alive connection with no request is closed after this',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'admin-address',
    env: 'OUTPOST_ADMIN_ADDRESS',
    arg: 'IP',
    key: 'adminAddress',
    default: defaults.adminAddress,
    help: 'address of the admin port',
    parse: values => ipAddress(last(values)),
  }),
  spec({
    flag: 'admin-port',
    env: 'OUTPOST_ADMIN_PORT',
    arg: 'PORT',
    key: 'adminPort',
    default: String(defaults.adminPort),
    help: 'admin port: /v1/healthz, /v1/readyz, /metrics, /debug/{cache,topology,filters}',
    parse: values => port(last(values)),
  }),
  spec({
    flag: 'cache-dir',
    env: 'OUTPOST_CACHE_DIR',
    arg: 'DIR',
    key: 'cacheDir',
    default: defaults.cacheDir,
    help: 'where cached objects are kept across restarts',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'log-level',
    env: 'OUTPOST_LOG_LEVEL',
    arg: 'LEVEL',
    key: 'logLevel',
    default: defaults.logLevel,
    help: `one of ${logLevels.join(', ')}`,
    parse: values => oneOf<LogLevel>(logLevels)(last(values)),
  }),
  spec({
    flag: 'log-format',
    env: 'OUTPOST_LOG_FORMAT',
    arg: 'FORMAT',
    key: 'logFormat',
    default: defaults.logFormat,
    help: 'text or json (JSON lines); auto: text on a terminal, JSON otherwise',
    parse: values => oneOf<LogFormat>(logFormats)(last(values)),
  }),
  spec({
    flag: 'cache-components',
    env: 'OUTPOST_CACHE_COMPONENTS',
    arg: 'LIST',
    key: 'cacheComponents',
    repeatable: true,
    default: defaults.cacheComponents.join(','),
    help: 'components whose reads are cached for offline use, comma-separated; * for all',
    parse: components,
  }),
  spec({
    flag: 'cache-memory',
    env: 'OUTPOST_CACHE_MEMORY',
    arg: 'MIB',
    key: 'cacheMemoryMiB',
    default: String(defaults.cacheMemoryMiB),
    help: 'MiB of cached object bodies kept in memory; the rest is read from disk when needed',
    parse: values => positiveInteger(last(values)),
  }),
  spec({
    flag: 'watch-window-memory',
    env: 'OUTPOST_WATCH_WINDOW_MEMORY',
    arg: 'MIB',
    key: 'watchWindowMiB',
    default: '--cache-memory / 8',
    help: 'MiB of recent events each watch cache keeps for watches that resume',
    parse: values => positiveInteger(last(values)),
  }),
  spec({
    flag: 'topology-components',
    env: 'OUTPOST_TOPOLOGY_COMPONENTS',
    arg: 'LIST',
    key: 'topologyComponents',
    repeatable: true,
    default: defaults.topologyComponents.join(','),
    help: 'components whose EndpointSlices and Endpoints are filtered by service topology',
    parse: components,
  }),
  spec({
    flag: 'filters',
    env: 'OUTPOST_FILTERS',
    arg: 'LIST',
    key: 'filters',
    repeatable: true,
    default: 'all',
    help: `response filters to run, each for its components:\n  ${filterNames.slice(0, 4).join(', ')},\n  ${filterNames.slice(4).join(', ')}`,
    parse: values => filterList(values),
  }),
  spec({
    flag: 'disable-filters',
    env: 'OUTPOST_DISABLE_FILTERS',
    arg: 'LIST',
    key: 'disabledFilters',
    repeatable: true,
    default: '',
    help: 'response filters not to run',
    parse: values => filterList(values),
  }),
  spec({
    flag: 'filter-components',
    env: 'OUTPOST_FILTER_COMPONENTS',
    arg: 'F=LIST',
    key: 'filterComponents',
    repeatable: true,
    default: "each filter's own",
    help: 'for whom filter F runs (replaces its own list), e.g. masterservice=kubelet,my-agent',
    parse: values => filterComponents(values),
  }),
  spec({
    flag: 'advertise-address',
    env: 'OUTPOST_ADVERTISE_ADDRESS',
    arg: 'IP',
    key: 'advertiseAddress',
    default: '--secure-bind-address',
    help: 'where pods reach the HTTPS port (the filters point them at it)',
    parse: values => ipAddress(last(values)),
  }),
  spec({
    flag: 'pod-address',
    env: 'OUTPOST_POD_ADDRESS',
    arg: 'IP|off',
    key: 'podAddress',
    default: String(defaults.podAddress),
    help: 'link-local address for pods, kept on --pod-interface (needs CAP_NET_ADMIN)\nand served by the HTTPS port; the filters point pods at it',
    parse: values => (last(values) === 'off' ? null : ipAddress(last(values))),
  }),
  spec({
    flag: 'pod-interface',
    env: 'OUTPOST_POD_INTERFACE',
    arg: 'NAME',
    key: 'podInterface',
    default: defaults.podInterface,
    help: 'the dummy interface the hub makes for --pod-address',
    parse: values => interfaceName(last(values)),
  }),
  spec({
    flag: 'shared-watches',
    env: 'OUTPOST_SHARED_WATCHES',
    arg: '',
    boolean: true,
    key: 'sharedWatches',
    default: String(defaults.sharedWatches),
    help: 'one upstream list+watch per resource and format (--shared-resources);\nevery selector answered locally',
    parse: values => bool(last(values)),
  }),
  spec({
    flag: 'shared-resources',
    env: 'OUTPOST_SHARED_RESOURCES',
    arg: 'LIST',
    key: 'sharedResources',
    repeatable: true,
    default: 'services,endpoints,nodes,pods,endpointslices',
    help: "resources the shared watch caches keep, as group/version/resource (v1/services),\ncomma-separated (endpointslices: discovery.k8s.io v1 and v1beta1): cluster-wide;\npods only this node's",
    parse: sharedResources,
  }),
  spec({
    flag: 'pool-sharing',
    env: 'OUTPOST_POOL_SHARING',
    arg: 'on|off',
    key: 'poolSharing',
    default: 'off',
    help: "leader hubs: the node pool's hubs elect one (a Lease) that watches the cloud's\npool-wide resources; the others list and watch them from it",
    parse: values => onOff(last(values)),
  }),
  spec({
    flag: 'pool-port',
    env: 'OUTPOST_POOL_PORT',
    arg: 'PORT',
    key: 'poolPort',
    default: String(defaults.poolPort),
    help: "the leader's pool port (HTTPS, node client certificates only); 0: any free port",
    parse: values => portOrAny(last(values)),
  }),
  spec({
    flag: 'pool-bind-address',
    env: 'OUTPOST_POOL_BIND_ADDRESS',
    arg: 'IP',
    key: 'poolBindAddress',
    default: defaults.poolBindAddress,
    help: 'address of the pool port',
    parse: values => ipAddress(last(values)),
  }),
  spec({
    flag: 'pool-advertise-address',
    env: 'OUTPOST_POOL_ADVERTISE_ADDRESS',
    arg: 'IP',
    key: 'poolAdvertiseAddress',
    default: "the node's InternalIP",
    help: 'where the other hubs of the pool reach this one when it leads',
    parse: values => ipAddress(last(values)),
  }),
  spec({
    flag: 'pool-lease-namespace',
    env: 'OUTPOST_POOL_LEASE_NAMESPACE',
    arg: 'NS',
    key: 'poolLeaseNamespace',
    default: defaults.poolLeaseNamespace,
    help: "namespace of the pool's Lease (manifests/rbac.yaml lets nodes use Leases there)",
    parse: values => namespaceName(last(values)),
  }),
  spec({
    flag: 'pool-lease-name',
    env: 'OUTPOST_POOL_LEASE_NAME',
    arg: 'NAME',
    key: 'poolLeaseName',
    default: 'outpost-pool-<pool>',
    help: "name of the pool's Lease",
    parse: values => nodeName(last(values)),
  }),
  spec({
    flag: 'pool-client-ca-file',
    env: 'OUTPOST_POOL_CLIENT_CA_FILE',
    arg: 'PATH',
    key: 'poolClientCaFile',
    default: "the kubeconfig's CA",
    help: 'CA bundle the pool port checks node client certificates with (cluster client CA)',
    parse: values => nonEmpty(last(values)),
  }),
  spec({
    flag: 'pool-lease-duration',
    env: 'OUTPOST_POOL_LEASE_DURATION',
    arg: 'TIME',
    key: 'poolLeaseDurationMs',
    default: `${defaults.poolLeaseDurationMs / 1000}s`,
    help: "how long the other hubs wait after a leader's last renewal before taking over",
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'pool-renew-deadline',
    env: 'OUTPOST_POOL_RENEW_DEADLINE',
    arg: 'TIME',
    key: 'poolRenewDeadlineMs',
    default: `${defaults.poolRenewDeadlineMs / 1000}s`,
    help: 'a leader that has not renewed for this long stops leading (shorter than the lease)',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'pool-retry-period',
    env: 'OUTPOST_POOL_RETRY_PERIOD',
    arg: 'TIME',
    key: 'poolRetryPeriodMs',
    default: `${defaults.poolRetryPeriodMs / 1000}s`,
    help: 'how often the Lease is read, renewed or tried for',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'watch-silence',
    env: 'OUTPOST_WATCH_SILENCE',
    arg: 'DURATION',
    key: 'watchSilenceTimeoutMs',
    default: `${defaults.watchSilenceTimeoutMs / 1000}s`,
    help: 'end an upstream watch silent this long: a dead link (BOOKMARKs come about every minute)',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'health-interval',
    env: 'OUTPOST_HEALTH_INTERVAL',
    arg: 'DURATION',
    key: 'healthIntervalMs',
    default: `${defaults.healthIntervalMs / 1000}s`,
    help: 'how often each apiserver is probed (GET /readyz)',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'health-timeout',
    env: 'OUTPOST_HEALTH_TIMEOUT',
    arg: 'DURATION',
    key: 'healthTimeoutMs',
    default: `${defaults.healthTimeoutMs / 1000}s`,
    help: 'a probe slower than this failed',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'health-failures',
    env: 'OUTPOST_HEALTH_FAILURES',
    arg: 'N',
    key: 'healthFailures',
    default: String(defaults.healthFailures),
    help: 'consecutive failures (probes or real requests) before an apiserver counts as down',
    parse: values => positiveInteger(last(values)),
  }),
  spec({
    flag: 'health-successes',
    env: 'OUTPOST_HEALTH_SUCCESSES',
    arg: 'N',
    key: 'healthSuccesses',
    default: String(defaults.healthSuccesses),
    help: 'consecutive successful probes before a down apiserver counts as up again',
    parse: values => positiveInteger(last(values)),
  }),
  spec({
    flag: 'http2',
    env: 'OUTPOST_HTTP2',
    arg: '',
    boolean: true,
    key: 'http2',
    default: String(defaults.http2),
    help: 'HTTP/2 to the apiserver where it offers it (ALPN): one connection per identity\ncarries every request and watch; false: HTTP/1.1, a connection per watch',
    parse: values => bool(last(values)),
  }),
  spec({
    flag: 'http2-max-streams-per-connection',
    env: 'OUTPOST_HTTP2_MAX_STREAMS_PER_CONNECTION',
    arg: 'N',
    key: 'http2MaxStreamsPerConnection',
    default: String(defaults.http2MaxStreamsPerConnection),
    help: "streams on one HTTP/2 connection at most (lower when the server's SETTINGS say so);\npast it a second connection opens",
    parse: values => positiveInteger(last(values)),
  }),
  spec({
    flag: 'http2-read-idle-timeout',
    env: 'OUTPOST_HTTP2_READ_IDLE_TIMEOUT',
    arg: 'DURATION',
    key: 'http2ReadIdleTimeoutMs',
    default: `${defaults.http2ReadIdleTimeoutMs / 1000}s`,
    help: 'an HTTP/2 connection silent this long is PINGed (client-go: 30s)',
    parse: values => duration(last(values)),
  }),
  spec({
    flag: 'http2-ping-timeout',
    env: 'OUTPOST_HTTP2_PING_TIMEOUT',
    arg: 'DURATION',
    key: 'http2PingTimeoutMs',
    default: `${defaults.http2PingTimeoutMs / 1000}s`,
    help: 'a PING unanswered this long: the connection is dead, every stream on it ends\nand the apiserver counts as down at once (client-go: 15s)',
    parse: values => duration(last(values)),
  }),
]

/** Checks across flags, run after every value parsed. Each returns a one-line problem or nothing. */
const crossChecks: ((config: HubConfig) => string | undefined)[] = [
  c => (c.port === c.adminPort ? `--port and --admin-port are both ${c.port}; they must differ` : undefined),
  c =>
    c.securePort === c.port || c.securePort === c.adminPort ? `--secure-port ${c.securePort} is already --port or --admin-port; they must differ` : undefined,
  c => ((c.tlsCertFile === undefined) !== (c.tlsKeyFile === undefined) ? '--tls-cert-file and --tls-private-key-file go together' : undefined),
  plainBindProblem,
  c =>
    c.poolSharing && !(c.poolRetryPeriodMs < c.poolRenewDeadlineMs && c.poolRenewDeadlineMs < c.poolLeaseDurationMs)
      ? `--pool-retry-period (${c.poolRetryPeriodMs} ms) < --pool-renew-deadline (${c.poolRenewDeadlineMs} ms) < --pool-lease-duration (${c.poolLeaseDurationMs} ms) must hold: a leader stops before its lease can be taken`
      : undefined,
  c => (c.poolSharing && [c.port, c.adminPort, c.securePort].includes(c.poolPort) ? `--pool-port ${c.poolPort} is already another port of the hub` : undefined),
]

// ---- help ---------------------------------------------------------------------------------------

const maxFlagColumn = 28

function buildUsage(): string {
  const rows: [string, string[]][] = flags.map(f => [
    f.boolean ? `--${f.flag}` : `--${f.flag} ${f.arg}`,
    [...f.help.split('\n'), `env ${f.env ?? '-'}; default: ${f.default}`],
  ])
  rows.push(['--version', ['print the version and the Kubernetes versions tested against, and exit']])
  rows.push(['-h, --help', ['show this help and exit']])
  // a flag too long for the column (kube-apiserver's --http2-max-streams-per-connection) has its help on the lines below
  const width = Math.max(...rows.map(([left]) => left.length).filter(n => n <= maxFlagColumn)) + 2
  const lines = rows.flatMap(([left, right]) => {
    if (left.length > maxFlagColumn) return [`  ${left}`, ...right.map(text => `  ${''.padEnd(width)}${text}`)]
    return right.map((text, i) => `  ${(i === 0 ? left : '').padEnd(width)}${text}`)
  })
  return [
    'outpost - caching reverse proxy for the Kubernetes API server, run on every edge node',
    '',
    'Usage: outpost [flags]',
    '',
    'Flags (--flag value or --flag=value; a flag wins over its environment variable,',
    'an empty variable counts as unset):',
    ...lines,
    '',
    ...yurthubHelp(),
    '',
  ].join('\n')
}

/** The --help text. */
export const usage: string = buildUsage()

// ---- parsing ------------------------------------------------------------------------------------

/** help: nothing to run; print `output` (the usage, or the version) and exit 0. */
/** `warnings`: what the hub is to log once it has a logger (unknown OUTPOST_* variables) */
export type ParseResult = { help: true; output: string } | { help: false; config: HubConfig; warnings: string[] }

const quote = (s: string): string => JSON.stringify(s) // also keeps control characters on one line

export function parseFlags(argv: string[], env: Record<string, string | undefined>): ParseResult {
  const byName = new Map(flags.map(f => [f.flag, f]))
  const given = new Map<FlagSpec, string[]>()
  // the name a flag was given by, when a YurtHub alias: errors name what the user typed
  const givenAs = new Map<FlagSpec, string>()
  let help = false
  let version = false
  let problem: string | undefined // the first one; --help anywhere still wins

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--help' || arg === '-h') {
      help = true
      continue
    }
    if (arg === '--version') {
      version = true
      continue
    }
    if (arg === '--') {
      if (i + 1 < argv.length) problem ??= `unexpected argument ${quote(argv[i + 1])}`
      break
    }
    if (!arg.startsWith('-') || arg === '-') {
      problem ??= `unexpected argument ${quote(arg)}`
      continue
    }
    // klog's -v4, as pflag takes a shorthand's value
    const eq = /^-v[0-9]/.test(arg) ? 2 : arg.indexOf('=')
    const name = eq === -1 ? arg : arg.slice(0, eq)
    if (name === '--help' || name === '-h' || name === '--version') {
      problem ??= `flag ${name} takes no value`
      continue
    }
    const native = name.startsWith('--') ? byName.get(name.slice(2)) : undefined
    const yurthub = native === undefined ? findYurtHubFlag(name) : undefined
    if (native === undefined && yurthub === undefined) {
      const hint = didYouMean(name, knownNames)
      problem ??= `unknown flag ${name}${hint ? `; ${hint}` : ''}`
      continue
    }
    let value: string
    if (eq !== -1) {
      value = arg.slice(eq + (arg[eq] === '=' ? 1 : 0))
    } else if (native?.boolean ?? yurthub?.boolean) {
      value = 'true'
    } else if (i + 1 < argv.length && !looksLikeFlag(argv[i + 1])) {
      value = argv[++i]
    } else {
      problem ??= `missing value for ${name}`
      continue
    }
    let f = native
    if (yurthub !== undefined) {
      let converted: string | undefined
      try {
        converted = yurthub.convert(value)
      } catch (err) {
        if (err instanceof AliasRefused) problem ??= err.message
        else if (err instanceof AliasValueError) problem ??= `invalid value ${quote(value)} for ${name}: ${err.message}`
        else throw err
        continue
      }
      if (converted === undefined || yurthub.to === undefined) continue // outpost does this already
      f = byName.get(yurthub.to) as FlagSpec
      givenAs.set(f, name)
      value = converted
    } else if (f !== undefined) {
      givenAs.delete(f)
    }
    if (f === undefined) continue
    given.set(f, f.repeatable ? [...(given.get(f) ?? []), value] : [value])
  }
  if (help) return { help: true, output: usage }
  if (version) return { help: true, output: versionText }
  if (problem !== undefined) throw new UsageError(problem)

  const config: HubConfig = { ...defaults, servers: [], nodeName: defaultNodeName() }
  const set = config as unknown as Record<Key, unknown>
  for (const f of flags) {
    const fromFlag = given.get(f)
    const fromEnv = f.env === undefined ? undefined : env[f.env]
    let values: string[]
    let source: string
    if (fromFlag !== undefined) {
      values = fromFlag
      source = givenAs.get(f) ?? `--${f.flag}`
    } else if (fromEnv !== undefined && fromEnv !== '') {
      values = [fromEnv]
      source = f.env as string
    } else {
      continue
    }
    try {
      set[f.key] = f.parse(values)
    } catch (err) {
      if (!(err instanceof InvalidValue)) throw err
      const shown = err.value ?? (values.length === 1 ? values[0] : values.join(','))
      throw new UsageError(`invalid value ${quote(shown)} for ${source}: ${err.reason}`)
    }
  }
  for (const check of crossChecks) {
    const message = check(config)
    if (message !== undefined) throw new UsageError(message)
  }
  return { help: false, config, warnings: unknownEnvironment(env) }
}

/** Variables the hub reads that are no flag's: the demo's control port. */
const otherEnvNames = ['OUTPOST_DEMO_PORT']

/**
 * `OUTPOST_*` variables that name nothing the hub reads, each with what it may have been meant as:
 * a misspelt one would be ignored without a word. Warned about, not refused as an unknown flag is:
 * a node's environment may carry variables meant for other tools of the same name.
 */
export function unknownEnvironment(env: Record<string, string | undefined>): string[] {
  const known = [...flags.flatMap(f => (f.env ? [f.env] : [])), ...otherEnvNames]
  const asName = (variable: string) => variable.toLowerCase().replace(/_/g, '-')
  const byName = new Map(known.map(variable => [asName(variable), variable]))
  return Object.keys(env)
    .filter(variable => variable.startsWith('OUTPOST_') && !known.includes(variable))
    .sort()
    .map(variable => {
      const close = suggest(variable, [...byName.keys()]).map(name => byName.get(name)!)
      const hint = close.length === 0 ? '' : `; did you mean ${close.join(' or ')}?`
      return `unknown environment variable ${variable}, ignored${hint}`
    })
}

/** Every name an unknown flag may have been meant as, for "did you mean". */
const knownNames: readonly string[] = [...flags.map(f => f.flag), ...yurthubFlagNames(), 'help', 'version']

/**
 * Whether an argument after a value-taking flag is really the next flag, so `--port --admin-port 1`
 * reports the missing value instead of taking "--admin-port" as the port. A value that starts with
 * "-" can still be given as --flag=-value.
 */
function looksLikeFlag(arg: string): boolean {
  return arg.startsWith('-') && arg !== '-'
}
