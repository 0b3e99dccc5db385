// YurtHub's flags, so that an operator can move a YurtHub static pod's command line to outpost
// without rewriting it. Names and meanings are YurtHub's own (openyurt cmd/yurthub/app/options/
// options.go, AddFlags, plus klog's -v from component-base's global flags).
//
// Each row is one of three kinds:
// - an alias: the same meaning as an outpost flag, its value converted where YurtHub writes it
//   differently (a scheme-less server address, seconds as a bare number);
// - accepted with no effect: outpost already does what the value asks (--working-mode=edge), or the
//   setting has no counterpart that matters to a node (--profiling); other values are refused;
// - refused: the meaning differs enough that quietly going on would surprise; the note says what to
//   give instead.
// The README's "Coming from YurtHub: flags" table is this table.

import { filterNames } from '../filters/registry.ts'

/** The value cannot be converted; parseFlags reports it as an invalid value for the flag typed. */
export class AliasValueError extends Error {}

/** The flag (or this value of it) is YurtHub's and outpost does not take it; `message` says what to give. */
export class AliasRefused extends Error {}

export type AliasKind = 'alias' | 'ignored' | 'refused'

export interface YurtHubFlag {
  /** YurtHub's name without dashes; `v` is klog's -v (also --v) */
  name: string
  kind: AliasKind
  /** a switch in YurtHub (`--flag` alone is true) */
  boolean?: true
  /** the outpost flag an alias sets */
  to?: string
  /** YurtHub's raw value → the outpost flag's raw value; undefined: nothing to set. Throws AliasValueError or AliasRefused */
  convert: (value: string) => string | undefined
  /** the values accepted, when not all (shown in --help: --working-mode=edge) */
  accepts?: string
  /** how outpost differs: in the README table, and in the refusal */
  note: string
  /** how --help lists it, when not `--name → --to` */
  shown?: string
}

function alias(name: string, to: string, note: string, convert: (value: string) => string | undefined = v => v): YurtHubFlag {
  return { name, kind: 'alias', to, convert, note }
}

/** A YurtHub switch: its true and false each set an outpost value, or nothing. */
function switchAlias(name: string, to: string, onTrue: string | undefined, onFalse: string | undefined, note: string, shown: string): YurtHubFlag {
  return { name, kind: 'alias', boolean: true, to, convert: v => (goBool(v) ? onTrue : onFalse), note, shown }
}

/** Accepted and nothing to do when the value is one outpost already behaves as (`accepts`, or any); refused otherwise. */
function ignored(name: string, note: string, accepts?: { values: string[]; boolean?: true }): YurtHubFlag {
  return {
    name,
    kind: 'ignored',
    boolean: accepts?.boolean,
    accepts: accepts?.values.join('|'),
    convert: v => {
      const value = accepts?.boolean ? String(goBool(v)) : v
      if (accepts && !accepts.values.includes(value)) throw new AliasRefused(`--${name}=${value}: outpost takes only ${accepts.values.join(' or ')} (${note})`)
      return undefined
    },
    note,
  }
}

function refused(name: string, note: string, boolean?: true): YurtHubFlag {
  return {
    name,
    kind: 'refused',
    boolean,
    convert: () => {
      throw new AliasRefused(`--${name} is YurtHub's; outpost has no such flag: ${note}`)
    },
    note,
  }
}

/** Go's strconv.ParseBool, which pflag uses for --flag=value on a switch. */
function goBool(value: string): boolean {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value)) return true
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(value)) return false
  throw new AliasValueError('must be true or false')
}

function seconds(value: string): string {
  if (!/^[0-9]{1,6}$/.test(value) || Number(value) < 1) throw new AliasValueError('must be a whole number of seconds, at least 1')
  return `${Number(value)}s`
}

/**
 * klog's verbosity as a level, after Kubernetes' logging conventions (sig-instrumentation
 * logging.md): 0-2 is what a component logs in production (2 is the recommended default, and
 * YurtHub's manifests pass --v=2), 3-4 is debugging, 5 and up tracing.
 */
export function klogLevel(value: string): string {
  if (!/^[0-9]{1,3}$/.test(value)) throw new AliasValueError('must be a klog verbosity, a whole number (0-2 info, 3-4 debug, 5+ trace)')
  const v = Number(value)
  return v <= 2 ? 'info' : v <= 4 ? 'debug' : 'trace'
}

