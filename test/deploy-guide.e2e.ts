// docs/deploy.md followed as a person follows it: every command of its ```sh blocks, in order, run
// as written in a network namespace of the test's own (test/helpers/deploy-node.ts), against the
// apiserver simulator and the hub the guide's static pod runs. Only sudo, the host's paths (under a
// temporary root) and the placeholders NODE and NAME differ. What cannot run here is listed below
// with why; every command is one or the other, so a new command in the guide needs a check here.
// The systemd unit's section comes last, on the node the rollback left clean: the test builds the
// bundle the guide installs, and starts it from the installed unit and environment file.
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import type { Test } from 'tap'
import { createMirrorPod, fileMode, json, kubeconfigServer, mentions, playKubeProxy, playKubelet } from './helpers/deploy-components.ts'
import type { Said } from './helpers/deploy-components.ts'
import { cannotRun, guideCommands, nodeName, repo, startDeployNode } from './helpers/deploy-node.ts'
import type { DeployNode, Ran } from './helpers/deploy-node.ts'

const guide = readFileSync(path.join(repo, 'docs', 'deploy.md'), 'utf8')
const commands = guideCommands(guide)

/** What the guide's commands leave behind, for the commands after them. */
const state = { csr: '', approved: false, offline: false }

interface Step {
  what: string
  matches(command: string): boolean
  /** the exit code the command must give (0 unless said) */
  code?: number
  /** run again until the check holds (up to 60 s), as a person waits for what the guide says */
  until?: boolean
  before?(t: Test, node: DeployNode): Promise<void>
  check(ran: Ran, node: DeployNode): Said
  after?(t: Test, node: DeployNode): Promise<void>
}

