// The deployment files in manifests/: they parse, they are the Kubernetes objects they claim to be
// (no misspelled field: each object survives a round trip through client-node's typed models
// unchanged), and they agree with the hub: every flag the static pod passes is one the hub's parser
// knows, probes and kubeconfigs point at the ports those flags set, the paths are mounted.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { defaults } from '../lib/config.ts'
import { parse, parseAllDocuments } from 'yaml'
import { KubeConfig } from '@kubernetes/client-node'
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js'
import { flags, parseFlags } from '../cmd/flags.ts'
import { hubAddressForPods, podAddressProblem } from '../lib/config.ts'
import { productionRuntimeEnv } from './bench/runtime-env.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const manifestsDir = path.join(root, 'manifests')
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = Record<string, any>

interface Loaded {
  file: string
  docs: Obj[]
}

/** Every YAML file in manifests/ (the systemd unit and its environment file: test/manifests-systemd.test.ts), each parsed as a multi-document stream. */
function loadAll(): Loaded[] {
  return readdirSync(manifestsDir)
    .filter(name => /\.(yaml|kubeconfig)$/.test(name))
    .sort()
    .map(file => {
      const text = readFileSync(path.join(manifestsDir, file), 'utf8')
      const parsed = parseAllDocuments(text, { strict: true, uniqueKeys: true, prettyErrors: true })
      const docs = Array.isArray(parsed) ? parsed : []
      for (const doc of docs) {
        const problems = [...doc.errors, ...doc.warnings]
        if (problems.length > 0) throw new Error(`${file}: ${problems.map(p => p.message).join('; ')}`)
      }
      return { file, docs: docs.map(doc => doc.toJS() as Obj) }
    })
}

const loaded = loadAll()
const byFile = new Map(loaded.map(l => [l.file, l.docs]))

function docsOf(file: string): Obj[] {
  const docs = byFile.get(file)
  if (docs === undefined) throw new Error(`manifests/${file} is missing`)
  return docs
}

/** Keys sorted and undefined dropped, so two objects compare by content. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical)
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => [k, canonical(v)]),
    )
  }
  return value
}

const models: Record<string, string> = {
  'v1/Pod': 'V1Pod',
  'v1/ConfigMap': 'V1ConfigMap',
  'rbac.authorization.k8s.io/v1/ClusterRole': 'V1ClusterRole',
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': 'V1ClusterRoleBinding',
  'rbac.authorization.k8s.io/v1/Role': 'V1Role',
  'rbac.authorization.k8s.io/v1/RoleBinding': 'V1RoleBinding',
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy': 'V1ValidatingAdmissionPolicy',
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding': 'V1ValidatingAdmissionPolicyBinding',
}

t.test('every file in manifests/ parses, and every document is a Kubernetes object', async t => {
  t.ok(loaded.length >= 4, `manifests/ has the deployment files (${loaded.map(l => l.file).join(', ')})`)
  for (const { file, docs } of loaded) {
    t.ok(docs.length > 0, `${file}: at least one document`)
    for (const [i, doc] of docs.entries()) {
      const where = `${file}#${i}`
      t.ok(doc !== null && typeof doc === 'object' && !Array.isArray(doc), `${where}: a mapping, not an empty document`)
      if (doc === null || typeof doc !== 'object') continue
      t.type(doc.apiVersion, 'string', `${where}: apiVersion`)
      t.type(doc.kind, 'string', `${where}: kind`)
      if (file.endsWith('.kubeconfig')) {
        t.equal(doc.kind, 'Config', `${where}: a kubeconfig`)
        t.equal(doc.apiVersion, 'v1', `${where}: kubeconfig v1`)
        continue
      }
      t.match(doc.metadata?.name, /^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$/, `${where}: metadata.name`)
      const model = models[`${doc.apiVersion}/${doc.kind}`]
      t.ok(model, `${where}: ${doc.apiVersion} ${doc.kind} is a kind this test knows`)
      if (model === undefined) continue
      // client-node's models drop what they do not know: a misspelled or misplaced field disappears
      const roundTrip = ObjectSerializer.serialize(ObjectSerializer.deserialize(doc, model, ''), model, '')
      t.strictSame(canonical(JSON.parse(JSON.stringify(roundTrip))), canonical(doc), `${where}: every field is a ${model} field`)
    }
  }
})

// ---- the static pod -----------------------------------------------------------------------------

const pod = docsOf('outpost-static-pod.yaml')[0]
const container = pod.spec.containers[0] as Obj
const args = (container.args ?? []) as string[]
const envByName = new Map<string, Obj>((container.env ?? []).map((e: Obj) => [e.name, e]))

/** `--name=value` (or `--name value`) pairs, in order. */
function flagArgs(list: string[]): [string, string | undefined][] {
  const out: [string, string | undefined][] = []
  for (let i = 0; i < list.length; i++) {
    const arg = list[i]
    if (!arg.startsWith('--')) continue
    const eq = arg.indexOf('=')
    if (eq !== -1) out.push([arg.slice(2, eq), arg.slice(eq + 1)])
    else if (i + 1 < list.length && !list[i + 1].startsWith('--')) out.push([arg.slice(2), list[++i]])
    else out.push([arg.slice(2), undefined])
  }
  return out
}

