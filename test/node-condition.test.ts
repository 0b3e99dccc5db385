// The OutpostAutonomy Node condition (issue 32, part 5): what it says (a table), when it is read and
// written (a table), the simulator merging it into a Node as the apiserver does, and the writer
// against the simulator through a hub: kubectl shows it, it does not flap, nothing is written
// offline and a change made offline is written once the cloud is back.
import t from 'tap'
import { fixtureJson } from './helpers/fixtures.ts'
import { autonomyCondition, conditionType } from '../lib/autonomy/condition.ts'
import type { AutonomyCondition, AutonomyFacts } from '../lib/autonomy/condition.ts'
import { autonomyFacts } from '../lib/autonomy/facts.ts'
import { nextStep } from '../lib/autonomy/schedule.ts'
import type { ScheduleState } from '../lib/autonomy/schedule.ts'
import { AutonomyWriter, nodeApiOf } from '../lib/autonomy/node-condition.ts'
import type { NodeApi } from '../lib/autonomy/node-condition.ts'
import { parseScope } from '../lib/cache/scope.ts'
import { strategicMergePatch } from './simulator/patch.ts'
import { request } from './simulator/testclient.ts'
import { comeBack, eventually, goDark, quietLogger, startHarness } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { kubectl } from './helpers/kubectl.ts'

const node = 'kind-worker2'
const base: AutonomyFacts = { nodeName: node, durable: true, loading: false, podsSynced: true, nodePods: 3, collections: 7 }

