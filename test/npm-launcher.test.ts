// `npx tsx cmd/outpost.ts` (or `npm start`) stopped by npm's PID: the hub under it stops too,
// instead of holding its ports with nobody to stop it (cmd/shutdown.ts stopWithLauncher).
import t from 'tap'
import { spawn } from 'node:child_process'
import { stopWithLauncher } from '../cmd/shutdown.ts'
import { adminHealthy, eventually, freePort } from './helpers/hub.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const root = new URL('..', import.meta.url).pathname

t.test('watched only under npm, and stops once the group leader is gone', async t => {
  const stat = (group: number) => `${process.pid} (node (x)) S 1 ${group} ${group} 0`
  let gone = 0
  const files = (leaderAlive: boolean) => (path: string) => {
    if (path === '/proc/self/stat') return stat(4242)
    if (path === '/proc/4242/stat' && leaderAlive) return stat(4242)
    throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' })
  }
  stopWithLauncher({}, () => gone++, files(false), 10)
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal(gone, 0, 'not under npm: nothing watched')
  const stopAlive = stopWithLauncher({ npm_command: 'exec' }, () => gone++, files(true), 10)
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal(gone, 0, 'under npm, its leader alive: the hub runs on')
  stopAlive()
  stopWithLauncher({ npm_command: 'exec' }, () => gone++, files(false), 10)
  await eventually(() => gone === 1, 2_000, 'the hub told to stop')
  t.pass('under npm, the leader gone: the hub is told to stop, once')
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
