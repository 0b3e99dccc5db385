// The outpost command: flags and environment → HubConfig → start. With no apiserver given it
// runs the demo: the embedded apiserver simulator with a three-pool cluster behind the hub.
import './gc-settings.ts'
import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags, usage, UsageError } from './flags.ts'
import { shutdownHandler } from './shutdown.ts'
import { startHub } from '../lib/hub.ts'
import type { Hub } from '../lib/hub.ts'
import type { HubConfig } from '../lib/config.ts'

const demoNode = 'kind-worker2'

function demoBanner(proxyUrl: string, https?: { url: string; ca: string }): string {
  return [
    '',
    `outpost demo: apiserver simulator with a three-pool cluster, hub serving as node ${demoNode} on ${proxyUrl}`,
    'Try:',
    `  curl -s ${proxyUrl}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices`,
    `  kubectl --server ${proxyUrl} get endpointslices -A`,
    `  kubectl --server ${proxyUrl} get endpointslices -A -w`,
    // the simulator takes any token; a real apiserver decides who the token is
    ...(https ? [`  curl -s --cacert ${https.ca} -H "Authorization: Bearer demo" ${https.url}/api/v1/namespaces`] : []),
    '',
  ].join('\n')
}

async function main(): Promise<void> {
  let config: HubConfig
  try {
    const parsed = parseFlags(process.argv.slice(2), process.env)
    if (parsed.help) {
      process.stdout.write(usage)
      return
    }
    config = parsed.config
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`outpost: ${error.message} (see --help)\n`)
      process.exit(2)
    }
    throw error
  }

  const demo = config.servers.length === 0 && !config.kubeconfig
  const closers: (() => Promise<void>)[] = []
  if (demo) {
    // Only the demo needs the simulator; a production start never loads it.
    // Not a literal, and no type import: tsc must not pull the simulator into dist/ (the image).
    const demoModule = '../test/simulator/demo.ts'
    let startDemoCluster: () => Promise<{ url: string; close(): Promise<void> }>
    try {
      ;({ startDemoCluster } = await import(demoModule))
    } catch {
      process.stderr.write('outpost: no apiserver given and the demo needs a source checkout (npm start); give --kubeconfig or --server\n')
      process.exit(2)
    }
    const simulator = await startDemoCluster()
    closers.push(() => simulator.close())
    const given = (flag: string, env: string) => process.argv.some(a => a.startsWith(flag)) || Boolean(process.env[env])
    config = {
      ...config,
      servers: [new URL(simulator.url)],
      nodeName: given('--node-name', 'OUTPOST_NODE_NAME') ? config.nodeName : demoNode,
      // a newcomer's machine has no /var/lib/outpost; each demo run caches its own fresh cluster in a temp dir
      cacheDir: given('--cache-dir', 'OUTPOST_CACHE_DIR') ? config.cacheDir : mkdtempSync(path.join(os.tmpdir(), 'outpost-demo-cache-')),
      certDir: given('--cert-dir', 'OUTPOST_CERT_DIR') ? config.certDir : mkdtempSync(path.join(os.tmpdir(), 'outpost-demo-pki-')),
    }
  }

  let hub: Hub
  try {
    hub = await startHub(config)
  } catch (error) {
    process.stderr.write(`outpost: cannot start: ${(error as Error).message}\n`)
    await Promise.allSettled(closers.map(close => close()))
    process.exit(1)
  }
  closers.unshift(() => hub.close())
  // A stray rejected promise must not take the node's apiserver away: log it loudly, keep serving.
  process.on('unhandledRejection', reason => hub.log.error({ err: reason instanceof Error ? reason.stack : String(reason) }, 'unhandled rejection'))
  if (demo) {
    const https = hub.secureUrl ? { url: await hub.secureUrl, ca: path.join(config.certDir, 'ca.crt') } : undefined
    process.stdout.write(demoBanner(hub.proxyUrl, https))
  }

  const stop = shutdownHandler({
    close: () => Promise.allSettled(closers.map(close => close())),
    exit: code => process.exit(code),
    log: signal => hub.log.info({ signal }, 'shutting down'),
    deadlineMs: 10_000,
  })
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
}

main().catch(error => {
  process.stderr.write(`outpost: ${(error as Error).stack ?? error}\n`)
  process.exit(1)
})
