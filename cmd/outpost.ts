// The outpost command: flags and environment → HubConfig → start. With no apiserver given it
// runs the demo: the embedded apiserver simulator with a three-pool cluster behind the hub.
import './gc-settings.ts'
import path from 'node:path'
import { parseFlags, UsageError } from './flags.ts'
import { readFileSync } from 'node:fs'
import { shutdownHandler, stopWithLauncher } from './shutdown.ts'
import { createLogger, LogGate, resolveFormat } from './log.ts'
import { afterBanner, CloudSwitch, demoConfig, type DemoCloud, listenToKeys, logsQuiet, readAsTheNode, startControl, startDemoCloud } from './demo.ts'
import { banner, hubStateLine, statusLine } from './demo-banner.ts'
import { startHub } from '../lib/hub.ts'
import type { Hub } from '../lib/hub.ts'
import type { HubConfig } from '../lib/config.ts'

async function main(): Promise<void> {
  let config: HubConfig
  let warnings: string[]
  try {
    const parsed = parseFlags(process.argv.slice(2), process.env)
    if (parsed.help) {
      process.stdout.write(parsed.output)
      return
    }
    config = parsed.config
    warnings = parsed.warnings
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`outpost: ${error.message} (see --help)\n`)
      process.exit(2)
    }
    throw error
  }

  const demo = config.servers.length === 0 && !config.kubeconfig
  const closers: (() => Promise<void>)[] = []
  const cloud = demo ? await startDemoCloud() : undefined
  if (cloud) {
    closers.push(() => cloud.close())
    config = demoConfig(config, cloud, process.argv.slice(2), process.env)
  }
  // Text lines for a person at a terminal, JSON lines for a node's log collector (--log-format).
  // The demo notes when the last line went out, to print its banner after the start's logs; at a
  // terminal it holds them, so that its banner is the first screen and what follows is news.
  let lastLine = Date.now()
  const onLine = cloud ? () => (lastLine = Date.now()) : undefined
  const format = config.logFormat
  const gate = cloud && resolveFormat(format, Boolean(process.stdout.isTTY)) === 'text' ? new LogGate() : undefined
  const logger = createLogger({ level: config.logLevel, format, onLine, gate })
  for (const warning of warnings) logger.warn(warning)

  let hub: Hub
  try {
    hub = await startHub(config, { logger })
  } catch (error) {
    gate?.open() // what led up to it
    process.stderr.write(`outpost: cannot start: ${(error as Error).message}\n`)
    await Promise.allSettled(closers.map(close => close()))
    process.exit(1)
  }
  closers.unshift(() => hub.close())
  // A stray rejected promise must not take the node's apiserver away: log it loudly, keep serving.
  process.on('unhandledRejection', reason => hub.log.error({ err: reason instanceof Error ? reason.stack : String(reason) }, 'unhandled rejection'))
  const stop = shutdownHandler({
    close: () => Promise.allSettled(closers.map(close => close())),
    exit: code => process.exit(code),
    log: signal => hub.log.info({ signal }, 'shutting down'),
    deadlineMs: 10_000,
  })
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  stopWithLauncher(
    process.env,
    () => stop('npm exited'),
    path => readFileSync(path, 'utf8'),
  )
  if (cloud)
    await showDemo(
      hub,
      config,
      cloud,
      closers,
      () => stop('SIGINT'),
      () => lastLine,
      gate,
    )
}

/** The cloud switch (its control port, and keys at a terminal), then the banner once the start's logs are done. */
async function showDemo(
  hub: Hub,
  config: HubConfig,
  cloud: DemoCloud,
  closers: (() => Promise<void>)[],
  stop: () => void,
  lastLine: () => number,
  gate: LogGate | undefined,
): Promise<void> {
  // piped, stdout is the JSON log stream a collector reads: what is written for people goes to stderr
  const forPeople = resolveFormat(config.logFormat, Boolean(process.stdout.isTTY)) === 'json' ? process.stderr : process.stdout
  const print = (text: string) => forPeople.write(text)
  const keys = Boolean(process.stdin.isTTY)
  const cloudSwitch = new CloudSwitch(cloud, hub, line => print(statusLine(line)))
  const control = await startControl(cloudSwitch, process.env)
  closers.push(() => control.close())
  await readAsTheNode(hub.proxyUrl, config.nodeName)
  const https = hub.secureUrl ? { url: await hub.secureUrl, ca: path.join(config.certDir, 'ca.crt') } : undefined
  await logsQuiet(lastLine, 300, 3000)
  print(banner({ node: config.nodeName, proxyUrl: hub.proxyUrl, adminUrl: hub.adminUrl, controlUrl: control.url, https, keys }))
  gate?.open(held => afterBanner(held, config.logLevel === 'debug' || config.logLevel === 'trace'))
  hub.health.on('change', state => print(hubStateLine(state, control.url, keys)))
  listenToKeys(cloudSwitch, stop)
}

main().catch(error => {
  process.stderr.write(`outpost: ${(error as Error).stack ?? error}\n`)
  process.exit(1)
})