// Each command's expected outcome, in the guide's order. A command that occurs twice (readyz, the
// metrics, the restart) is checked against what the steps before it did.
const steps: Step[] = [
  {
    what: 'the manifest names the pushed image',
    matches: c => c.startsWith('sed -i ') && c.endsWith('manifests/outpost-static-pod.yaml'),
    check: (_ran, node) => {
      const edited = readFileSync(path.join(node.work, 'manifests/outpost-static-pod.yaml'), 'utf8')
      const original = readFileSync(path.join(repo, 'manifests/outpost-static-pod.yaml'), 'utf8')
      return [
        [/^ {4}image: registry\.example\.com\/edge\/outpost:0\.1\.0$/m.test(edited), 'image: registry.example.com/edge/outpost:0.1.0'],
        [edited === original.replace('image: outpost:0.1.0', 'image: registry.example.com/edge/outpost:0.1.0'), 'and nothing else changed'],
      ]
    },
  },
  {
    what: 'every object of rbac.yaml is created',
    matches: c => c === 'kubectl apply -f manifests/rbac.yaml',
    check: ran => {
      const objects = readFileSync(path.join(repo, 'manifests/rbac.yaml'), 'utf8').match(/^kind: \w+\nmetadata:\n {2}name: \S+/gm) ?? []
      return [
        [objects.length === 9, `${objects.length} objects in the file`],
        ...objects.map((o): Said[0] => {
          const [, kind, name] = /^kind: (\w+)\nmetadata:\n {2}name: (\S+)/.exec(o)!
          return [new RegExp(`^${kind.toLowerCase()}\\.[\\w.]+/${name} created$`, 'm').test(ran.stdout), `${kind} ${name} created`]
        }),
      ]
    },
  },
  { what: 'the binding is there', matches: c => c.startsWith('kubectl get clusterrolebinding outpost'), check: ran => mentions(ran.stdout, /^outpost\s/m) },
  {
    what: "kubeadm's static pod directory",
    matches: c => c.startsWith('grep staticPodPath'),
    check: ran => [[ran.stdout.trim() === 'staticPodPath: /etc/kubernetes/manifests', ran.stdout.trim()]],
  },
  {
    what: 'the static pod is in place, root-only',
    matches: c => c.includes('install -m 0600 manifests/outpost-static-pod.yaml'),
    check: (_ran, node) => {
      const file = `${node.root}/etc/kubernetes/manifests/outpost.yaml`
      return [
        [fileMode(file) === 0o600, 'mode 0600'],
        [
          existsSync(file) && readFileSync(file, 'utf8') === readFileSync(path.join(node.work, 'manifests/outpost-static-pod.yaml'), 'utf8'),
          'the manifest as edited',
        ],
      ]
    },
    // kubelet's part: it runs the static pod (faster health probes: the offline check below would
    // take 15 s at the default 5 s)
    after: async (t, node) => {
      node.startHub(['--health-interval=200ms'])
      await createMirrorPod(t, node)
    },
  },
  { what: 'the hub is alive', matches: c => c.endsWith(':10267/v1/healthz'), until: true, check: ran => [[ran.stdout.trim() === 'ok', ran.stdout]] },
  {
    what: 'ready once the serving certificate is issued',
    matches: c => c === 'curl -s 127.0.0.1:10267/v1/readyz',
    until: true,
    check: ran =>
      state.approved
        ? [[ran.stdout.trim() === 'ok', `ok, and nothing more: ${ran.stdout}`]]
        : mentions(ran.stdout, /^not ready:\n(.*\n)*- serving certificate: CSR \(signer kubernetes\.io\/kubelet-serving\) not issued yet; approve it/),
  },
  {
    what: 'the pod address',
    matches: c => c === 'ip addr show outpost0',
    until: true,
    check: ran => mentions(ran.stdout, /^\s+inet 169\.254\.2\.1\/32 .*outpost0$/m),
  },
  {
    what: "the hub's CSR",
    matches: c => c.startsWith('kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving'),
    until: true,
    check: ran => {
      const names = [...ran.stdout.matchAll(/^(outpost-serving-\S+)\s/gm)].map(m => m[1])
      state.csr = names[0] ?? ''
      return [[names.length === 1, `one CSR: ${names.join(', ')}`]]
    },
  },
  {
    what: 'approved',
    matches: c => c === 'kubectl certificate approve NAME',
    check: ran => {
      state.approved = ran.code === 0
      return [[ran.stdout.trim() === `certificatesigningrequest.certificates.k8s.io/${state.csr} approved`, ran.stdout.trim()]]
    },
  },
  {
    what: 'the pod address held, the filters that point pods at it on',
    matches: c => c.endsWith(':10267/debug/filters'),
    check: ran => {
      const answer = json(ran.stdout)
      const on = (name: string) => answer?.filters?.find((f: { name: string }) => f.name === name)?.enabled === true
      return [
        [
          answer?.podAddress?.held === true && answer.podAddress.address === '169.254.2.1' && answer.podAddress.interface === 'outpost0',
          JSON.stringify(answer?.podAddress),
        ],
        ...['masterservice', 'serviceenvupdater', 'forwardkubesvctraffic'].map((f): Said[0] => [on(f), `${f} on`]),
      ]
    },
  },
  {
    what: "kubelet's kubeconfig, root-only, naming the hub",
    matches: c => c.includes('install -m 0600 manifests/kubelet-outpost.kubeconfig'),
    check: (_ran, node) => {
      const file = `${node.root}/var/lib/outpost/kubelet.conf`
      return [
        [fileMode(file) === 0o600, 'mode 0600'],
        [existsSync(file) && kubeconfigServer(readFileSync(file, 'utf8')) === 'http://127.0.0.1:10261', 'server: http://127.0.0.1:10261'],
      ]
    },
  },
  {
    what: 'the drop-in directory',
    matches: c => c.includes('mkdir -p /etc/systemd/system/kubelet.service.d'),
    check: (_r, node) => [[existsSync(`${node.root}/etc/systemd/system/kubelet.service.d`), 'made']],
  },
  {
    what: "kubelet's drop-in",
    matches: c => c.includes('tee /etc/systemd/system/kubelet.service.d/20-outpost.conf'),
    check: (_r, node) => {
      const file = `${node.root}/etc/systemd/system/kubelet.service.d/20-outpost.conf`
      const text = existsSync(file) ? readFileSync(file, 'utf8') : ''
      return [[text === '[Service]\nEnvironment="KUBELET_KUBECONFIG_ARGS=--kubeconfig=/var/lib/outpost/kubelet.conf"\n', JSON.stringify(text)]]
    },
  },
  // (Ready is the status kubelet posts; the simulator's nodes have none)
  { what: 'the node', matches: c => c === 'kubectl get node NODE', check: ran => mentions(ran.stdout, new RegExp(`^${nodeName}\\s`, 'm')) },
  {
    what: "kubelet's requests through the hub",
    matches: c => c.includes('grep \'^outpost_requests_total{component="kubelet"\''),
    until: true,
    check: ran => mentions(ran.stdout, /^outpost_requests_total\{component="kubelet",verb="list",resource="pods",code="200",source="cache"\} [1-9]/m),
  },
  {
    what: 'the mirror pods',
    matches: c => c.includes('get pods -l app.kubernetes.io/name=outpost'),
    until: true,
    check: ran => mentions(ran.stdout, new RegExp(`^outpost-${nodeName}\\s.*\\s${nodeName}\\s`, 'm')),
  },
  {
    what: "kubeadm's clientConnection",
    matches: c => c.endsWith("| grep 'kubeconfig:'"),
    check: ran => mentions(ran.stdout, /^ {2}kubeconfig: \/var\/lib\/kube-proxy\/kubeconfig\.conf$/m),
  },
  {
    what: "kube-proxy's kubeconfig saved",
    matches: c => c.endsWith('> kube-proxy-kubeconfig.conf.orig'),
    check: (_r, node) => [
      [kubeconfigServer(readFileSync(path.join(node.work, 'kube-proxy-kubeconfig.conf.orig'), 'utf8')) === 'https://control-plane.example:6443', 'the cloud'],
    ],
  },
  {
    what: 'patched',
    matches: c => c.includes('--patch-file manifests/kube-proxy-configmap-patch.yaml'),
    check: ran => [[ran.stdout.trim() === 'configmap/kube-proxy patched', ran.stdout.trim()]],
  },
  {
    what: 'kube-proxy restarted',
    matches: c => c === 'kubectl -n kube-system rollout restart daemonset kube-proxy',
    check: ran => [[ran.stdout.trim() === 'daemonset.apps/kube-proxy restarted', ran.stdout.trim()]],
    after: playKubeProxy,
  },
  {
    what: 'rolled out',
    matches: c => c.includes('rollout status daemonset kube-proxy'),
    check: ran => mentions(ran.stdout, 'daemon set "kube-proxy" successfully rolled out'),
  },
  {
    what: 'kube-proxy names the hub',
    matches: c => c.endsWith('| grep server:'),
    check: ran => [[ran.stdout.trim() === 'server: http://127.0.0.1:10261', ran.stdout.trim()]],
  },
  {
    what: "kube-proxy's requests through the hub",
    matches: c => c.includes('grep \'^outpost_requests_total{component="kube-proxy"\''),
    until: true,
    check: ran =>
      mentions(
        ran.stdout,
        /^outpost_requests_total\{component="kube-proxy",verb="list",resource="endpointslices\.discovery\.k8s\.io",code="200",source="cache"\} [1-9]/m,
      ),
  },
  {
    what: 'the topology context',
    matches: c => c.endsWith(':10267/debug/topology'),
    check: ran => [
      [json(ran.stdout)?.node === nodeName && json(ran.stdout)?.pool === 'shanghai' && json(ran.stdout)?.known === true, ran.stdout.slice(0, 200)],
    ],
  },
  {
    what: 'what kubelet and kube-proxy read, kept',
    matches: c => c.endsWith(':10267/debug/cache'),
    check: ran => {
      const caches: { resource: string; components: string[] }[] = json(ran.stdout)?.watchCaches ?? []
      const serves = (resource: string, component: string) => caches.some(w => w.resource === resource && w.components.includes(component))
      return [
        [json(ran.stdout)?.cloud === 'online', 'online'],
        [serves('pods', 'kubelet'), "kubelet's pods"],
        [serves('endpointslices.discovery.k8s.io', 'kube-proxy'), "kube-proxy's slices"],
      ]
    },
  },
  {
    what: "kube-proxy's requests reach the hub",
    matches: c => c.endsWith(`:10267/debug/cache | grep -o '"kube-proxy"' | head -n 1`),
    check: ran => [[ran.stdout === '"kube-proxy"\n', ran.stdout]],
  },
  {
    what: 'online, every apiserver up',
    matches: c => c.includes("grep -E '^outpost_(cloud_online|upstream_up)'"),
    check: (ran, node) => [[ran.stdout === `outpost_cloud_online 1\noutpost_upstream_up{server="${node.simulatorUrl}"} 1\n`, ran.stdout]],
  },
  {
    what: 'the cloud, as the hub sees it',
    matches: c => c.endsWith("| grep '^outpost_cloud_online'"),
    until: true,
    check: ran => [[ran.stdout === `outpost_cloud_online ${state.offline ? 0 : 1}\n`, ran.stdout]],
  },
  {
    what: "kubelet's pods from the cache",
    matches: c => c.includes('-A kubelet/v1') && c.endsWith("| grep -i '^x-outpost-cache:'"),
    check: ran => [[ran.stdout.trim() === 'x-outpost-cache: hit', ran.stdout.trim()]],
  },
  {
    what: "kube-proxy's own kubeconfig back",
    matches: c => c.includes('--from-file=kubeconfig.conf=kube-proxy-kubeconfig.conf.orig'),
    check: ran => [[ran.stdout.trim() === 'configmap/kube-proxy patched', ran.stdout.trim()]],
  },
  {
    what: 'the drop-in gone',
    matches: c => c.endsWith('rm /etc/systemd/system/kubelet.service.d/20-outpost.conf'),
    check: (_r, node) => [[!existsSync(`${node.root}/etc/systemd/system/kubelet.service.d/20-outpost.conf`), 'gone']],
  },
  {
    what: 'the static pod gone',
    matches: c => c.endsWith('rm /etc/kubernetes/manifests/outpost.yaml'),
    check: (_r, node) => [[!existsSync(`${node.root}/etc/kubernetes/manifests/outpost.yaml`), 'gone']],
    // kubelet's part: it stops the pod (SIGTERM)
    after: async (t, node) => {
      t.equal(await node.stopHub(), 0, 'the hub stops cleanly')
    },
  },
  {
    what: 'outpost0 removed by the hub',
    matches: c => c === 'ip link show outpost0',
    code: 1,
    check: ran => mentions(ran.stderr, 'Device "outpost0" does not exist.'),
  },
  {
    what: 'a leftover outpost0 removed',
    matches: c => c.endsWith('ip link del outpost0'),
    // what a SIGKILLed hub leaves behind (a bridge: some kernels have no dummy driver)
    before: async (t, node) => {
      const made = await node.sh('(ip link add outpost0 type dummy || ip link add outpost0 type bridge) 2>/dev/null && ip addr add 169.254.2.1/32 dev outpost0')
      t.equal(made.code, 0, 'an outpost0 left behind', { stderr: made.stderr })
    },
    check: () => [],
    after: async (t, node) => {
      t.not((await node.sh('ip link show outpost0')).code, 0, 'gone')
    },
  },
  {
    what: "the hub's data gone",
    matches: c => c.endsWith('rm -rf /var/lib/outpost'),
    check: (_r, node) => [[!existsSync(`${node.root}/var/lib/outpost`), 'gone']],
  },
  // ---- the systemd unit, on the node the rollback left clean
  {
    what: 'Node.js 20 or newer',
    matches: c => c === 'node --version',
    check: ran => [[Number(/^v(\d+)\./.exec(ran.stdout)?.[1]) >= 20, ran.stdout.trim()]],
  },
  ...(
    [
      ['dist/outpost.mjs', '/opt/outpost/outpost.mjs'],
      ['manifests/outpost.env', '/etc/outpost/outpost.env'],
      ['manifests/outpost.service', '/etc/systemd/system/outpost.service'],
    ] as const
  ).map(([from, to]): Step => ({
    what: `${to} in place`,
    matches: c => c.includes(`install `) && c.endsWith(` ${from} ${to}`),
    check: (_ran, node) => [
      [fileMode(node.root + to) === 0o644, 'mode 0644'],
      [existsSync(node.root + to) && readFileSync(node.root + to).equals(readFileSync(path.join(node.work, from))), `the guide's ${from}`],
    ],
  })),
  {
    what: 'the version, from the bundle the unit runs',
    matches: c => c.endsWith("| grep '^outpost_build_info'"),
    until: true,
    check: ran => {
      const version = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')).version as string
      return mentions(ran.stdout, new RegExp(`^outpost_build_info\\{version="${version.replaceAll('.', '\\.')}",node_version="v\\d+[.\\d]*"\\} 1$`, 'm'))
    },
  },
  {
    what: "the unit's files gone",
    matches: c => c.endsWith('rm /etc/systemd/system/outpost.service /etc/outpost/outpost.env /opt/outpost/outpost.mjs'),
    check: (_r, node) =>
      ['/etc/systemd/system/outpost.service', '/etc/outpost/outpost.env', '/opt/outpost/outpost.mjs'].map(f => [!existsSync(node.root + f), `${f} gone`]),
  },
  ...(
    [
      [
        'clusterrolebinding outpost',
        'clusterrole outpost',
        'clusterrolebinding.rbac.authorization.k8s.io "outpost"',
        'clusterrole.rbac.authorization.k8s.io "outpost"',
      ],
      [
        'rolebinding outpost:pool-lease',
        'role outpost:pool-lease',
        'rolebinding.rbac.authorization.k8s.io "outpost:pool-lease"',
        'role.rbac.authorization.k8s.io "outpost:pool-lease"',
      ],
      [
        'validatingadmissionpolicybinding outpost-pool-lease',
        'validatingadmissionpolicy outpost-pool-lease',
        'validatingadmissionpolicybinding.admissionregistration.k8s.io "outpost-pool-lease"',
        'validatingadmissionpolicy.admissionregistration.k8s.io "outpost-pool-lease"',
      ],
    ] as const
  ).map(([binding, role, boundOut, roleOut]): Step => ({
    what: `${binding} and ${role} deleted`,
    matches: c => c.includes(`delete ${binding} `) && c.endsWith(`delete ${role}`),
    check: ran => [[ran.stdout === `${boundOut} deleted\n${roleOut} deleted\n`, ran.stdout]],
  })),
  {
    what: "kubeadm's own auto-approval bindings",
    matches: c => c.endsWith('| grep kubeadm:node-autoapprove'),
    check: ran => [[/^kubeadm:node-autoapprove-bootstrap\s.*\n^kubeadm:node-autoapprove-certificate-rotation\s/m.test(ran.stdout), ran.stdout]],
  },
  {
    what: 'the rest of rbac.yaml deleted',
    matches: c => c.startsWith('kubectl delete -f manifests/rbac.yaml'),
    check: ran =>
      ['outpost:node-bootstrapper', 'outpost:node-autoapprove-bootstrap', 'outpost:node-autoapprove-certificate-rotation'].map(n => [
        ran.stdout.includes(`clusterrolebinding.rbac.authorization.k8s.io "${n}" deleted`),
        `${n} deleted`,
      ]),
    after: async (t, node) => {
      t.notMatch((await node.sh('kubectl get clusterrolebindings -o name')).stdout, /outpost/, 'nothing of outpost left')
    },
  },
]

