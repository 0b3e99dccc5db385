// Leader election on a coordination.k8s.io/v1 Lease with client-go's semantics, against the
// simulator's Leases (optimistic concurrency like the apiserver's): the decision as a table; two
// candidates racing; a partitioned leader stepping down before anyone can take over; a stale
// leader's write refused; a leader that stops handing over at once. The clock is the test's: each
// round is run by hand, so nothing depends on the box's speed.
import t from 'tap'
import { request } from 'undici'
import { ApiServerSimulator } from './simulator/index.ts'
import { LeaseElection, decide, microTime } from '../lib/pool/lease-election.ts'
import type { LeaseRecord } from '../lib/pool/lease-election.ts'
import { leaseApi } from '../lib/pool/lease-api.ts'
import type { JsonCall } from '../lib/pool/lease-api.ts'

const record = (holder: string, transitions = 0, seconds = 15): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: seconds,
  acquireTime: microTime(0),
  renewTime: microTime(0),
  leaseTransitions: transitions,
})

t.test('decide: take, renew, wait or take over', async t => {
  const seen = (holder: string, changedAt: number, transitions = 0) => ({
    lease: { record: record(holder, transitions), resourceVersion: '7', annotations: {} },
    changedAt,
  })
  t.match(
    decide('a', undefined, 1_000, 15),
    { action: 'create', record: { holderIdentity: 'a', leaseTransitions: 0, leaseDurationSeconds: 15 } },
    'no Lease: create it',
  )
  t.match(decide('a', seen('b', 0), 14_999, 15), { action: 'wait', holder: 'b', expiresAt: 15_000 }, "b's term runs 15 s from when a saw it change")
  t.match(
    decide('a', seen('b', 0, 3), 15_000, 15),
    { action: 'update', resourceVersion: '7', record: { holderIdentity: 'a', leaseTransitions: 4 } },
    'expired: taken over, one more transition',
  )
  t.match(decide('a', seen('', 10_000, 3), 10_001, 15), { action: 'update', record: { holderIdentity: 'a', leaseTransitions: 4 } }, 'released: taken at once')
  const renewal = decide('a', seen('a', 0, 3), 50_000, 15)
  t.match(
    renewal,
    { action: 'update', record: { holderIdentity: 'a', leaseTransitions: 3, acquireTime: microTime(0), renewTime: microTime(50_000) } },
    'renewed: same transitions and acquireTime',
  )
  t.equal(microTime(Date.UTC(2026, 10, 25, 17, 0, 0, 123)), '2026-11-25T17:00:00.123000Z', "metav1.MicroTime's format")
})

