// The link-local address pods reach the hub on (--pod-address, 169.254.2.1): the hub and the
// simulator run in a network namespace of the test's own, a "pod" in a second one routed to the
// first, and nothing touches the host's network. Needs root and iproute2 (.ci/run installs it).
import { execFile, spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import type { Test } from 'tap'
import { eventually } from './helpers/hub.ts'

const root = fileURLToPath(new URL('..', import.meta.url))
const podAddress = '169.254.2.1'
const iface = 'outpost0'
// what the hub makes: a dummy, or a bridge with no ports on a kernel without the dummy driver (this box's)
const holderKinds = ['dummy', 'bridge']

function run(command: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise(resolve =>
    execFile(command, args, { timeout: 20_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: unknown }).code === 'ENOENT' ? 127 : Number((error as { code?: number }).code ?? 1)) : 0, stdout, stderr }),
    ),
  )
}

async function ip(...args: string[]): Promise<string> {
  const done = await run('ip', args)
  if (done.code !== 0) throw new Error(`ip ${args.join(' ')}: ${done.stderr.trim()}`)
  return done.stdout
}

/** Why these tests cannot run here, or undefined. */
async function cannotRun(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root to make network namespaces'
  for (const [tool, args] of [
    ['ip', ['-V']],
    ['curl', ['--version']],
  ] as const) {
    if ((await run(tool, [...args])).code === 127) return `${tool} is not installed`
  }
  const probe = `outpost-probe-${process.pid}`
  const made = await run('ip', ['netns', 'add', probe])
  if (made.code !== 0) return `cannot make a network namespace: ${made.stderr.trim()}`
  await run('ip', ['netns', 'del', probe])
  return undefined
}

interface Namespaces {
  hub: string
  pod: string
  /** runs a command inside a namespace */
  exec(ns: string, command: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }>
}

let seq = 0
/** A hub namespace and a pod namespace, joined by a veth pair; the pod routes the pod address to the hub. */
async function namespaces(t: Test): Promise<Namespaces> {
  const id = `${process.pid}-${++seq}`
  const hub = `outpost-hub-${id}`
  const pod = `outpost-pod-${id}`
  const [hubEnd, podEnd] = [`oph${process.pid % 100000}${seq}`, `opp${process.pid % 100000}${seq}`].map(n => n.slice(0, 15))
  t.teardown(async () => {
    await run('ip', ['netns', 'del', hub])
    await run('ip', ['netns', 'del', pod])
  })
  await ip('netns', 'add', hub)
  await ip('netns', 'add', pod)
  await ip('-n', hub, 'link', 'set', 'lo', 'up')
  await ip('-n', pod, 'link', 'set', 'lo', 'up')
  await ip('link', 'add', hubEnd, 'netns', hub, 'type', 'veth', 'peer', 'name', podEnd, 'netns', pod)
  await ip('-n', hub, 'addr', 'add', '10.254.0.1/30', 'dev', hubEnd)
  await ip('-n', pod, 'addr', 'add', '10.254.0.2/30', 'dev', podEnd)
  await ip('-n', hub, 'link', 'set', hubEnd, 'up')
  await ip('-n', pod, 'link', 'set', podEnd, 'up')
  await ip('-n', pod, 'route', 'add', `${podAddress}/32`, 'via', '10.254.0.1')
  return { hub, pod, exec: (ns, command, args) => run('ip', ['netns', 'exec', ns, command, ...args]) }
}

function spawnIn(ns: string, prefix: string[], args: string[]): ChildProcess {
  return spawn('ip', ['netns', 'exec', ns, ...prefix, process.execPath, '--import', 'tsx', ...args], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'inherit'],
  })
}

/** The simulator inside the hub's namespace; resolves with its URL and the CA its CSR signer signs with. */
async function startSimulator(t: Test, ns: string, dir: string): Promise<{ url: string; caFile: string }> {
  const caFile = path.join(dir, 'cluster-ca.crt')
  const child = spawnIn(ns, [], ['test/helpers/netns-simulator.ts', caFile])
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', chunk => {
      out += chunk
      const line = out.split('\n').find(l => l.startsWith('{'))
      if (line) resolve((JSON.parse(line) as { url: string }).url)
    })
    child.once('exit', code => reject(new Error(`simulator exited ${code}`)))
  })
  return { url, caFile }
}

