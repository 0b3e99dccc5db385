// `npx tsx cmd/outpost.ts` (or `npm start`) stopped by npm's PID: the hub under it stops too,
// instead of holding its ports with nobody to stop it (cmd/shutdown.ts stopWithLauncher).
import t from 'tap'
import { spawn } from 'node:child_process'
import { stopWithLauncher } from '../cmd/shutdown.ts'
import { adminHealthy, eventually, freePort } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const root = new URL('..', import.meta.url).pathname

t.test('watched only under npm: the nearest npm among the ancestors, until it is gone or its PID is reused', async t => {
  // /proc/<pid>/stat: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
  const stat = (pid: number, comm: string, parent: number, start: number) => `${pid} (${comm}) S ${parent} 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 ${start} 0`
  type Tree = Record<string, string>
  // the hub (under tsx, sh) under `npm exec`, in a process group whose leader (a CI script's shell, 7) is gone
  const tree = (npm: string | undefined): Tree => ({
    '/proc/self/stat': stat(500, 'node', 400, 90),
    '/proc/400/stat': stat(400, 'node', 300, 80),
    '/proc/300/stat': stat(300, 'sh', 200, 70),
    ...(npm ? { '/proc/200/stat': npm } : {}),
    '/proc/100/stat': stat(100, 'bash (ci)', 1, 10),
  })
  const files = (tree: Tree) => (path: string) => {
    if (path in tree) return tree[path]
    throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' })
  }
  const npmAlive = stat(200, 'npm exec tsx c', 100, 60)
  const settle = () => new Promise(resolve => setTimeout(resolve, 50))
  let gone = 0
  stopWithLauncher({}, () => gone++, files(tree(undefined)), 10)
  await settle()
  t.equal(gone, 0, 'not under npm: nothing watched')
  const stopAlive = stopWithLauncher({ npm_command: 'exec' }, () => gone++, files(tree(npmAlive)), 10)
  await settle()
  t.equal(gone, 0, 'under npm, npm alive (though the group leader is gone): the hub runs on')
  stopAlive()
  const noNpm = { ...tree(undefined), '/proc/300/stat': stat(300, 'sh', 100, 70) }
  stopWithLauncher({ npm_command: 'exec' }, () => gone++, files(noNpm), 10)
  await settle()
  t.equal(gone, 0, 'npm variables inherited, no npm among the ancestors: nothing watched')

  const live = tree(npmAlive)
  stopWithLauncher({ npm_command: 'exec' }, () => gone++, files(live), 10)
  delete live['/proc/200/stat']
  await eventually(() => gone === 1, 2_000, 'the hub told to stop')
  await settle()
  t.equal(gone, 1, 'npm gone: the hub is told to stop, once')
  const reused = tree(npmAlive)
  stopWithLauncher({ npm_command: 'exec' }, () => gone++, files(reused), 10)
  reused['/proc/200/stat'] = stat(200, 'postgres', 1, 999)
  await eventually(() => gone === 2, 2_000, 'the hub told to stop')
  t.pass("npm's PID now another process's: the hub is told to stop")
})

t.test('npx tsx cmd/outpost.ts, then SIGTERM to npx alone: the hub stops and frees its ports', async t => {
  const [port, adminPort, controlPort] = [await freePort(), await freePort(), await freePort()]
  const args = ['tsx', 'cmd/outpost.ts', '--port', String(port), '--admin-port', String(adminPort), '--secure-port', '0']
  args.push('--cache-dir', tempDir(t, 'outpost-npx-cache-'), '--cert-dir', tempDir(t, 'outpost-npx-pki-'))
  // a group of its own, led by npx, as a shell starts a command
  const npx = spawn('npx', args, { cwd: root, detached: true, stdio: 'ignore', env: { ...process.env, OUTPOST_DEMO_PORT: String(controlPort) } })
  t.teardown(() => {
    try {
      process.kill(-npx.pid!, 'SIGKILL')
    } catch {
      // the group is gone already
    }
  })
  const healthy = () => adminHealthy(adminPort)
  await eventually(healthy, 60_000, 'the hub to serve')
  process.kill(npx.pid!, 'SIGTERM')
  await eventually(async () => !(await healthy()), 20_000, 'the hub to stop once npx is gone')
  t.pass('the admin port no longer answers')
  const left = () => {
    try {
      process.kill(-npx.pid!, 0)
      return true
    } catch {
      return false
    }
  }
  await eventually(() => !left(), 20_000, 'every process of the group to exit')
  t.pass('nothing of the group is left running')
})