const given = new Map(flagArgs(args))
function arg(name: string): string {
  const value = given.get(name)
  if (value === undefined) throw new Error(`the static pod does not pass --${name}`)
  return value
}

/** Flags shown commented out in the manifest (`# - --flag=…`), offered to the operator. */
const commentedFlags = [...readFileSync(path.join(manifestsDir, 'outpost-static-pod.yaml'), 'utf8').matchAll(/^\s*#\s*-\s+--([a-z0-9-]+)/gm)].map(m => m[1])

/** The arguments as kubelet hands them over: $(VAR) replaced from env (values made up for fieldRefs). */
function expandedArgs(): string[] {
  const sample: Record<string, string> = { NODE_NAME: 'edge-node-1', NODE_IP: '192.0.2.10' }
  return args.map(a => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (_, name: string) => sample[name] ?? `<${name}>`))
}

t.test('static pod: where and how it runs', async t => {
  t.equal(pod.apiVersion, 'v1')
  t.equal(pod.kind, 'Pod')
  t.equal(pod.metadata.namespace, 'kube-system')
  t.equal(pod.spec.hostNetwork, true, 'hostNetwork: kubelet and kube-proxy reach it on loopback')
  t.equal(pod.spec.priorityClassName, 'system-node-critical')
  t.equal(pod.spec.dnsPolicy, 'Default', "the node's resolver: cluster DNS sits behind the hub")
  t.equal(pod.spec.containers.length, 1)
  t.equal(container.image, `outpost:${pkg.version}`, 'the image the Dockerfile builds, at the package version')
  t.equal(container.command, undefined, "no command: the image's ENTRYPOINT runs the bundle")
  const grace = pod.spec.terminationGracePeriodSeconds
  t.ok(grace > 10 && grace <= 30, `terminationGracePeriodSeconds ${grace}: a little over the hub's 10 s shutdown bound`)
})

t.test('static pod: every flag it passes is one the hub knows', async t => {
  const known = new Set(flags.map(f => f.flag))
  t.ok(given.size > 0, 'it passes flags')
  for (const name of given.keys()) t.ok(known.has(name), `the hub knows --${name}`)
  for (const name of commentedFlags) t.ok(known.has(name), `the hub knows --${name} (shown commented out)`)
  for (const a of args) t.match(a, /^--[a-z0-9-]+=/, `${a}: --flag=value, one argument each`)
})

t.test("static pod: its arguments pass the hub's own parser", async t => {
  // parseFlags throws on what it does not accept: a throw fails this test with the parser's message
  const result = parseFlags(expandedArgs(), {})
  if (result.help) return t.fail('the static pod asks for --help: the hub would print its usage and exit, not serve')
  const config = result.config
  t.equal(config.nodeName, 'edge-node-1', '--node-name from $(NODE_NAME)')
  t.equal(config.kubeconfig, '/etc/kubernetes/kubelet.conf')
  t.equal(config.bindAddress, '127.0.0.1', 'plain HTTP on loopback only')
  t.equal(config.port, 10261)
  t.equal(config.adminPort, 10267)
  t.equal(config.cacheDir, '/var/lib/outpost/cache')
  // the HTTPS and certificate flags, read loosely so this test does not depend on HubConfig's shape
  const loose = config as unknown as Obj
  t.equal(loose.securePort, 10268)
  t.equal(loose.secureBindAddress, '127.0.0.1')
  t.equal(loose.adminAddress, '127.0.0.1')
  t.equal(loose.certDir, '/var/lib/outpost/pki')
  t.strictSame(loose.nodeIps, ['192.0.2.10'], '--node-ip from $(NODE_IP)')
  // as shipped, pods are pointed at the hub: masterservice, serviceenvupdater and forwardkubesvctraffic are on
  t.equal(config.podAddress, '169.254.2.1', 'the link-local pod address is kept')
  t.equal(podAddressProblem(config), undefined, 'nothing in the configuration keeps it from being kept (a certificate pods trust)')
  t.equal(hubAddressForPods(config, config.podAddress ?? undefined)?.host, '169.254.2.1', 'pods are pointed at it')
})

t.test('static pod: environment for the $(VAR) references', async t => {
  for (const a of args) {
    for (const [, name] of a.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)) {
      t.ok(envByName.has(name), `${a}: ${name} is defined in env`)
    }
  }
  t.equal(arg('node-name'), '$(NODE_NAME)')
  t.equal(envByName.get('NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName', 'NODE_NAME from the downward API')
})

t.test('static pod: probes on the admin port', async t => {
  const adminPort = Number(arg('admin-port'))
  t.equal(adminPort, 10267)
  const expect = { livenessProbe: '/v1/healthz', readinessProbe: '/v1/readyz', startupProbe: '/v1/healthz' } as const
  for (const [probe, p] of Object.entries(expect)) {
    const get = container[probe]?.httpGet
    t.ok(get, `${probe} is an httpGet`)
    if (!get) continue
    t.equal(get.host, '127.0.0.1', `${probe}: on loopback (hostNetwork would otherwise dial the node IP)`)
    t.equal(get.port, adminPort, `${probe}: the admin port`)
    t.equal(get.path, p, `${probe}: ${p}`)
  }
  const ports = new Map<number, Obj>((container.ports ?? []).map((p: Obj) => [p.containerPort, p]))
  for (const name of ['port', 'secure-port', 'admin-port']) {
    if (given.has(name)) t.ok(ports.has(Number(arg(name))), `--${name} ${arg(name)} is listed in ports`)
  }
})

t.test('static pod: volumes for every path it reads or writes', async t => {
  const volumes = new Map<string, Obj>(pod.spec.volumes.map((v: Obj) => [v.name, v]))
  const mounts = (container.volumeMounts ?? []) as Obj[]
  const hostPath = (p: string) => [...volumes.values()].find(v => v.hostPath?.path === p)

  const data = hostPath('/var/lib/outpost')
  t.ok(data, 'hostPath /var/lib/outpost')
  t.equal(data?.hostPath.type, 'DirectoryOrCreate', '/var/lib/outpost is created on a fresh node')
  t.equal(hostPath('/etc/kubernetes')?.hostPath.type, 'Directory', 'hostPath /etc/kubernetes')
  t.equal(hostPath('/var/lib/kubelet/pki')?.hostPath.type, 'Directory', 'hostPath /var/lib/kubelet/pki')

  const mountOf = (file: string) =>
    mounts.filter(m => file === m.mountPath || file.startsWith(m.mountPath.replace(/\/?$/, '/'))).sort((a, b) => b.mountPath.length - a.mountPath.length)[0]
  const check = (file: string, access: 'read' | 'write', hostDir?: string) => {
    const m = mountOf(file)
    t.ok(m, `${file} is under a volume mount`)
    if (!m) return
    if (access === 'write') t.not(m.readOnly, true, `${file}: writable`)
    else t.equal(m.readOnly, true, `${file}: mounted read-only`)
    const v = volumes.get(m.name)
    t.ok(v, `${m.name}: a volume of the pod`)
    if (hostDir !== undefined) t.equal(v?.hostPath?.path, hostDir, `${file}: from the host's ${hostDir}`)
    else t.ok(v?.hostPath || v?.emptyDir, `${file}: a hostPath or emptyDir`)
    if (v?.hostPath) t.equal(m.mountPath, v.hostPath.path, `${m.name}: mounted where it is on the host, so absolute paths in kubelet.conf resolve`)
  }
  check(arg('cache-dir'), 'write', '/var/lib/outpost')
  check(arg('cert-dir'), 'write', '/var/lib/outpost')
  check(arg('kubeconfig'), 'read', '/etc/kubernetes')
  // the client certificate kubeadm's kubelet.conf names, rotated by kubelet
  check('/var/lib/kubelet/pki/kubelet-client-current.pem', 'read', '/var/lib/kubelet/pki')
  for (const name of ['bootstrap-kubeconfig', 'tls-cert-file', 'tls-private-key-file', 'client-ca-file']) {
    if (given.has(name)) check(arg(name), 'read')
  }
  t.equal(container.securityContext?.readOnlyRootFilesystem, true)
  check('/tmp', 'write')
})

/** A Kubernetes memory quantity in MiB (the suffixes a manifest uses). */
function mebibytes(q: string): number {
  const m = /^([0-9.]+)(Ki|Mi|Gi|K|M|G)?$/.exec(q)
  if (!m) throw new Error(`unexpected quantity ${q}`)
  const unit = { Ki: 1 / 1024, Mi: 1, Gi: 1024, K: 1e3 / 2 ** 20, M: 1e6 / 2 ** 20, G: 1e9 / 2 ** 20 }[m[2] ?? ''] ?? 1 / 2 ** 20
  return Number(m[1]) * unit
}

t.test('static pod: resources leave room for --cache-memory', async t => {
  const r = container.resources
  t.ok(r?.requests?.cpu, 'requests.cpu')
  t.ok(r?.requests?.memory, 'requests.memory')
  t.ok(r?.limits?.memory, 'limits.memory')
  const limit = mebibytes(r.limits.memory)
  const request = mebibytes(r.requests.memory)
  t.ok(request <= limit, 'request within the limit')
  const cacheMiB = Number(given.get('cache-memory') ?? 256) // the hub's default when not given
  const heap = /--max-old-space-size=(\d+)/.exec(envByName.get('NODE_OPTIONS')?.value ?? '')
  t.ok(heap, 'V8 heap bounded (NODE_OPTIONS=--max-old-space-size)')
  const heapMiB = heap ? Number(heap[1]) : 0
  // cached bodies are Buffers outside V8's heap: both, plus Node's own baseline, must fit
  t.ok(limit >= cacheMiB + heapMiB + 64, `limit ${limit} MiB ≥ cache ${cacheMiB} + heap ${heapMiB} + 64 MiB for Node itself`)
})

t.test('static pod: Node starts with its NODE_OPTIONS and malloc settings', async t => {
  // Node refuses to start on an option NODE_OPTIONS does not allow, and the pod would crash-loop
  const runtime = productionRuntimeEnv() // what the bench runs the hub with, too
  t.match(runtime.NODE_OPTIONS, /--max-semi-space-size=\d+/, 'the young generation is bounded')
  const run = spawnSync(process.execPath, ['-e', 'process.stdout.write(JSON.stringify(require("v8").getHeapStatistics().heap_size_limit))'], {
    encoding: 'utf8',
    env: { ...process.env, ...runtime },
  })
  t.equal(run.status, 0, run.stderr)
  const limitMiB = Number(run.stdout) / 2 ** 20
  const oldMiB = Number(/--max-old-space-size=(\d+)/.exec(runtime.NODE_OPTIONS)?.[1])
  t.ok(limitMiB >= oldMiB && limitMiB < oldMiB + 64, `V8 took the heap bound: ${limitMiB.toFixed(0)} MiB for --max-old-space-size=${oldMiB}`)
})

t.test('static pod: security context', async t => {
  const sc = container.securityContext ?? {}
  t.equal(sc.allowPrivilegeEscalation, false, 'no privilege escalation')
  t.equal(sc.readOnlyRootFilesystem, true, 'read-only root filesystem')
  t.ok((sc.capabilities?.drop ?? []).includes('ALL'), 'every capability dropped')
  t.strictSame(sc.capabilities?.add ?? [], ['NET_ADMIN'], 'only NET_ADMIN added: the pod address interface')
  t.not(sc.privileged, true, 'not privileged')
  t.equal(sc.runAsUser, 0, "root, to read the kubelet's 0600 client key")
  // the comments inside the container's securityContext block say why it is root
  const text = readFileSync(path.join(manifestsDir, 'outpost-static-pod.yaml'), 'utf8')
  const block = /\n(\s+)securityContext:\n((?:\1\s+.*\n)+)/.exec(text)?.[2] ?? ''
  const comments = block
    .split('\n')
    .filter(line => line.trim().startsWith('#'))
    .join('\n')
  t.match(comments, /root/, 'a comment says why it runs as root')
  t.match(comments, /kubelet-client-current\.pem/, "and names the kubelet's key")
})

// ---- RBAC ---------------------------------------------------------------------------------------

const rbac = docsOf('rbac.yaml')
const clusterRoles = new Map(rbac.filter(d => d.kind === 'ClusterRole').map(d => [d.metadata.name as string, d]))
const bindings = rbac.filter(d => d.kind === 'ClusterRoleBinding')

function allows(rules: Obj[], group: string, resource: string, verb: string): boolean {
  return rules.some(
    r =>
      (r.apiGroups ?? []).some((g: string) => g === group || g === '*') &&
      (r.resources ?? []).some((x: string) => x === resource || x === '*') &&
      (r.verbs ?? []).some((v: string) => v === verb || v === '*'),
  )
}

function boundTo(role: string, group: string): boolean {
  return bindings.some(
    b =>
      b.roleRef?.kind === 'ClusterRole' &&
      b.roleRef?.name === role &&
      b.roleRef?.apiGroup === 'rbac.authorization.k8s.io' &&
      (b.subjects ?? []).some((s: Obj) => s.kind === 'Group' && s.name === group && s.apiGroup === 'rbac.authorization.k8s.io'),
  )
}

t.test('rbac: ClusterRole outpost covers what the hub reads and requests', async t => {
  const role = clusterRoles.get('outpost')
  t.ok(role, 'ClusterRole outpost')
  const rules = (role?.rules ?? []) as Obj[]
  const need: [string, string, string[]][] = [
    ['', 'nodes', ['get', 'list', 'watch']],
    ['', 'services', ['get', 'list', 'watch']],
    ['', 'endpoints', ['get', 'list', 'watch']],
    ['discovery.k8s.io', 'endpointslices', ['get', 'list', 'watch']],
    ['apps.openyurt.io', 'nodepools', ['get', 'list', 'watch']],
    ['certificates.k8s.io', 'certificatesigningrequests', ['create', 'get', 'list', 'watch']],
  ]
  for (const [group, resource, verbs] of need) {
    for (const verb of verbs) t.ok(allows(rules, group, resource, verb), `${verb} ${resource}${group ? '.' + group : ''}`)
  }
  t.notOk(allows(rules, '', 'secrets', 'get'), 'no Secrets')
  t.notOk(allows(rules, 'certificates.k8s.io', 'certificatesigningrequests/approval', 'update'), 'cannot approve its own CSRs')
})

t.test('rbac: bindings', async t => {
  t.ok(boundTo('outpost', 'system:nodes'), "outpost is bound to the group system:nodes (the hub uses the node's identity)")
  t.ok(boundTo('system:node-bootstrapper', 'system:bootstrappers'), 'bootstrap tokens may create CSRs')
  t.ok(
    boundTo('system:certificates.k8s.io:certificatesigningrequests:nodeclient', 'system:bootstrappers'),
    "bootstrap tokens' node-client CSRs are approved automatically",
  )
  for (const b of bindings) {
    const name = b.roleRef?.name as string
    t.ok(clusterRoles.has(name) || name.startsWith('system:'), `${b.metadata.name}: refers to a ClusterRole in this file or a built-in one (${name})`)
  }
})

t.test("rbac: the pool's Lease, for nodes only, in its namespace only, and only Leases named outpost-pool-*", async t => {
  const role = rbac.find(d => d.kind === 'Role' && d.metadata.name === 'outpost:pool-lease')
  t.ok(role, 'Role outpost:pool-lease')
  t.equal(role?.metadata.namespace, defaults.poolLeaseNamespace, 'in the default --pool-lease-namespace')
  const rules = (role?.rules ?? []) as Obj[]
  for (const verb of ['get', 'create', 'update']) t.ok(allows(rules, 'coordination.k8s.io', 'leases', verb), `${verb} leases`)
  t.notOk(allows(rules, 'coordination.k8s.io', 'leases', 'delete'), 'no deletes')
  t.notOk(allows(rules, '', 'secrets', 'get'), 'nothing else')
  t.notOk(
    rbac.some(d => d.kind === 'ClusterRole' && allows((d.rules ?? []) as Obj[], 'coordination.k8s.io', 'leases', 'update')),
    'no cluster-wide grant on Leases',
  )
  const binding = rbac.find(d => d.kind === 'RoleBinding' && d.metadata.name === 'outpost:pool-lease')
  t.match(binding, {
    metadata: { namespace: defaults.poolLeaseNamespace },
    roleRef: { kind: 'Role', name: 'outpost:pool-lease' },
    subjects: [{ kind: 'Group', name: 'system:nodes' }],
  })
  const policy = rbac.find(d => d.kind === 'ValidatingAdmissionPolicy')
  const policyBinding = rbac.find(d => d.kind === 'ValidatingAdmissionPolicyBinding')
  t.equal(policyBinding?.spec.policyName, policy?.metadata.name, 'the admission policy is bound')
  t.strictSame(policyBinding?.spec.validationActions, ['Deny'], 'and denies')
  const text = JSON.stringify(policy?.spec)
  t.match(text, /system:nodes/, 'it concerns nodes')
  t.match(text, /outpost-pool-/, "and holds them to the pools' Lease names")
})

// ---- kubeconfigs --------------------------------------------------------------------------------

function hubUrl(): string {
  return `http://${arg('bind-address')}:${arg('port')}`
}

function loadKubeconfig(text: string): KubeConfig {
  const kc = new KubeConfig()
  kc.loadFromString(text)
  return kc
}

t.test("kubelet's kubeconfig points at the hub, with no credentials", async t => {
  const [doc] = docsOf('kubelet-outpost.kubeconfig')
  t.equal(doc.kind, 'Config')
  const kc = loadKubeconfig(readFileSync(path.join(manifestsDir, 'kubelet-outpost.kubeconfig'), 'utf8'))
  t.equal(kc.getCurrentCluster()?.server, 'http://127.0.0.1:10261')
  t.equal(kc.getCurrentCluster()?.server, hubUrl(), "the static pod's --bind-address and --port")
  const user = kc.getCurrentUser()
  t.notOk(
    user?.token || user?.certFile || user?.certData || user?.keyFile || user?.keyData || user?.exec || user?.authProvider,
    'no credentials: the hub adds the node identity',
  )
  t.strictSame(doc.users ?? [], [], 'no users')
})

t.test("kube-proxy's ConfigMap patch", async t => {
  const docs = docsOf('kube-proxy-configmap-patch.yaml')
  t.equal(docs.length, 1)
  const [cm] = docs
  t.equal(cm.kind, 'ConfigMap')
  t.equal(cm.metadata.name, 'kube-proxy')
  t.equal(cm.metadata.namespace, 'kube-system')
  // a ConfigMap value is replaced whole: carrying config.conf would overwrite the operator's
  // KubeProxyConfiguration (mode, clusterCIDR, ...), whose clientConnection.kubeconfig already names
  // /var/lib/kube-proxy/kubeconfig.conf in kubeadm's layout
  t.strictSame(Object.keys(cm.data ?? {}), ['kubeconfig.conf'], 'only kubeconfig.conf changes')
  const kc = loadKubeconfig(cm.data['kubeconfig.conf'])
  t.equal(kc.getCurrentCluster()?.server, 'http://127.0.0.1:10261')
  t.equal(kc.getCurrentCluster()?.server, hubUrl(), "the static pod's --bind-address and --port")
  t.notOk(kc.getCurrentCluster()?.caFile || kc.getCurrentCluster()?.caData, 'no CA for a plain-HTTP server')
  // client-node's User has no tokenFile: read the kubeconfig's user as written
  const raw = parse(cm.data['kubeconfig.conf']) as Obj
  const context = (raw.contexts as Obj[]).find(c => c.name === raw['current-context'])?.context
  const user = (raw.users as Obj[] | undefined)?.find(u => u.name === context?.user)?.user
  t.strictSame(user, {}, 'no credentials: kube-proxy acts as the node, so the hub answers it from the cache offline')
})

// ---- docs/deploy.md -----------------------------------------------------------------------------

t.test('docs/deploy.md names files that exist', async t => {
  const doc = readFileSync(path.join(root, 'docs', 'deploy.md'), 'utf8')
  const named = new Set([...doc.matchAll(/(?<![\w/.-])manifests\/[A-Za-z0-9._-]+/g)].map(m => m[0]))
  t.ok(named.size >= 4, `it uses the manifests (${[...named].join(', ')})`)
  for (const file of named) t.ok(existsSync(path.join(root, file)), `${file} exists`)
  for (const file of readdirSync(manifestsDir)) t.ok(named.has(`manifests/${file}`), `manifests/${file} is used in the doc`)
  t.match(doc, /curl -s 127\.0\.0\.1:10267\/v1\/readyz/, 'verification on the admin port')
  t.match(doc, /\/debug\/topology/)
})