interface HubInNamespace {
  child: ChildProcess
  /** SIGTERM, resolves with the exit code */
  stop(): Promise<number | null>
}

async function startHubIn(t: Test, nss: Namespaces, server: string, dir: string, prefix: string[] = []): Promise<HubInNamespace> {
  const child = spawnIn(nss.hub, prefix, [
    'cmd/outpost.ts',
    '--server',
    server,
    '--node-name',
    'kind-worker2',
    '--cache-dir',
    path.join(dir, 'cache'),
    '--cert-dir',
    path.join(dir, 'pki'),
    '--serving-cert=csr',
    '--log-level',
    'warn',
  ])
  child.stdin!.end()
  child.stdout!.resume()
  const exited = new Promise<number | null>(resolve => child.once('exit', code => resolve(code)))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    return exited
  }
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  await eventually(async () => (await admin(nss, '/v1/healthz')).stdout.trim() === 'ok', 60_000, 'the hub to serve its admin port')
  return { child, stop }
}

const admin = (nss: Namespaces, urlPath: string) => nss.exec(nss.hub, 'curl', ['-sS', '--max-time', '10', `http://127.0.0.1:10267${urlPath}`])

async function addressShown(nss: Namespaces): Promise<{ kind?: string; up: boolean; addresses: string[] } | undefined> {
  const done = await run('ip', ['-n', nss.hub, '-j', '-d', 'addr', 'show', 'dev', iface])
  if (done.code !== 0) return undefined
  const [link] = JSON.parse(done.stdout) as { flags: string[]; linkinfo?: { info_kind?: string }; addr_info: { local: string }[] }[]
  // an interface that is up gets an IPv6 link-local address of its own as well
  const addresses = link.addr_info.map(a => a.local).filter(a => !a.startsWith('fe80:'))
  return { kind: link.linkinfo?.info_kind, up: link.flags.includes('UP'), addresses }
}

const held = async (nss: Namespaces) => {
  const shown = await addressShown(nss)
  return shown !== undefined && shown.up && shown.addresses.includes(podAddress)
}

/** What a pod on this node gets at https://169.254.2.1:10268, verifying the hub with the cluster CA as in-cluster clients do. */
const fromPod = (nss: Namespaces, caFile: string, urlPath: string) =>
  nss.exec(nss.pod, 'curl', [
    '-sS',
    '--max-time',
    '10',
    '--cacert',
    caFile,
    '-H',
    'Authorization: Bearer pod-token',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    `https://${podAddress}:10268${urlPath}`,
  ])

