// Runs the real kubectl against the hub, isolated from any kubeconfig on the machine.
import { execFile, spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { processTempDir } from './temp-dirs.ts'

// kubectl's HOME too (its discovery cache): removed when the test process exits
const emptyKubeconfig = path.join(processTempDir('outpost-kubectl-'), 'config')
writeFileSync(emptyKubeconfig, 'apiVersion: v1\nkind: Config\n')
const env = { ...process.env, KUBECONFIG: emptyKubeconfig, HOME: path.dirname(emptyKubeconfig) }

export function kubectl(server: string, args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise(resolve => {
    execFile('kubectl', ['--server', server, ...args], { env, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0
      resolve({ stdout, stderr, code })
    })
  })
}

/** A long-running kubectl (get -w) whose output accumulates in `output`. */
export function kubectlStream(server: string, args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn('kubectl', ['--server', server, ...args], { env })
  let out = ''
  child.stdout.on('data', chunk => (out += chunk.toString()))
  child.stderr.on('data', chunk => (out += chunk.toString()))
  return { child, output: () => out }
}
