// A real kube-apiserver (Go, with etcd) for the bench's "real" rows: the binary named by
// OUTPOST_BENCH_KUBE_APISERVER (../shared/tools/kube-apiserver/build.sh makes one), etcd from PATH.
// Started as ../shared/tools/kube-apiserver/up.sh starts it: a token "admintoken" in system:masters,
// RBAC on, its own CA and service-account keys, everything in one temp dir removed by stop().
import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Agent, request } from 'undici'
import { freePort, sleep } from './processes.ts'

export const realApiserverEnv = 'OUTPOST_BENCH_KUBE_APISERVER'
export const adminToken = 'admintoken'

/** Why the real rows cannot run here, or undefined when they can. */
export function realApiserverProblem(): string | undefined {
  const binary = process.env[realApiserverEnv]
  if (!binary) return `no real kube-apiserver: set ${realApiserverEnv} to its binary (../shared/tools/kube-apiserver/build.sh builds one)`
  if (!existsSync(binary)) return `${realApiserverEnv}=${binary}: no such file`
  if (spawnSync('etcd', ['--version']).status !== 0) return 'no etcd on PATH (Debian: etcd-server)'
  if (spawnSync('openssl', ['version']).status !== 0) return 'no openssl on PATH'
  return undefined
}

export class RealApiserver {
  /** one client for the bench's own writes, which must not share the load's connections */
  private readonly writer: Agent

  private constructor(
    readonly url: string,
    readonly dir: string,
    readonly kubeconfig: string,
    private readonly children: ChildProcess[],
    readonly apiserverPid: number,
  ) {
    this.writer = new Agent({ connect: { rejectUnauthorized: false }, connections: 16 })
  }

  static async start(binary = process.env[realApiserverEnv]!): Promise<RealApiserver> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'outpost-bench-apiserver-'))
    const openssl = (...args: string[]) => {
      const done = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' })
      if (done.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${done.stderr}`)
    }
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=bench-ca')
    openssl('genrsa', '-out', 'sa.key', '2048')
    openssl('rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub')
    writeFileSync(path.join(dir, 'tokens.csv'), `${adminToken},admin,admin,system:masters\n`)
    const [port, etcdClient, etcdPeer] = [await freePort(), await freePort(), await freePort()]
    const log = (name: string) => openSync(path.join(dir, name), 'a')
    const etcd = spawn(
      'etcd',
      [
        '--data-dir',
        path.join(dir, 'etcd'),
        '--listen-client-urls',
        `http://127.0.0.1:${etcdClient}`,
        '--advertise-client-urls',
        `http://127.0.0.1:${etcdClient}`,
        '--listen-peer-urls',
        `http://127.0.0.1:${etcdPeer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${etcdPeer}`,
        '--initial-cluster',
        `default=http://127.0.0.1:${etcdPeer}`,
        '--unsafe-no-fsync',
      ],
      { stdio: ['ignore', log('etcd.log'), log('etcd.log')] },
    )
    const apiserver = spawn(
      binary,
      [
        `--etcd-servers=http://127.0.0.1:${etcdClient}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${port}`,
        `--cert-dir=${path.join(dir, 'certs')}`,
        `--client-ca-file=${path.join(dir, 'ca.crt')}`,
        `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
        '--authorization-mode=Node,RBAC',
        `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
        `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
        '--service-account-issuer=https://kubernetes.default.svc',
        '--service-cluster-ip-range=10.96.0.0/16',
      ],
      { stdio: ['ignore', log('apiserver.log'), log('apiserver.log')] },
    )
    const url = `https://127.0.0.1:${port}`
    const kubeconfig = path.join(dir, 'admin.kubeconfig')
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: real, cluster: {server: "${url}", insecure-skip-tls-verify: true}}]`,
        `users: [{name: admin, user: {token: ${adminToken}}}]`,
        'contexts: [{name: real, context: {cluster: real, user: admin}}]',
        'current-context: real',
        '',
      ].join('\n'),
    )
    const real = new RealApiserver(url, dir, kubeconfig, [apiserver, etcd], apiserver.pid!)
    try {
      await real.waitReady(120_000)
    } catch (error) {
      await real.stop()
      throw error
    }
    return real
  }

  get headers(): Record<string, string> {
    return { authorization: `Bearer ${adminToken}` }
  }

  /** the apiserver answers /readyz, and the default namespace and Service exist (its controllers made them) */
  private async waitReady(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs
    let last = ''
    while (performance.now() < deadline) {
      if (this.children.some(c => c.exitCode !== null)) throw new Error(`the apiserver or etcd exited; logs in ${this.dir}`)
      try {
        const ready = await this.send('GET', '/readyz')
        const service = ready.status === 200 ? await this.send('GET', '/api/v1/namespaces/default/services/kubernetes') : ready
        if (service.status === 200) return
        last = `${service.status} ${service.text.slice(0, 200)}`
      } catch (error) {
        last = (error as Error).message
      }
      await sleep(250)
    }
    throw new Error(`the real apiserver was not ready within ${timeoutMs} ms (${last})`)
  }

  async send(method: string, pathname: string, body?: unknown): Promise<{ status: number; text: string }> {
    const res = await request(`${this.url}${pathname}`, {
      method: method as 'GET',
      headers: { ...this.headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: this.writer,
    })
    return { status: res.statusCode, text: await res.body.text() }
  }

  /** Creates `objects` at `collection` (a path), `concurrency` at a time; an existing one is left as it is. */
  async create(collection: (o: any) => string, objects: any[], concurrency = 16): Promise<void> {
    let next = 0
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < objects.length) {
          const object = objects[next++]
          const done = await this.send('POST', collection(object), object)
          if (done.status !== 201 && done.status !== 409) throw new Error(`POST ${collection(object)}: ${done.status} ${done.text.slice(0, 300)}`)
        }
      }),
    )
  }

  async stop(): Promise<void> {
    await this.writer.close().catch(() => {})
    for (const child of this.children) {
      if (child.exitCode !== null || child.signalCode !== null) continue
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
      await once(child, 'exit')
      clearTimeout(timer)
    }
    rmSync(this.dir, { recursive: true, force: true })
  }
}
