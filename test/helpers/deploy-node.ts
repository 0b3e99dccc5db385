// A node to follow docs/deploy.md on (test/deploy-guide.e2e.ts): a network namespace of the
// test's own (never the host's network), the cluster in it (./deploy-cluster.ts), a directory that
// stands for the node's root filesystem, and the guide's commands run in the namespace as written,
// with only what must differ rewritten (rewrite()). The test plays kubelet: it starts the hub from
// the static pod manifest the guide installed; and systemd, from the unit the guide installed.
import { execFile, spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { parse } from 'yaml'
import { tempDir } from './temp-dirs.ts'
import { parseEnvFile, parseUnit, unitValue } from './deploy-unit.ts'

export const repo = fileURLToPath(new URL('../..', import.meta.url))
export const nodeName = 'kind-worker2'
/** status.hostIP: a documentation address on the namespace's loopback */
export const nodeIp = '192.0.2.10'
/** The host paths the guide writes or reads, which live under the node's root directory here. */
const hostPaths = ['/etc/kubernetes', '/var/lib/outpost', '/etc/systemd', '/var/lib/kubelet', '/etc/outpost', '/opt/outpost']

export interface Ran {
  command: string
  code: number
  stdout: string
  stderr: string
}

function exec(file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Ran> {
  return new Promise(resolve =>
    execFile(file, args, { ...options, timeout: 60_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0
      resolve({ command: args.join(' '), code, stdout, stderr })
    }),
  )
}

/** Why the guide cannot be followed here, or undefined. */
export async function cannotRun(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root to make a network namespace'
  for (const tool of ['ip', 'curl', 'kubectl', 'bash']) {
    if ((await exec('sh', ['-c', `command -v ${tool}`])).code !== 0) return `${tool} is not installed`
  }
  const probe = `outpost-probe-${process.pid}`
  const made = await exec('ip', ['netns', 'add', probe])
  if (made.code !== 0) return `cannot make a network namespace: ${made.stderr.trim()}`
  await exec('ip', ['netns', 'del', probe])
  return undefined
}

/** The shell commands of the guide's ```sh blocks, in order: `\` continuations joined, heredocs kept whole, comments dropped. */
export function guideCommands(markdown: string): string[] {
  const commands: string[] = []
  for (const block of markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const lines = block[1].split('\n')
    for (let i = 0; i < lines.length; i++) {
      let line = lines[i]
      while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1).trimEnd()} ${lines[++i].trim()}`
      line = line.replace(/\s+#\s.*$/, '').trim()
      if (line === '' || line.startsWith('#')) continue
      const heredoc = /<<-?'?(\w+)'?/.exec(line)
      if (heredoc) {
        const end = lines.indexOf(heredoc[1], i + 1)
        if (end === -1) throw new Error(`heredoc ${heredoc[1]} never ends: ${line}`)
        line = [line, ...lines.slice(i + 1, end + 1)].join('\n')
        i = end
      }
      commands.push(line)
    }
  }
  return commands
}

/**
 * The guide's command as it runs here: no sudo (the test is root in its own namespace), the host
 * paths under `root` (a heredoc's body is written as the guide has it), placeholders filled in.
 */
export function rewrite(command: string, root: string, vars: Record<string, string>): string {
  const [first, ...body] = command.split('\n')
  const paths = new RegExp(`(^|[\\s='"])(${hostPaths.join('|')})(?=[/\\s'"]|$)`, 'g')
  let line = first.replace(/(^|[\s|&;(])sudo\s+/g, '$1').replace(paths, `$1${root}$2`)
  for (const [name, value] of Object.entries(vars)) line = line.replace(new RegExp(`\\b${name}\\b`, 'g'), value)
  return [line, ...body].join('\n')
}

export interface DeployNode {
  ns: string
  /** the node's root filesystem */
  root: string
  /** the checkout the guide is followed from (a copy of manifests/: the guide edits it) */
  work: string
  simulatorUrl: string
  /** a guide command, rewritten, run in the namespace from `work` with the operator's kubeconfig */
  run(command: string, vars?: Record<string, string>): Promise<Ran>
  /** a command of the test's own, in the namespace */
  sh(command: string): Promise<Ran>
  fault(fault: 'refuse' | 'none'): Promise<void>
  /** kubelet's part: runs the static pod from root/etc/kubernetes/manifests/outpost.yaml */
  startHub(extraArgs: string[]): void
  /** systemd's part: runs root/etc/systemd/system/outpost.service's ExecStart with its EnvironmentFile */
  startUnit(): void
  stopHub(): Promise<number | null>
  hubOutput(): string
}

export async function startDeployNode(t: Test): Promise<DeployNode> {
  const ns = `outpost-deploy-${process.pid}`
  const base = tempDir(t, 'outpost-deploy-')
  const root = path.join(base, 'root')
  const work = path.join(base, 'work')
  const home = path.join(base, 'home')
  for (const dir of [work, home, `${root}/etc/kubernetes/manifests`, `${root}/var/lib/kubelet/pki`]) mkdirSync(dir, { recursive: true })
  cpSync(path.join(repo, 'manifests'), path.join(work, 'manifests'), { recursive: true })
  // kubeadm's KubeletConfiguration, of which the guide reads staticPodPath
  writeFileSync(
    `${root}/var/lib/kubelet/config.yaml`,
    'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n',
  )

  const children: ChildProcess[] = []
  t.teardown(async () => {
    for (const child of children.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue
      const exited = once(child, 'exit')
      child.kill('SIGKILL')
      await exited
    }
    await exec('ip', ['netns', 'del', ns])
  })
  const ip = async (...args: string[]) => {
    const done = await exec('ip', args)
    if (done.code !== 0) throw new Error(`ip ${args.join(' ')}: ${done.stderr.trim()}`)
  }
  await ip('netns', 'add', ns)
  await ip('-n', ns, 'link', 'set', 'lo', 'up')
  await ip('-n', ns, 'addr', 'add', `${nodeIp}/32`, 'dev', 'lo')

  const simulator = spawn('ip', ['netns', 'exec', ns, process.execPath, '--import', 'tsx', 'test/helpers/deploy-cluster.ts'], {
    cwd: repo,
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  children.push(simulator)
  let simOut = ''
  simulator.stdout!.on('data', chunk => (simOut += chunk.toString()))
  const waitFor = async (what: string, done: () => boolean) => {
    const deadline = Date.now() + 60_000
    while (!done()) {
      if (simulator.exitCode !== null || Date.now() > deadline) throw new Error(`the cluster did not print ${what}: ${simOut}`)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  }
  await waitFor('its URL', () => simOut.includes('"url"'))
  const simulatorUrl = (JSON.parse(simOut.split('\n')[0]) as { url: string }).url

  // kubeadm's kubelet.conf, the hub's source of the node's credentials (the simulator takes any token)
  writeFileSync(
    `${root}/etc/kubernetes/kubelet.conf`,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: ${simulatorUrl}\ncontexts:\n- name: default\n  context:\n    cluster: kubernetes\n    user: node\ncurrent-context: default\nusers:\n- name: node\n  user:\n    token: node-token\n`,
    { mode: 0o600 },
  )
  // the operator's kubeconfig, for kubectl
  const kubeconfig = path.join(home, 'admin.conf')
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: ${simulatorUrl}\ncontexts:\n- name: c\n  context:\n    cluster: c\ncurrent-context: c\n`,
  )
  const env = { PATH: process.env.PATH, HOME: home, KUBECONFIG: kubeconfig }
  const sh = (command: string) => exec('ip', ['netns', 'exec', ns, 'bash', '-o', 'pipefail', '-c', command], { cwd: work, env })

  let hub: ChildProcess | undefined
  let hubOut = ''
  const spawnHub = (command: string[], env: NodeJS.ProcessEnv) => {
    hub = spawn('ip', ['netns', 'exec', ns, ...command], { cwd: repo, env })
    children.push(hub)
    hub.stdout!.on('data', chunk => (hubOut += chunk.toString()))
    hub.stderr!.on('data', chunk => (hubOut += chunk.toString()))
  }
  let faults = 0
  return {
    ns,
    root,
    work,
    simulatorUrl,
    async run(command, vars = {}) {
      const ran = await sh(rewrite(command, root, { NODE: nodeName, ...vars }))
      return { ...ran, command }
    },
    sh,
    async fault(fault) {
      simulator.stdin!.write(`${fault}\n`)
      faults++
      await waitFor(`fault ${fault}`, () => simOut.split('{"fault":').length > faults)
    },
    startHub(extraArgs) {
      const pod = parse(readFileSync(`${root}/etc/kubernetes/manifests/outpost.yaml`, 'utf8'))
      const container = pod.spec.containers[0]
      const fieldValues: Record<string, string> = { 'spec.nodeName': nodeName, 'status.hostIP': nodeIp }
      const vars: Record<string, string> = {}
      for (const e of container.env ?? []) vars[e.name] = e.value ?? fieldValues[e.valueFrom?.fieldRef?.fieldPath]
      // $(VAR) as kubelet expands it; the hostPath mounts put the host's paths at the same paths
      const args = (container.args as string[]).map(a =>
        rewrite(
          a.replace(/\$\((\w+)\)/g, (_, v: string) => vars[v]),
          root,
          {},
        ),
      )
      spawnHub([process.execPath, '--import', 'tsx', 'cmd/outpost.ts', ...args, ...extraArgs], { PATH: process.env.PATH, ...vars })
    },
    startUnit() {
      const unit = parseUnit(readFileSync(`${root}/etc/systemd/system/outpost.service`, 'utf8'))
      const [node, bundle, ...args] = (unitValue(unit, 'Service', 'ExecStart') ?? '').split(/\s+/)
      const file = parseEnvFile(readFileSync(root + (unitValue(unit, 'Service', 'EnvironmentFile') ?? ''), 'utf8'))
      // the host's paths in the settings are under root here, as the guide's commands
      const env = Object.fromEntries(Object.entries(file).map(([k, v]) => [k, rewrite(v, root, {})]))
      // the unit's node where this machine has one there; this test's own otherwise
      spawnHub([existsSync(node) ? node : process.execPath, rewrite(bundle, root, {}), ...args], { PATH: process.env.PATH, ...env })
    },
    async stopHub() {
      if (!hub || hub.exitCode !== null) return hub?.exitCode ?? null
      const exited = once(hub, 'exit')
      hub.kill('SIGTERM')
      const [code] = await exited
      return code as number | null
    },
    hubOutput: () => hubOut,
  }
}