/** YurtHub takes `host:port` and means https://; outpost's --server wants the scheme. */
function serverAddr(value: string): string {
  return value
    .split(',')
    .map(s => s.trim())
    .map(s => (s === '' || s.includes('://') ? s : `https://${s}`))
    .join(',')
}

/** YurtHub writes the core group as an empty group (`/v1/services`); outpost as `v1/services`. */
function gvrList(value: string): string {
  return value
    .split(',')
    .map(s => s.trim().replace(/^\//, ''))
    .join(',')
}

export const yurthubFlags: readonly YurtHubFlag[] = [
  alias('server-addr', 'server', 'an address without a scheme is https://, as in YurtHub; http:// is also taken', serverAddr),
  alias('nodepool-name', 'nodepool', "without it outpost reads the node's apps.openyurt.io/nodepool label"),
  alias('disk-cache-path', 'cache-dir', "outpost's own cache format: YurtHub's /etc/kubernetes/cache is not read; give a new directory"),
  alias('disabled-resource-filters', 'disable-filters', 'the same filter names; an unknown name is refused, not skipped'),
  switchAlias(
    'enable-resource-filter',
    'disable-filters',
    undefined,
    filterNames.join(','),
    'false turns every filter off',
    '--enable-resource-filter=false → --disable-filters (all)',
  ),
  alias('proxy-port', 'port', 'same default, 10261'),
  alias('proxy-secure-port', 'secure-port', 'same default, 10268; clients show a bearer token or a client certificate'),
  alias('bind-proxy-address', 'bind-address', 'the plain port only; beyond loopback it needs --insecure-allow-remote'),
  alias('serve-port', 'admin-port', 'same default, 10267: /v1/healthz, /v1/readyz, /metrics, /debug/*'),
  alias('multiplexer-port', 'pool-port', 'same default, 10269; served by the pool leader with --pool-sharing=on'),
  alias('pool-scope-resources', 'shared-resources', "core as v1/services; outpost's default also shares nodes, pods and endpoints", gvrList),
  alias('max-requests-in-flight', 'max-requests-inflight', 'watches counted apart (--max-long-running); 20 % kept for kubelet, kube-proxy'),
  alias('heartbeat-interval-seconds', 'health-interval', 'outpost probes GET /readyz of each apiserver', seconds),
  alias('heartbeat-timeout-seconds', 'health-timeout', 'seconds', seconds),
  alias('heartbeat-failed-retry', 'health-failures', 'failed real requests count too'),
  alias('heartbeat-healthy-threshold', 'health-successes', 'the same meaning'),
  alias('dummy-if-ip', 'pod-address', 'same default, 169.254.2.1; served by the HTTPS port'),
  alias('dummy-if-name', 'pod-interface', "outpost's default is outpost0"),
  switchAlias('enable-dummy-if', 'pod-address', undefined, 'off', 'false is --pod-address=off', '--enable-dummy-if=false → --pod-address=off'),
  alias('bootstrap-file', 'bootstrap-kubeconfig', "a bootstrap-token kubeconfig; the certificate got is the node's own"),
  { ...alias('v', 'log-level', 'klog verbosity: 0-2 info, 3-4 debug, 5+ trace', klogLevel), shown: '-v N → --log-level (0-2 info, 3-4 debug, 5+ trace)' },
  ignored('working-mode', 'it runs on edge nodes only', { values: ['edge'] }),
  ignored('bootstrap-mode', 'for the kubelet certificate give --kubeconfig /etc/kubernetes/kubelet.conf', { values: ['token'] }),
  ignored('lb-mode', 'it tries --server in order, failing over; no round robin', { values: ['priority'] }),
  ignored('namespace', 'outpost reads no yurt-hub-cfg ConfigMap: its settings are flags'),
  ignored('gc-frequency', 'outpost has no timed cache GC pass'),
  ignored('profiling', 'no pprof: /metrics and /debug/* on the admin port', { values: ['true', 'false'], boolean: true }),
  ignored('enable-iptables', 'it sets no iptables rules; pods reach it on --pod-address', { values: ['false'], boolean: true }),
  ignored('enable-node-pool', 'outpost reads NodePools when its filters need them', { values: ['true', 'false'], boolean: true }),
  ignored('kubelet-health-grace-period', 'outpost does not renew the node Lease for kubelet'),
  ignored('min-request-timeout', "watches served locally end at the client's timeoutSeconds"),
  ignored('log-flush-frequency', 'outpost writes each log line at once'),
  refused('join-token', "give --bootstrap-kubeconfig, a kubeconfig with the bootstrap token (YurtHub's --bootstrap-file)"),
  refused('discovery-token-ca-cert-hash', 'the apiserver is verified with the CA in --kubeconfig or --bootstrap-kubeconfig'),
  refused('discovery-token-unsafe-skip-ca-verification', 'the apiserver is always verified: put its CA in the kubeconfig', true),
  refused('root-dir', 'give --cert-dir and --cache-dir'),
  refused('hub-cert-organizations', "outpost's client certificate is the node's own (system:nodes); see manifests/rbac.yaml"),
  refused('enable-pool-service-topology', 'servicetopology reads NodePools itself; pool-wide watches: --pool-sharing=on', true),
  refused('host-control-plane-address', 'no local mode: give --server'),
  refused('vmodule', 'no per-file verbosity: --log-level'),
]

/**
 * YurtHub's flags whose names outpost uses with its own meaning: outpost's wins. Listed for the
 * help and the README, so a YurtHub user is not surprised.
 */
export const sameNameFlags: readonly { name: string; note: string }[] = [
  { name: 'bind-address', note: "outpost's is the plain proxy port's address; YurtHub's admin address is --admin-address" },
  { name: 'node-ip', note: "outpost's adds IPs to the serving certificate; the pool port binds --pool-bind-address" },
  { name: 'node-name', note: 'the same meaning' },
  { name: 'version', note: 'the same meaning' },
]

const byName = new Map(yurthubFlags.map(f => [f.name, f]))

/** The YurtHub flag an argument names (`--server-addr`, klog's `-v` or `--v`), if any. */
export function findYurtHubFlag(name: string): YurtHubFlag | undefined {
  if (name === '-v') return byName.get('v')
  return name.startsWith('--') ? byName.get(name.slice(2)) : undefined
}

/** The names a user may type for YurtHub's flags, for "did you mean". */
export function yurthubFlagNames(): string[] {
  return yurthubFlags.map(f => f.name).filter(n => n !== 'v')
}

function wrap(items: string[], indent: string, width: number): string[] {
  const lines: string[] = []
  let line = indent
  for (const [i, item] of items.entries()) {
    const piece = item + (i < items.length - 1 ? ',' : '')
    if (line.length + 1 + piece.length > width && line.trim() !== '') {
      lines.push(line)
      line = indent
    }
    line += (line.trim() === '' ? '' : ' ') + piece
  }
  if (line.trim() !== '') lines.push(line)
  return lines
}

/** The compact block --help ends with: every YurtHub flag by what outpost does with it. */
export function yurthubHelp(width = 120): string[] {
  const shown = (f: YurtHubFlag) => (f.name === 'v' ? '-v' : `--${f.name}`)
  const aliases = yurthubFlags.filter(f => f.kind === 'alias').map(f => f.shown ?? `${shown(f)} → --${f.to}`)
  const accepted = yurthubFlags.filter(f => f.kind === 'ignored').map(f => (f.accepts && f.accepts !== 'true|false' ? `${shown(f)}=${f.accepts}` : shown(f)))
  const refusedNames = yurthubFlags.filter(f => f.kind === 'refused').map(shown)
  return [
    'YurtHub flags accepted (--flag value or --flag=value; the README\'s "Coming from YurtHub" says where they differ):',
    ...wrap(aliases, '  ', width),
    '  accepted, no effect (outpost does this already, or has no such setting):',
    ...wrap(accepted, '    ', width),
    '  refused, with what to give instead:',
    ...wrap(refusedNames, '    ', width),
    `  same name, outpost's meaning: ${sameNameFlags
      .filter(f => f.note !== 'the same meaning')
      .map(f => `--${f.name}`)
      .join(', ')} (YurtHub's --bind-address is --admin-address)`,
  ]
}