// Not runnable here, and why; `instead` does here what the command does on a node.
const notRunnable: { matches: RegExp; why: string; instead?(t: Test, node: DeployNode): Promise<void> }[] = [
  {
    matches: /^docker (build|run|tag|push|buildx) /,
    why: "no container runtime here; the Dockerfile's steps run outside Docker in test/build.e2e.ts",
  },
  { matches: /^docker save .* \| ssh NODE sudo ctr /, why: 'no container runtime and no other node here' },
  {
    matches: /^sudo systemctl daemon-reload && sudo systemctl restart kubelet$/,
    why: 'no systemd and no kubelet here; the test plays kubelet after the restart',
    instead: async (t, node) => {
      if (existsSync(`${node.root}/etc/systemd/system/kubelet.service.d/20-outpost.conf`)) await playKubelet(t, node)
    },
  },
  { matches: /^ps -o args= -C kubelet /, why: "no kubelet process here; the drop-in's content is checked instead" },
  { matches: /^kubectl -n kube-system logs outpost-NODE$/, why: 'pod logs come from kubelet and the container runtime' },
  {
    matches: /^(curl -s 127\.0\.0\.1:10267\/debug\/pool|kubectl -n kube-system get lease outpost-pool-POOL)$/,
    why: 'leader hubs need several nodes with --pool-sharing=on; test/pool*.test.ts run them',
  },
  {
    matches: /^npm ci && npm run bundle$/,
    why: "the test's checkout is installed already; the bundle is built into the node's checkout with build/bundle.mjs",
    instead: async (t, node) => {
      const built = await node.sh(`${process.execPath} ${path.join(repo, 'build/bundle.mjs')} --outfile ${path.join(node.work, 'dist/outpost.mjs')}`)
      t.equal(built.code, 0, 'the bundle', { stderr: built.stderr })
    },
  },
  {
    matches: /^sudo systemctl daemon-reload && sudo systemctl enable --now outpost$/,
    why: "no systemd here; the test starts the unit's ExecStart with its EnvironmentFile",
    instead: async (_t, node) => node.startUnit(),
  },
  { matches: /^systemctl is-active outpost$/, why: 'no systemd here; the hub the unit runs answers /v1/healthz instead' },
  { matches: /^journalctl -u outpost /, why: 'no journald here' },
  {
    matches: /^sudo systemctl disable --now outpost$/,
    why: 'no systemd here; the test stops the hub as systemd does (SIGTERM)',
    instead: async (t, node) => {
      t.equal(await node.stopHub(), 0, "the unit's hub stops cleanly")
    },
  },
  { matches: /^sudo systemctl daemon-reload$/, why: 'no systemd here' },
  {
    matches: /^sudo iptables -I OUTPUT /,
    why: "the host's firewall; the simulator refuses connections instead",
    instead: async (_t, node) => {
      await node.fault('refuse')
      state.offline = true
    },
  },
  {
    matches: /^sudo iptables -D OUTPUT /,
    why: "the host's firewall; the simulator accepts connections again instead",
    instead: async (_t, node) => {
      await node.fault('none')
      state.offline = false
    },
  },
]