t.test('pod address', { skip: await cannotRun() }, async t => {
  // one pair of namespaces and one cluster; the hubs take turns in them (fixed ports, one at a time)
  const shared = mkdtempSync(path.join(os.tmpdir(), 'outpost-podaddr-'))
  t.teardown(() => rmSync(shared, { recursive: true, force: true }))
  const nss = await namespaces(t)
  const sim = await startSimulator(t, nss.hub, shared)

  t.test('the hub keeps 169.254.2.1 on a dummy interface, pods in another namespace reach the HTTPS port, and it comes back when removed', async t => {
    const dir = mkdtempSync(path.join(shared, 'hub-'))
    const hub = await startHubIn(t, nss, sim.url, dir)

    const shown = await addressShown(nss)
    t.ok(holderKinds.includes(shown?.kind ?? ''), `an interface of the hub's own (${shown?.kind})`)
    t.same(shown && { up: shown.up, addresses: shown.addresses }, { up: true, addresses: [podAddress] }, 'up, holding the address')
    const filters = JSON.parse((await admin(nss, '/debug/filters')).stdout) as { filters: { name: string; enabled: boolean }[]; podAddress: any }
    for (const name of ['masterservice', 'serviceenvupdater', 'forwardkubesvctraffic'])
      t.equal(filters.filters.find(f => f.name === name)?.enabled, true, `${name} is on: pods have an address to be pointed at`)
    t.match(filters.podAddress, { address: podAddress, interface: iface, held: true, createdByHub: true })

    // the CSR the hub sent named the address: curl checks the certificate against the cluster CA
    await eventually(
      async () => (await fromPod(nss, sim.caFile, '/api/v1/namespaces/default/services/kubernetes')).stdout === '200',
      60_000,
      'a pod to reach the HTTPS port',
    )
    const kubelet = await nss.exec(nss.hub, 'curl', ['-sS', '-A', 'kubelet/v1.33.0', 'http://127.0.0.1:10261/api/v1/namespaces/default/services/kubernetes'])
    const service = JSON.parse(kubelet.stdout) as { spec: { clusterIP: string; ports: { name: string; port: number }[] } }
    t.equal(service.spec.clusterIP, podAddress, 'kubelet is told the apiserver Service is at the pod address')
    t.equal(service.spec.ports.find(p => p.name === 'https')?.port, 10268)

    for (const [what, args] of [
      ['the interface deleted', ['link', 'del', iface]],
      ['the address deleted', ['addr', 'del', `${podAddress}/32`, 'dev', iface]],
      ['the interface set down', ['link', 'set', iface, 'down']],
    ] as const) {
      await ip('-n', nss.hub, ...args)
      await eventually(() => held(nss), 30_000, `the address back after ${what}`)
      await eventually(async () => (await fromPod(nss, sim.caFile, '/api/v1/namespaces')).stdout === '200', 30_000, `a pod served after ${what}`)
      t.pass(`back after ${what}`)
    }
    const after = JSON.parse((await admin(nss, '/debug/filters')).stdout) as { podAddress: { restored: number } }
    t.ok(after.podAddress.restored >= 3, `three restorations counted (${after.podAddress.restored})`)

    t.equal(await hub.stop(), 0, 'a clean shutdown')
    t.equal(await addressShown(nss), undefined, 'the interface the hub made is removed on a clean shutdown')
  })

  t.test('an interface the hub did not make stays after it stops', async t => {
    const dir = mkdtempSync(path.join(shared, 'hub-'))
    const made = await run('ip', ['-n', nss.hub, 'link', 'add', iface, 'type', 'dummy'])
    if (made.code !== 0) await ip('-n', nss.hub, 'link', 'add', iface, 'type', 'bridge')
    const hub = await startHubIn(t, nss, sim.url, dir)
    t.ok(await held(nss), 'the hub put the address on the existing interface and brought it up')
    t.match(JSON.parse((await admin(nss, '/debug/filters')).stdout).podAddress, { held: true, createdByHub: false })
    t.equal(await hub.stop(), 0)
    t.ok(holderKinds.includes((await addressShown(nss))?.kind ?? ''), 'still there: someone else made it')
    await ip('-n', nss.hub, 'link', 'del', iface) // as it was before, for the next hub
  })

  const noSetpriv = (await run('setpriv', ['--version'])).code === 127 ? 'setpriv (util-linux) is not installed' : false
  t.test('without CAP_NET_ADMIN the hub says why, keeps the filters off and serves everything else', { skip: noSetpriv }, async t => {
    const dir = mkdtempSync(path.join(shared, 'hub-'))
    await startHubIn(t, nss, sim.url, dir, ['setpriv', '--inh-caps=-net_admin', '--bounding-set=-net_admin', '--'])

    t.equal(await addressShown(nss), undefined, 'no interface made')
    // ready once the serving certificate is issued; the missing address is a note, never a reason to be unready
    await eventually(async () => (await admin(nss, '/v1/readyz')).stdout.startsWith('ok'), 60_000, 'the hub to be ready')
    t.match((await admin(nss, '/v1/readyz')).stdout, /^ok\n- pod address 169\.254\.2\.1 not kept: no CAP_NET_ADMIN: ip link add outpost0/, 'readyz says why')
    const filters = JSON.parse((await admin(nss, '/debug/filters')).stdout) as { filters: { name: string; enabled: boolean; off?: string }[] }
    for (const name of ['masterservice', 'serviceenvupdater', 'forwardkubesvctraffic']) {
      const report = filters.filters.find(f => f.name === name)
      t.equal(report?.enabled, false, `${name} is off`)
      t.match(report?.off, /no CAP_NET_ADMIN/, `${name} says why`)
    }
    const kubelet = await nss.exec(nss.hub, 'curl', ['-sS', '-A', 'kubelet/v1.33.0', 'http://127.0.0.1:10261/api/v1/namespaces/default/services/kubernetes'])
    t.equal((JSON.parse(kubelet.stdout) as { spec: { clusterIP: string } }).spec.clusterIP, '10.96.0.1', 'kubelet sees the cloud apiserver Service as it is')
  })
})
