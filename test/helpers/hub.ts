// Test harness: an apiserver simulator with the hub in front of it, both on real loopback sockets.
import { pino } from 'pino'
import type { Logger } from 'pino'
import { Writable } from 'node:stream'
import { once } from 'node:events'
import net from 'node:net'
import { request } from 'undici'
import { processTempDir, removeNow } from './temp-dirs.ts'
import { ApiServerSimulator } from '../simulator/index.ts'
import type { SimulatorOptions } from '../simulator/index.ts'
import { startDemoCluster } from '../simulator/demo.ts'
import { createTestPki, writeKubeconfig } from './pki.ts'
import { startHub } from '../../lib/hub.ts'
import type { Hub, StartOptions } from '../../lib/hub.ts'
import { defaults } from '../../lib/config.ts'
import type { HubConfig } from '../../lib/config.ts'

export interface Harness {
  simulator: ApiServerSimulator
  hub: Hub
  /** the hub's proxy URL */
  url: string
  cacheDir: string
  /**
   * Closes the hub and the simulator, and removes the cache dir the harness made (one a test
   * passed in is the test's). keepCacheDir: a restart-style test opens it again; it goes when the
   * test process exits.
   */
  close(options?: { keepCacheDir?: boolean }): Promise<void>
}

export function hubConfig(servers: string[], overrides: Partial<HubConfig> = {}): HubConfig {
  return {
    ...defaults,
    servers: servers.map(s => new URL(s)),
    nodeName: 'kind-worker2',
    port: 0,
    adminPort: 0,
    // the HTTPS port is opt-in per test: it needs a certificate directory
    securePort: null,
    // never the host's network: the pod address is tested in namespaces of its own (test/pod-address.test.ts)
    podAddress: null,
    logLevel: 'silent',
    // A refused connection fails at once: a cloud refused goes offline in about three intervals
    // (goDark), and comes back in one. A probe that is only slow (a loaded box) is given seconds,
    // and it takes three of them in a row to declare a cloud offline that is not. Tests of a cloud
    // that hangs ask for a shorter timeout themselves.
    healthIntervalMs: 100,
    healthTimeoutMs: 5_000,
    healthFailures: 3,
    healthSuccesses: 1,
    ...overrides,
    // removed when the test process exits (startHarness's close() removes its own at once)
    cacheDir: overrides.cacheDir ?? processTempDir('outpost-cache-'),
  }
}

export const quietLogger = () => pino({ level: process.env.OUTPOST_TEST_LOG ?? 'silent' })

/** A debug-level logger whose JSON lines the test reads back, to audit what the hub logs. */
export function capturingLogger(): { logger: Logger; text(): string } {
  let text = ''
  const sink = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString()
      done()
    },
  })
  return { logger: pino({ level: 'debug' }, sink), text: () => text }
}

export async function startHarness(
  options: {
    demo?: boolean
    simulator?: SimulatorOptions
    config?: Partial<HubConfig>
    start?: Omit<StartOptions, 'logger'>
    /** the simulator on HTTPS (HTTP/2 unless simulator.http2 is false), the hub with the node's client certificate */
    secure?: boolean
  } = {},
): Promise<Harness> {
  const pki = options.secure ? await createTestPki() : undefined
  const simulatorOptions: SimulatorOptions = pki
    ? { ...options.simulator, tls: { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true } }
    : (options.simulator ?? {})
  const simulator = options.demo ? await startDemoCluster(simulatorOptions) : await ApiServerSimulator.start(simulatorOptions)
  const kubeconfig = pki
    ? await writeKubeconfig(processTempDir('outpost-kubeconfig-'), {
        server: simulator.url,
        ca: pki.ca.cert,
        cert: pki.client.cert,
        key: pki.client.key,
        inline: true,
      })
    : undefined
  const config = kubeconfig ? hubConfig([], { kubeconfig, ...options.config }) : hubConfig([simulator.url], options.config)
  const ownsCacheDir = options.config?.cacheDir === undefined
  let hub: Hub
  try {
    hub = await startHub(config, { logger: quietLogger(), ...options.start })
  } catch (error) {
    await simulator.close()
    if (ownsCacheDir) removeNow(config.cacheDir)
    throw error
  }
  return {
    simulator,
    hub,
    url: hub.proxyUrl,
    cacheDir: config.cacheDir,
    async close({ keepCacheDir = false } = {}) {
      await hub.close()
      await simulator.close()
      if (ownsCacheDir && !keepCacheDir) removeNow(config.cacheDir)
    },
  }
}

/** Polls until check() is truthy; for conditions that settle asynchronously (sockets closing). */
export async function eventually<T>(check: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

/** Whether a hub's admin port answers /v1/healthz with 200 now (false while it does not listen). */
export async function adminHealthy(adminPort: number | string): Promise<boolean> {
  try {
    const res = await request(`http://127.0.0.1:${adminPort}/v1/healthz`)
    await res.body.dump()
    return res.statusCode === 200
  } catch {
    return false
  }
}

/** A loopback port nobody listens on right now, for a child process that needs a fixed port. */
export async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  server.close()
  return port
}

/** The cloud refuses every connection; resolves once the hub has declared it offline. */
export async function goDark(h: Pick<Harness, 'simulator' | 'hub'>): Promise<void> {
  await h.simulator.setFault('refuse')
  await eventually(() => h.hub.health.state === 'offline', 10_000, 'the hub to declare the cloud offline')
}

/** The cloud answers again; resolves once the hub has declared it online. */
export async function comeBack(h: Pick<Harness, 'simulator' | 'hub'>): Promise<void> {
  await h.simulator.setFault('none')
  await eventually(() => h.hub.health.state === 'online', 10_000, 'the hub to declare the cloud online')
}