t.test('every command of the guide is run here or listed as not runnable, with why', async t => {
  t.ok(commands.length >= 40, `${commands.length} commands`)
  for (const command of commands) {
    const matched = steps.filter(s => s.matches(command)).length + notRunnable.filter(n => n.matches.test(command)).length
    t.equal(matched, 1, `${command}: one check or one reason`)
  }
  t.same(
    steps.filter(s => !commands.some(c => s.matches(c))).map(s => s.what),
    [],
    'every check has its command',
  )
  t.same(
    notRunnable.filter(n => !commands.some(c => n.matches.test(c))).map(n => String(n.matches)),
    [],
    'every reason its command',
  )
})

t.test("docs/deploy.md, followed in order on a node of the test's own", { skip: await cannotRun() }, async t => {
  const node = await startDeployNode(t)
  t.teardown(() => {
    if (t.passing()) return
    t.comment(`the hub's output:\n${node.hubOutput().slice(-4000)}`)
  })

  for (const command of commands) {
    const reason = notRunnable.find(n => n.matches.test(command))
    if (reason) {
      await reason.instead?.(t, node)
      continue
    }
    const step = steps.find(s => s.matches(command))!
    await t.test(`${command.split('\n')[0]}: ${step.what}`, async t => {
      await step.before?.(t, node)
      const deadline = Date.now() + 60_000
      let ran: Ran
      let said: Said
      for (;;) {
        ran = await node.run(command, { NAME: state.csr })
        said = ran.code === (step.code ?? 0) ? step.check(ran, node) : []
        if (!step.until || (ran.code === (step.code ?? 0) && said.every(([ok]) => ok)) || Date.now() > deadline) break
        await new Promise(resolve => setTimeout(resolve, 250))
      }
      t.equal(ran.code, step.code ?? 0, `exit code ${step.code ?? 0}`, { stderr: ran.stderr })
      for (const [ok, message] of said) t.ok(ok, message)
      await step.after?.(t, node)
    })
  }
})
