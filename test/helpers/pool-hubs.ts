// Node pools of hubs against the simulator: the simulator over TLS with client certificates (as
// the apiserver authenticates nodes), a Node per node labelled with its pool, and per node a
// kubeconfig with its own client certificate (CN system:node:<name>, O system:nodes) of the
// cluster CA, which the hubs also check each other's certificates with.
import { mkdtemp } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import * as x509 from '@peculiar/x509'
import { request } from 'undici'
import { ApiServerSimulator } from '../simulator/index.ts'
import { createTestPki, writeKubeconfig } from './pki.ts'
import type { Pem, TestPki } from './pki.ts'
import { eventually, freePort, hubConfig, quietLogger } from './hub.ts'
import { processTempDir } from './temp-dirs.ts'
import { issueCertificate } from '../../certs/authority.ts'
import type { CertificateAndKey } from '../../certs/authority.ts'
import { generateKeyPair, privateKeyPem } from '../../certs/keys.ts'
import { startHub } from '../../lib/hub.ts'
import type { Hub } from '../../lib/hub.ts'
import type { HubConfig } from '../../lib/config.ts'

/** Short enough for a test, long enough that a loaded box renews in time: a leader has 3 s, renewing every 500 ms. */
export const poolTimings = { poolLeaseDurationMs: 5_000, poolRenewDeadlineMs: 3_000, poolRetryPeriodMs: 500 }

export interface PoolNode {
  name: string
  pool: string
  kubeconfig: string
}

export interface PoolCluster {
  simulator: ApiServerSimulator
  pki: TestPki
  nodes: PoolNode[]
  close(): Promise<void>
}

/** A client certificate of `ca` for any subject (a node's, or anything else a test presents). */
export async function clientCertificate(ca: CertificateAndKey, cn: string, organizations: string[] = []): Promise<Pem> {
  const keys = await generateKeyPair()
  const now = Date.now()
  const cert = await issueCertificate(ca, {
    subject: new x509.Name([{ CN: [cn] }, ...(organizations.length > 0 ? [{ O: organizations }] : [])]),
    publicKey: keys.publicKey,
    notBefore: new Date(now - 60 * 60_000),
    notAfter: new Date(now + 24 * 60 * 60_000),
    keyUsages: x509.KeyUsageFlags.digitalSignature,
    extendedKeyUsages: [x509.ExtendedKeyUsage.clientAuth],
  })
  return { cert, key: await privateKeyPem(keys.privateKey) }
}

/** The simulator, and per pool its nodes (Node objects with the pool label and InternalIP 127.0.0.1, kubeconfigs). */
export async function poolCluster(pools: Record<string, string[]>): Promise<PoolCluster> {
  const pki = await createTestPki()
  const simulator = await ApiServerSimulator.start({ tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true } })
  const nodes: PoolNode[] = []
  for (const [pool, names] of Object.entries(pools)) {
    for (const name of names) {
      simulator.create({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, labels: { 'apps.openyurt.io/nodepool': pool, 'kubernetes.io/hostname': name } },
        status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] },
      })
      const { cert, key } = await clientCertificate(pki.ca, `system:node:${name}`, ['system:nodes'])
      const dir = await mkdtemp(path.join(processTempDir('outpost-pool-'), `${name}-`))
      const kubeconfig = await writeKubeconfig(dir, { server: simulator.url, ca: pki.ca.cert, cert, key, inline: true })
      nodes.push({ name, pool, kubeconfig })
    }
  }
  return { simulator, pki, nodes, close: () => simulator.close() }
}

/** A hub of a pool, in this process; its pool port on a free loopback port. */
export async function startPoolHub(node: PoolNode, overrides: Partial<HubConfig> = {}): Promise<Hub> {
  return startHub(
    hubConfig([], {
      nodeName: node.name,
      kubeconfig: node.kubeconfig,
      poolSharing: true,
      poolPort: 0,
      poolBindAddress: '127.0.0.1',
      ...poolTimings,
      ...overrides,
    }),
    { logger: quietLogger(), cacheBookmarkIntervalMs: 1_000 },
  )
}

export interface PoolHubProcess {
  node: PoolNode
  child: ChildProcess
  proxyUrl: string
  adminUrl: string
  /** SIGKILL: no release of the Lease, no goodbye to anyone */
  kill(): Promise<void>
  stop(): Promise<void>
}

const entry = new URL('../../cmd/outpost.ts', import.meta.url).pathname

/** A hub of a pool as a child process (`outpost` as on a node), once its admin port answers. */
export async function startPoolHubProcess(node: PoolNode): Promise<PoolHubProcess> {
  const port = await freePort()
  const adminPort = await freePort()
  const seconds = (ms: number) => `${ms}ms`
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      entry,
      ...['--kubeconfig', node.kubeconfig, '--node-name', node.name, '--cache-dir', processTempDir('outpost-pool-cache-')],
      ...['--port', String(port), '--admin-port', String(adminPort), '--secure-port', '0', '--log-level', 'warn'],
      ...['--health-interval', '200ms', '--health-timeout', '5s', '--health-failures', '3', '--health-successes', '1'],
      ...['--pool-sharing=on', '--pool-port', '0', '--pool-bind-address', '127.0.0.1'],
      ...['--pool-lease-duration', seconds(poolTimings.poolLeaseDurationMs), '--pool-renew-deadline', seconds(poolTimings.poolRenewDeadlineMs)],
      ...['--pool-retry-period', seconds(poolTimings.poolRetryPeriodMs)],
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  )
  const exited = new Promise(resolve => child.once('exit', resolve))
  const gone = () => child.exitCode !== null || child.signalCode !== null
  const adminUrl = `http://127.0.0.1:${adminPort}`
  await eventually(async () => (await poolState(adminUrl).catch(() => undefined)) !== undefined, 30_000, `hub ${node.name} to listen`)
  return {
    node,
    child,
    proxyUrl: `http://127.0.0.1:${port}`,
    adminUrl,
    async kill() {
      if (gone()) return
      child.kill('SIGKILL')
      await exited
    },
    async stop() {
      if (gone()) return
      child.kill('SIGTERM')
      await exited
    },
  }
}

/** What `/debug/pool` says. */
export async function poolState(adminUrl: string): Promise<any> {
  const res = await request(`${adminUrl}/debug/pool`)
  if (res.statusCode !== 200) {
    await res.body.dump()
    return undefined
  }
  return res.body.json()
}
