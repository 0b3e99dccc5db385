// The outpost command in a child process, as on a node: what a SIGKILL and a restart are tested on.
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { request } from 'undici'
import { eventually, freePort } from './hub.ts'

const entry = new URL('../../cmd/outpost.ts', import.meta.url).pathname

// As the harness's hubs (helpers/hub.ts): a refused cloud is offline within a second; a slow
// probe on a loaded box is given seconds, three in a row before a cloud that is there counts as gone.
const healthFlags = ['--health-interval', '200ms', '--health-timeout', '5s', '--health-failures', '3', '--health-successes', '1']

export interface HubProcess {
  url: string
  /** the admin port's URL (/debug/cache, /v1/readyz) */
  adminUrl: string
  child: ChildProcess
  /** SIGKILL; resolves once it has exited, so nothing more is written to its cache dir */
  kill(): Promise<void>
}

/** Starts the hub as node kind-worker2 against `server`, resolves once its admin port answers. */
export async function startHubProcess(server: string, cacheDir: string, extraArgs: string[] = []): Promise<HubProcess> {
  const port = await freePort()
  const adminPort = await freePort()
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      entry,
      '--server',
      server,
      '--cache-dir',
      cacheDir,
      '--port',
      String(port),
      '--admin-port',
      String(adminPort),
      '--secure-port',
      '0',
      '--node-name',
      'kind-worker2',
      '--log-level',
      'warn',
      ...healthFlags,
      ...extraArgs,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  )
  const exited = new Promise(resolve => child.once('exit', resolve))
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGKILL')
    await exited
  }
  const url = `http://127.0.0.1:${port}`
  await eventually(
    async () => {
      try {
        const res = await request(`${url}/v1/healthz`.replace(String(port), String(adminPort)))
        await res.body.dump()
        return res.statusCode === 200
      } catch {
        return false
      }
    },
    30_000,
    'the hub process to listen',
  )
  return { url, adminUrl: `http://127.0.0.1:${adminPort}`, child, kill }
}
