// manifests/outpost.service and manifests/outpost.env against manifests/outpost-static-pod.yaml:
// the unit runs the program the image runs, with the static pod's flags one for one (as the
// environment variables the hub reads for them) and Node's settings, and keeps what the pod's
// securityContext keeps; the differences are the two the pod takes from kubelet, each documented.
// (In its own file: test/manifests.test.ts is over the size a file should have.)
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { parse } from 'yaml'
import { flags, parseFlags } from '../cmd/flags.ts'
import { commentedVariables, parseEnvFile, parseUnit, unitValue } from './helpers/deploy-unit.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const read = (file: string) => readFileSync(path.join(root, file), 'utf8')

const podText = read('manifests/outpost-static-pod.yaml')
const container = parse(podText).spec.containers[0]
const podArgs = container.args as string[]
const podEnv = new Map<string, { value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>(container.env.map((e: { name: string }) => [e.name, e]))
const unitText = read('manifests/outpost.service')
const unit = parseUnit(unitText)
const envText = read('manifests/outpost.env')
const env = parseEnvFile(envText)
const flagByName = new Map(flags.map(f => [f.flag, f]))

/**
 * What the pod gets from kubelet, which a unit cannot: the unit leaves them to the hub's defaults,
 * which agree on a node as kubeadm sets it up, and the environment file says so and shows the line
 * to set them.
 */
const fromKubelet: Record<string, string> = {
  // $(NODE_NAME), spec.nodeName: kubelet's node name; the hub's default is the host name, lower-cased, kubelet's own default
  'node-name': 'spec.nodeName',
  // $(NODE_IP), status.hostIP: the node's primary address; the hub's default is every address of the host (all in its certificate)
  'node-ip': 'status.hostIP',
}

t.test('the unit runs the program the image runs, from the environment file the guide installs', async t => {
  const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(read('Dockerfile'))?.[1] ?? '[]') as string[]
  const exec = (unitValue(unit, 'Service', 'ExecStart') ?? '').split(/\s+/)
  t.equal(exec.length, 2, `${exec.join(' ')}: node and the bundle, no arguments (the flags are in the environment file)`)
  t.equal(path.basename(exec[0]), path.basename(entrypoint[0]), 'node, as the image runs')
  t.ok(path.isAbsolute(exec[0]), 'at an absolute path')
  t.equal(path.basename(exec[1]), path.basename(entrypoint[1]), `the bundle, as the image runs (${entrypoint[1]})`)
  t.equal(unitValue(unit, 'Service', 'EnvironmentFile'), '/etc/outpost/outpost.env')
  t.match(read('docs/deploy.md'), /install -D -m 0644 manifests\/outpost\.env \/etc\/outpost\/outpost\.env/, 'where docs/deploy.md installs it')
  t.match(read('docs/deploy.md'), new RegExp(`install -D -m 0644 dist/outpost\\.mjs ${exec[1]}`), 'and the bundle')
})

