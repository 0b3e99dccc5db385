// `npm start` as a newcomer runs it (the outpost command with no apiserver: the demo), on free ports,
// and the shell the newcomer pastes its commands into.
import type { Test } from 'tap'
import { execFile, spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { eventually, freePort } from './hub.ts'
import { processTempDir, tempDir } from './temp-dirs.ts'

export const outpostEntry = new URL('../../cmd/outpost.ts', import.meta.url).pathname

export interface Demo {
  child: ChildProcess
  port: number
  adminPort: number
  /** the demo's control port (OUTPOST_DEMO_PORT; 10270 as a newcomer runs it) */
  controlPort: number
  /** stdout and stderr so far */
  output(): string
  /** stdout alone so far */
  stdout(): string
}

/**
 * The demo on free ports. Its cache and certificates go in directories of the test's (the demo would
 * make temp dirs it leaves behind, for the newcomer to look into), so the printed commands name
 * them; the demo is killed, then they are removed, when the test ends. Resolves once the banner
 * is printed whole.
 */
export async function startDemo(t: Test): Promise<Demo> {
  const cacheDir = tempDir(t, 'outpost-demo-cache-')
  const certDir = tempDir(t, 'outpost-demo-pki-')
  const [port, adminPort, securePort, controlPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const args = ['--port', port, '--admin-port', adminPort, '--secure-port', securePort, '--cache-dir', cacheDir, '--cert-dir', certDir].map(String)
  const child = spawn(process.execPath, ['--import', 'tsx', outpostEntry, ...args], { env: { ...process.env, OUTPOST_DEMO_PORT: String(controlPort) } })
  const exited = once(child, 'exit')
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  let output = ''
  let stdout = ''
  child.stdout!.on('data', chunk => ((output += chunk.toString()), (stdout += chunk.toString())))
  child.stderr!.on('data', chunk => (output += chunk.toString()))
  await eventually(() => /Stop: .*\n─+\n/.test(output) || child.exitCode !== null, 45_000, 'the demo banner')
  if (child.exitCode !== null) throw new Error(`the demo exited ${child.exitCode}: ${output}`)
  return { child, port, adminPort, controlPort, output: () => output, stdout: () => stdout }
}

/** The commands a banner or a README block prints: its lines that start with curl or kubectl. */
export function commandsIn(text: string): string[] {
  return text
    .split('\n')
    .map(l => l.trim())
    .filter(l => l.startsWith('curl ') || l.startsWith('kubectl '))
}

// kubectl's config and HOME (its discovery cache): nothing of the machine's, removed at exit
const home = processTempDir('outpost-demo-shell-')
writeFileSync(path.join(home, 'config'), 'apiVersion: v1\nkind: Config\n')
const shellEnv = { ...process.env, KUBECONFIG: path.join(home, 'config'), HOME: home }

/** A command as pasted into a shell. */
export function sh(command: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise(resolve =>
    execFile('sh', ['-c', command], { env: shellEnv, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    ),
  )
}

/** A long-running command (a watch) as pasted into a shell of its own; its output accumulates. */
export function shStream(t: Test, command: string): { child: ChildProcess; output(): string } {
  const child = spawn('sh', ['-c', `exec ${command}`], { env: shellEnv })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let out = ''
  child.stdout.on('data', chunk => (out += chunk.toString()))
  child.stderr.on('data', chunk => (out += chunk.toString()))
  return { child, output: () => out }
}