async function simulator(t: { teardown(fn: () => unknown): void }): Promise<{ sim: ApiServerSimulator; call: (fail?: () => boolean) => JsonCall }> {
  const sim = await ApiServerSimulator.start({})
  t.teardown(() => sim.close())
  const call =
    (fail?: () => boolean): JsonCall =>
    async (method, path, body) => {
      if (fail?.()) throw new Error('connect ECONNREFUSED (partitioned)')
      const res = await request(`${sim.url}${path}`, {
        method,
        headers: { accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      })
      return { statusCode: res.statusCode, body: await res.body.json().catch(() => undefined) }
    }
  return { sim, call }
}

t.test('two candidates: one leader, the other follows; a partitioned leader steps down before its lease can be taken', async t => {
  const { call } = await simulator(t)
  let clock = 1_000_000
  const now = () => clock
  let partitioned = false
  const timing = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, now }
  const a = new LeaseElection(
    leaseApi(
      call(() => partitioned),
      'kube-system',
      'outpost-pool-p1',
    ),
    {
      identity: 'node-a',
      ...timing,
      annotations: () => ({ 'outpost.io/pool-endpoint': '10.0.0.1:10269' }),
    },
  )
  const b = new LeaseElection(leaseApi(call(), 'kube-system', 'outpost-pool-p1'), { identity: 'node-b', ...timing })
  const events: string[] = []
  a.on('leading', () => events.push('a leads'))
  a.on('stopped', () => events.push('a stopped'))
  b.on('leading', () => events.push('b leads'))

  // both find no Lease and create it at once: the apiserver lets one win
  await Promise.all([a.tryAcquireOrRenew(), b.tryAcquireOrRenew()])
  t.equal([a.isLeader, b.isLeader].filter(Boolean).length, 1, 'exactly one leader')
  if (!a.isLeader) {
    // make a the leader for the rest: b releases, a takes it
    await b.stop()
    await a.tryAcquireOrRenew()
  }
  t.ok(a.isLeader, 'a leads')
  await b.tryAcquireOrRenew()
  t.notOk(b.isLeader, 'b follows')
  t.equal(b.lease?.record.holderIdentity, 'node-a', 'b sees who leads')
  t.equal(b.lease?.annotations['outpost.io/pool-endpoint'], '10.0.0.1:10269', 'and where followers reach it')

  // a renews every retry period; b sees the record change each time
  for (let i = 0; i < 3; i++) {
    clock += 2_000
    await a.tryAcquireOrRenew()
    await b.tryAcquireOrRenew()
  }
  t.ok(a.isLeader && !b.isLeader, 'renewals keep the roles')
  const renewedAt = clock
  events.length = 0

  // a loses the apiserver: it keeps trying, and stops leading once the renew deadline has passed
  partitioned = true
  while (a.isLeader) {
    clock += 2_000
    await a.tryAcquireOrRenew()
    await b.tryAcquireOrRenew()
    t.notOk(b.isLeader, `b waits at +${clock - renewedAt} ms`)
  }
  const stoppedAfter = clock - renewedAt
  t.ok(
    stoppedAfter >= 10_000 && stoppedAfter < 15_000,
    `a stopped leading ${stoppedAfter} ms after its last renewal: past the deadline, before the lease ran out`,
  )
  while (!b.isLeader) {
    clock += 2_000
    await b.tryAcquireOrRenew()
  }
  t.ok(clock - renewedAt >= 15_000, `b took over only once a's term had run out on its own clock (${clock - renewedAt} ms)`)
  t.equal(b.lease?.record.leaseTransitions, a.lease!.record.leaseTransitions + 1, 'one more transition')

  // the partition heals: a's view is stale, its write would be refused; it follows
  partitioned = false
  clock += 2_000
  await a.tryAcquireOrRenew()
  t.notOk(a.isLeader, 'a, back, follows b')
  t.same(events, ['a stopped', 'b leads'], 'a stopped leading before b led: never two leaders')
})

t.test('a stale write loses: two leaders never both renew', async t => {
  const { sim, call } = await simulator(t)
  let clock = 0
  const a = new LeaseElection(leaseApi(call(), 'kube-system', 'l'), { identity: 'a', now: () => clock })
  await a.tryAcquireOrRenew()
  t.ok(a.isLeader)
  const api = leaseApi(call(), 'kube-system', 'l')
  const held = (await api.get())!
  // someone else writes the Lease meanwhile (another candidate's takeover)
  await api.update({ ...held.record, holderIdentity: 'intruder' }, {}, held.resourceVersion)
  // a's update built from what it read before would carry an old resourceVersion: refused with 409
  await t.rejects(api.update({ ...held.record, holderIdentity: 'a' }, {}, held.resourceVersion), { name: 'LeaseConflictError' })
  clock += 2_000
  await a.tryAcquireOrRenew()
  t.notOk(a.isLeader, 'a read the intruder holding it and stopped leading')
  t.equal(sim.countRequests(r => r.method === 'PUT' && r.path.endsWith('/leases/l')) >= 2, true)
})

t.test('a leader that stops releases the Lease: the next takes over at once', async t => {
  const { call } = await simulator(t)
  let clock = 0
  const a = new LeaseElection(leaseApi(call(), 'kube-system', 'l'), { identity: 'a', now: () => clock })
  const b = new LeaseElection(leaseApi(call(), 'kube-system', 'l'), { identity: 'b', now: () => clock })
  await a.tryAcquireOrRenew()
  await b.tryAcquireOrRenew()
  t.ok(a.isLeader && !b.isLeader)
  await a.stop()
  t.notOk(a.isLeader)
  clock += 100
  await b.tryAcquireOrRenew()
  t.ok(b.isLeader, 'b leads 100 ms later, not a lease duration later')
  t.equal(b.lease?.record.leaseTransitions, 1)
})