t.test("the static pod's flags, flag for flag, as the hub's environment variables", async t => {
  const podFlags = podArgs.map(a => /^--([a-z0-9-]+)=(.*)$/.exec(a)!).map(([, name, value]) => [name, value] as const)
  const given = new Set<string>()
  for (const [name, value] of podFlags) {
    const variable = flagByName.get(name)?.env
    t.ok(variable, `--${name} has an environment variable`)
    if (!variable) continue
    given.add(variable)
    if (name in fromKubelet) {
      t.equal(podEnv.get(/^\$\((\w+)\)$/.exec(value)?.[1] ?? '')?.valueFrom?.fieldRef?.fieldPath, fromKubelet[name], `--${name}: the pod's from kubelet`)
      t.notOk(variable in env, `${variable}: not set, the hub's default instead`)
      t.ok(commentedVariables(envText).includes(variable), `${variable}: shown commented out, to set when the default is not kubelet's`)
      continue
    }
    t.equal(env[variable], value, `--${name}=${value}: ${variable}`)
  }
  const extra = Object.keys(env).filter(v => v.startsWith('OUTPOST_') && !given.has(v))
  t.strictSame(extra, [], 'no setting the static pod does not make')
  // the flags both offer commented out (a bootstrap token, a client CA)
  const podCommented = [...podText.matchAll(/^\s*#\s*-\s+--([a-z0-9-]+)=/gm)].map(m => flagByName.get(m[1])?.env)
  for (const variable of podCommented) t.ok(commentedVariables(envText).includes(variable!), `${variable}: offered commented out in both`)
})

t.test("Node's settings: the static pod's and the image's", async t => {
  for (const name of ['NODE_OPTIONS', 'MALLOC_MMAP_THRESHOLD_']) t.equal(env[name], podEnv.get(name)?.value, name)
  t.equal(env.NODE_ENV, /^ENV NODE_ENV=(\S+)$/m.exec(read('Dockerfile'))?.[1], "NODE_ENV, as the image's")
  const other = Object.keys(env).filter(v => !v.startsWith('OUTPOST_') && !['NODE_OPTIONS', 'MALLOC_MMAP_THRESHOLD_', 'NODE_ENV'].includes(v))
  t.strictSame(other, [], 'nothing else')
})

t.test("the hub's parser makes the same configuration of both", async t => {
  const sample: Record<string, string> = { NODE_NAME: 'edge-node-1', NODE_IP: '192.0.2.10' }
  const fromPod = parseFlags(
    podArgs.map(a => a.replace(/\$\((\w+)\)/g, (_, v: string) => sample[v])),
    {},
  )
  const fromUnit = parseFlags([], env)
  if (fromPod.help || fromUnit.help || !('config' in fromPod) || !('config' in fromUnit)) return t.fail('both are configurations')
  const strip = (c: object) => Object.fromEntries(Object.entries(c).filter(([k]) => k !== 'nodeName' && k !== 'nodeIps'))
  t.strictSame(strip(fromUnit.config), strip(fromPod.config), 'all but the node name and addresses')
  t.equal(fromUnit.config.nodeName, os.hostname().toLowerCase(), "the node name: the host name, lower-cased, kubelet's default")
})

t.test("the unit keeps what the pod's securityContext and spec keep", async t => {
  const sc = container.securityContext
  const service = (key: string) => unitValue(unit, 'Service', key)
  t.equal(service('User') ?? 'root', 'root', `root, as the pod (runAsUser ${sc.runAsUser}): the node's credentials are 0600 root`)
  t.strictSame(
    service('CapabilityBoundingSet')?.split(/\s+/),
    sc.capabilities.add.map((c: string) => `CAP_${c}`),
    'every capability dropped but NET_ADMIN (the pod address interface)',
  )
  t.equal(service('NoNewPrivileges'), 'yes', 'allowPrivilegeEscalation: false')
  t.equal(service('ProtectSystem'), 'strict', 'readOnlyRootFilesystem')
  t.equal(service('StateDirectory'), 'outpost', 'but /var/lib/outpost, made if missing (hostPath DirectoryOrCreate)')
  for (const dir of [env.OUTPOST_CACHE_DIR, env.OUTPOST_CERT_DIR]) t.match(dir, /^\/var\/lib\/outpost\//, `${dir}: under the StateDirectory, writable`)
  t.match(service('RestrictAddressFamilies') ?? '', /\bAF_NETLINK\b/, 'netlink, for ip')
  t.notOk(service('MemoryDenyWriteExecute'), "no MemoryDenyWriteExecute: V8's compiled code")
  t.notOk(service('PrivateNetwork'), "the host's network (hostNetwork: true)")
  t.equal(service('Restart'), 'always')
  t.equal(unitValue(unit, 'Unit', 'StartLimitIntervalSec'), '0', 'restarted however often it fails')
  t.match(unitValue(unit, 'Unit', 'Before') ?? '', /\bkubelet\.service\b/, 'started before kubelet, which reads through it')
  t.equal(Number(service('TimeoutStopSec')), parse(podText).spec.terminationGracePeriodSeconds, "SIGKILL when the pod's would come")
  t.equal(service('MemoryMax'), container.resources.limits.memory.replace(/i$/, ''), "the pod's memory limit")
  t.equal(unitValue(unit, 'Install', 'WantedBy'), 'multi-user.target')
})

const analyze = spawnSync('systemd-analyze', ['--version']).error ? 'systemd-analyze is not installed' : false

t.test('systemd takes the unit as it is: no unknown or misplaced setting', { skip: analyze }, async t => {
  // verify reads the unit's directory: a copy, alone, so nothing else there is verified with it
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-unit-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, 'outpost.service'), unitText)
  const run = spawnSync('systemd-analyze', ['verify', '--man=no', path.join(dir, 'outpost.service')], { encoding: 'utf8', timeout: 60_000 })
  t.equal(run.status, 0, 'verify exits 0', { stderr: run.stderr })
  // a machine without node at the unit's path says so; that is the machine, not the unit
  const said = run.stderr.split('\n').filter(l => l.trim() !== '' && !/\/usr\/bin\/node/.test(l))
  t.strictSame(said, [], 'and says nothing of it')
  const security = spawnSync('systemd-analyze', ['security', '--offline=yes', path.join(dir, 'outpost.service')], { encoding: 'utf8', timeout: 60_000 })
  const exposure = Number(/Overall exposure level for outpost\.service: ([0-9.]+)/.exec(security.stdout)?.[1])
  if (Number.isNaN(exposure)) return t.comment(`no offline security analysis in this systemd: ${security.stderr.trim()}`)
  t.ok(exposure <= 3, `systemd's exposure score ${exposure} (0 to 10, root with NET_ADMIN and the host's network)`)
})