t.test('autonomyCondition: the first problem an operator must fix wins', async t => {
  const cases: { name: string; facts: Partial<AutonomyFacts>; status: string; reason: string; message: RegExp }[] = [
    { name: 'all well', facts: {}, status: 'True', reason: 'CacheReady', message: /this node's 3 pods and 7 cached collections on disk/ },
    {
      name: 'one pod, one collection',
      facts: { nodePods: 1, collections: 1 },
      status: 'True',
      reason: 'CacheReady',
      message: /1 pod and 1 cached collection on/,
    },
    {
      name: 'cache dir unusable',
      facts: { cacheOff: 'offline autonomy is off: the cache dir cannot be used (EROFS: read-only file system)', durable: false, notDurableWhy: 'x' },
      status: 'False',
      reason: 'CacheDisabled',
      message: /^Offline autonomy is off: the cache dir cannot be used \(EROFS.*\): give outpost a cache dir it can write \(--cache-dir\)/,
    },
    {
      name: 'disk full',
      facts: { durable: false, notDurableWhy: 'ENOSPC: no space left on device, write (needed 4096 bytes, 0 free)' },
      status: 'False',
      reason: 'DiskFull',
      message: /^The cache disk is full \(ENOSPC.*\): free space on it/,
    },
    {
      name: 'disk failing otherwise (before loading and sync)',
      facts: { durable: false, notDurableWhy: 'EIO: i/o error', loading: true, podsSynced: false },
      status: 'False',
      reason: 'CacheNotDurable',
      message: /\(EIO: i\/o error\): fix the disk/,
    },
    { name: 'still loading', facts: { loading: true, podsSynced: false }, status: 'Unknown', reason: 'Loading', message: /still reading its cache/ },
    {
      name: 'pods never listed',
      facts: { podsSynced: false, nodePods: 0 },
      status: 'False',
      reason: 'NeverSynced',
      message: /spec.nodeName=kind-worker2.*point kubelet's kubeconfig at outpost/,
    },
    {
      name: 'pods listed once, no longer whole',
      facts: { podsSynced: false, podsIncomplete: 'an event could not be read' },
      status: 'False',
      reason: 'PodsIncomplete',
      message: /no longer whole \(an event could not be read\)/,
    },
  ]
  for (const c of cases) {
    const got = autonomyCondition({ ...base, ...c.facts })
    t.equal(got.status, c.status, `${c.name}: status`)
    t.equal(got.reason, c.reason, `${c.name}: reason`)
    t.match(got.message, c.message, `${c.name}: message`)
    t.match(got.message, /^[^.]*(\.[^ .][^.]*)*\.$/, `${c.name}: one sentence`)
  }
})

const cond = (reason: string, status: 'True' | 'False' | 'Unknown' = 'True'): AutonomyCondition => ({ status, reason, message: `${reason}.` })

t.test('nextStep: read first, write a settled change, at most once per interval, never offline', async t => {
  const limits = { online: true, now: 100_000, settleMs: 10_000, minIntervalMs: 30_000 }
  const settled = 100_000 - 10_000
  const cases: { name: string; state: Partial<ScheduleState>; limits?: Partial<typeof limits>; want: string }[] = [
    { name: 'offline: nothing, not even a read', state: { onNode: undefined }, limits: { online: false }, want: 'wait:offline' },
    { name: 'offline with a settled change: nothing', state: { onNode: cond('A') }, limits: { online: false }, want: 'wait:offline' },
    { name: 'the Node not read yet', state: { onNode: undefined }, want: 'read' },
    { name: 'backing off after a failure', state: { onNode: undefined, retryAt: 100_001 }, want: 'wait:backoff' },
    { name: 'backoff over', state: { onNode: undefined, retryAt: 100_000 }, want: 'read' },
    { name: 'the Node already says it', state: { desired: cond('B') }, want: 'wait:written' },
    { name: 'the Node has none: write once settled', state: { onNode: null }, want: 'write' },
    { name: 'a change not settled yet', state: { desiredSince: settled + 1 }, want: 'wait:settling' },
    { name: 'a settled change', state: {}, want: 'write' },
    { name: 'a settled change within the interval', state: { lastWriteAt: 100_000 - 29_999 }, want: 'wait:interval' },
    { name: 'a settled change after the interval', state: { lastWriteAt: 100_000 - 30_000 }, want: 'write' },
    { name: 'only the message changed: still a change', state: { desired: { ...cond('B'), message: 'other.' } }, want: 'write' },
  ]
  for (const c of cases) {
    const state: ScheduleState = { desired: cond('A'), desiredSince: settled, onNode: cond('B'), ...c.state }
    const step = nextStep(state, { ...limits, ...c.limits })
    t.equal(step.do === 'wait' ? `wait:${step.why}` : step.do, c.want, c.name)
  }
})

t.test('simulator: strategic merge patch merges lists by their Kubernetes merge keys', async t => {
  const c = (type: string, status = 'True', extra: object = {}) => ({ type, status, ...extra })
  const kubeletPatch = fixtureJson('kubelet-writes/04-patch-nodes-status.json')
  const cases: { name: string; target: any; patch: any; want: any }[] = [
    {
      name: 'conditions by type: one condition patched, the others kept',
      target: { status: { conditions: [c('Ready'), c('OutpostAutonomy', 'False')] } },
      patch: { status: { conditions: [c('OutpostAutonomy', 'True', { reason: 'CacheReady' })] } },
      want: { status: { conditions: [c('Ready'), c('OutpostAutonomy', 'True', { reason: 'CacheReady' })] } },
    },
    {
      name: "kubelet's node status patch ($setElementOrder/conditions) keeps a condition it does not know, in its place",
      target: { status: { conditions: ['MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready', 'OutpostAutonomy'].map(type => c(type)) } },
      patch: kubeletPatch.requestObject,
      want: {
        status: {
          conditions: [...kubeletPatch.requestObject.status.conditions.map((k: any) => ({ status: 'True', ...k })), c('OutpostAutonomy')],
        },
      },
    },
    {
      name: 'a new condition without an order goes before the object’s own',
      target: { status: { conditions: [c('Ready')] } },
      patch: { status: { conditions: [c('OutpostAutonomy')] } },
      want: { status: { conditions: [c('OutpostAutonomy'), c('Ready')] } },
    },
    {
      name: '$setElementOrder alone reorders',
      target: { status: { conditions: [c('A'), c('B')] } },
      patch: { status: { '$setElementOrder/conditions': [{ type: 'B' }, { type: 'A' }] } },
      want: { status: { conditions: [c('B'), c('A')] } },
    },
    {
      name: '$patch: delete removes by type',
      target: { status: { conditions: [c('Ready'), c('OutpostAutonomy')] } },
      patch: { status: { conditions: [{ $patch: 'delete', type: 'OutpostAutonomy' }] } },
      want: { status: { conditions: [c('Ready')] } },
    },
    {
      name: 'podIPs by ip, in the order given',
      target: { status: { podIPs: [{ ip: '10.0.0.1' }, { ip: 'fd00::1' }] } },
      patch: {
        status: { '$setElementOrder/podIPs': [{ ip: '10.0.0.2' }, { ip: 'fd00::1' }], podIPs: [{ ip: '10.0.0.2' }, { $patch: 'delete', ip: '10.0.0.1' }] },
      },
      want: { status: { podIPs: [{ ip: '10.0.0.2' }, { ip: 'fd00::1' }] } },
    },
    {
      name: "a node's addresses by type",
      target: {
        status: {
          addresses: [
            { type: 'InternalIP', address: '10.0.0.1' },
            { type: 'Hostname', address: 'n' },
          ],
        },
      },
      patch: { status: { addresses: [{ type: 'InternalIP', address: '10.0.0.9' }] } },
      want: {
        status: {
          addresses: [
            { type: 'InternalIP', address: '10.0.0.9' },
            { type: 'Hostname', address: 'n' },
          ],
        },
      },
    },
    {
      name: 'containerStatuses by name',
      target: {
        status: {
          containerStatuses: [
            { name: 'a', ready: true },
            { name: 'b', ready: true },
          ],
        },
      },
      patch: { status: { containerStatuses: [{ name: 'b', ready: false }] } },
      want: {
        status: {
          containerStatuses: [
            { name: 'a', ready: true },
            { name: 'b', ready: false },
          ],
        },
      },
    },
    {
      name: 'a list without a merge key (an Endpoints subset’s addresses) is replaced',
      target: { subsets: [{ addresses: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2' }] }] },
      patch: { subsets: [{ addresses: [{ ip: '10.0.0.3' }] }] },
      want: { subsets: [{ addresses: [{ ip: '10.0.0.3' }] }] },
    },
  ]
  for (const x of cases) t.same(strategicMergePatch(x.target, x.patch), x.want, x.name)
})

const autonomyOf = (nodeObject: any) => nodeObject?.status?.conditions?.find((c: any) => c.type === conditionType)
const nodeInSimulator = (h: Harness) => h.simulator.list('v1', 'Node').find((n: any) => n.metadata.name === node)
const statusPatches = (h: Harness) => h.simulator.countRequests({ method: 'PATCH', path: `/api/v1/nodes/${node}/status` })

/** The hub's node API, counting the calls made while the hub thinks the cloud is away. */
function countingApi(h: Harness): { api: NodeApi; offlineCalls: () => number } {
  const api = nodeApiOf(h.hub.upstream)
  let offline = 0
  return {
    api: (...args) => {
      if (h.hub.health.state !== 'online') offline++
      return api(...args)
    },
    offlineCalls: () => offline,
  }
}

t.test('the writer through a hub: kubectl shows the condition; offline nothing is written, the change follows on reconnect', async t => {
  // the hub's own writer off: this test drives one of its own
  const h = await startHarness({ demo: true, config: { nodeCondition: false } })
  t.teardown(() => h.close())
  const { api, offlineCalls } = countingApi(h)
  const writer = new AutonomyWriter({
    nodeName: node,
    api,
    condition: () => autonomyCondition(autonomyFacts(h.hub.store, node)),
    isOnline: () => h.hub.health.state === 'online',
    log: quietLogger(),
    settleMs: 200,
    tickMs: 20,
    minIntervalMs: 0,
  }).start()
  t.teardown(() => writer.stop())

  // kubelet has listed nothing through the hub yet
  await eventually(() => autonomyOf(nodeInSimulator(h))?.reason === 'NeverSynced', 10_000, 'the NeverSynced condition')
  t.equal(statusPatches(h), 1, 'written once')

  const kubeletUA = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
  const list = await request(`${h.url}/api/v1/pods?fieldSelector=spec.nodeName%3D${node}&limit=500&resourceVersion=0`, { headers: { 'user-agent': kubeletUA } })
  t.equal(list.status, 200)
  await eventually(() => autonomyOf(nodeInSimulator(h))?.status === 'True', 10_000, 'the True condition')
  const written = autonomyOf(nodeInSimulator(h))
  t.equal(written.reason, 'CacheReady')
  t.match(written.message, new RegExp(`this node's ${list.json.items.length} pods? `))
  t.ok(written.lastHeartbeatTime && written.lastTransitionTime, 'times set')

  const jsonpath = await kubectl(h.simulator.url, ['get', 'node', node, '-o', `jsonpath={.status.conditions[?(@.type=="${conditionType}")].reason}`])
  t.equal(jsonpath.code, 0, jsonpath.stderr)
  t.equal(jsonpath.stdout, 'CacheReady', 'kubectl get node -o jsonpath')
  const describe = await kubectl(h.simulator.url, ['describe', 'node', node])
  t.equal(describe.code, 0, describe.stderr)
  t.match(describe.stdout, /OutpostAutonomy\s+True\s+.*CacheReady\s+outpost holds this node's/, 'kubectl describe node')

  // kubelet's own status patch (with $setElementOrder/conditions) leaves the condition alone
  const kubeletPatch = fixtureJson('kubelet-writes/04-patch-nodes-status.json')
  const patched = await request(`${h.simulator.url}/api/v1/nodes/${node}/status`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/strategic-merge-patch+json', 'user-agent': kubeletUA },
    body: kubeletPatch.requestObject,
  })
  t.equal(patched.status, 200)
  t.same(
    patched.json.status.conditions.map((c: any) => c.type),
    ['MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready', conditionType],
  )

  // offline, the pods' list stops being whole: nothing is sent while the cloud is away
  await goDark(h)
  const before = statusPatches(h)
  // whichever collection holds kubelet's list (a shared watch cache's, with --shared-watches)
  const pods = h.hub.store.all().find(c => c.key.resource === 'pods' && c.listed.size > 0)
  t.ok(pods, "kubelet's pods are cached")
  await h.hub.store.invalidateScope(pods!.key, parseScope({ namespace: '', labelSelector: '', fieldSelector: `spec.nodeName=${node}` }), 'a test broke it')
  t.equal(autonomyCondition(autonomyFacts(h.hub.store, node)).reason, 'PodsIncomplete', 'the facts changed')
  await eventually(() => writer.report().desired.reason === 'PodsIncomplete', 5_000, 'the writer to see the change')
  await new Promise(resolve => setTimeout(resolve, 600)) // three settle times: long enough that a writer that wrote offline would have
  t.equal(offlineCalls(), 0, 'no request while offline')
  t.equal(writer.failures, 0, 'none tried and failed')

  await comeBack(h)
  await eventually(() => autonomyOf(nodeInSimulator(h))?.reason === 'PodsIncomplete', 10_000, 'the change written after reconnect')
  t.equal(autonomyOf(nodeInSimulator(h)).status, 'False')
  t.not(autonomyOf(nodeInSimulator(h)).lastTransitionTime, written.lastTransitionTime, 'a new status: a new transition time')
  await new Promise(resolve => setTimeout(resolve, 300))
  t.equal(statusPatches(h) - before, 1, 'written once')
})

t.test('it cannot flap: facts changing every tick are never written, values flipping slower cost one write per interval', async t => {
  // the hub's own writer off: this test drives one of its own
  const h = await startHarness({ demo: true, config: { nodeCondition: false } })
  t.teardown(() => h.close())
  let value = cond('First')
  let flapping = true
  let flip = false
  const writer = new AutonomyWriter({
    nodeName: node,
    api: nodeApiOf(h.hub.upstream),
    // while flapping, every look at the facts finds them changed
    condition: () => (flapping ? ((flip = !flip) ? cond('Up') : cond('Down', 'False')) : value),
    isOnline: () => h.hub.health.state === 'online',
    log: quietLogger(),
    settleMs: 100,
    tickMs: 5,
    minIntervalMs: 1_500,
  }).start()
  t.teardown(() => writer.stop())

  await eventually(() => writer.report().onNode !== undefined, 5_000, 'the Node read')
  await new Promise(resolve => setTimeout(resolve, 800))
  t.equal(writer.report().writes, 0, 'flapping for 800 ms (8 settle times): nothing written')
  t.equal(statusPatches(h), 0)

  value = cond('Settled', 'False')
  flapping = false
  await eventually(() => autonomyOf(nodeInSimulator(h))?.reason === 'Settled', 5_000, 'the settled value written')
  t.equal(statusPatches(h), 1, 'one write for it')

  // values that each hold longer than the settle time, for less than the interval: 1.2 s of them,
  // longer on a loaded box, and at most one write per interval begun (1.5 s)
  const flipping = Date.now()
  for (let i = 0; i < 8; i++) {
    value = cond(i % 2 ? 'Settled' : 'Other', 'False')
    await new Promise(resolve => setTimeout(resolve, 150))
  }
  value = cond('Last')
  const intervals = Math.ceil((Date.now() - flipping) / 1_500)
  t.ok(statusPatches(h) <= 1 + intervals, `at most one more write per interval while they flipped (${statusPatches(h) - 1} in ${intervals})`)
  await eventually(() => autonomyOf(nodeInSimulator(h))?.reason === 'Last', 10_000, 'the last value written after the interval')
  t.ok(statusPatches(h) <= 2 + intervals, `and one for the last value (${statusPatches(h)} writes in all)`)
})

t.test("the hub keeps the condition on its own Node, with the node's credentials", async t => {
  const h = await startHarness({ demo: true, start: { autonomy: { settleMs: 100, minIntervalMs: 0, tickMs: 20 } } })
  t.teardown(() => h.close())
  await eventually(() => autonomyOf(nodeInSimulator(h))?.reason === 'NeverSynced', 10_000, 'the NeverSynced condition')
  const list = await request(`${h.url}/api/v1/pods?fieldSelector=spec.nodeName%3D${node}`, { headers: { 'user-agent': 'kubelet/v1.24.0' } })
  t.equal(list.status, 200)
  await eventually(() => autonomyOf(nodeInSimulator(h))?.status === 'True', 10_000, 'the True condition once kubelet has listed its pods')
})
