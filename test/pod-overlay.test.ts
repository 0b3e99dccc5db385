// The pod overlay on its own: when an entry goes back to the cloud (a table, as kube-proxy's
// CategorizeEndpoints is tested), what survives a restart, the versions it mints offline and how a
// client that holds one is resumed.
import t from 'tap'
import { pino } from 'pino'
import { overlayVerdict } from '../lib/overlay/verdict.ts'
import type { OverlayFacts } from '../lib/overlay/verdict.ts'
import { PodOverlay } from '../lib/overlay/pod-overlay.ts'
import type { OverlayState } from '../lib/overlay/pod-overlay.ts'
import { mintedRead } from '../lib/overlay/minted.ts'
import type { MintedRange, MintedRead } from '../lib/overlay/minted.ts'
import type { LocalPod } from '../filters/local-pod.ts'

const log = pino({ level: 'silent' })

t.test('when an overlaid pod follows the cloud again', async t => {
  const base: OverlayFacts = { online: true, cloudBackAt: 1_000, now: 2_000, ttlMs: 60_000, observed: new Map() }
  const cases: { name: string; facts: Partial<OverlayFacts>; want: string }[] = [
    {
      name: 'offline: kept whatever the cloud said before',
      facts: { online: false, cloudBackAt: undefined, observed: new Map([['IPv4', 'current']]) },
      want: 'keep',
    },
    { name: 'online, nothing seen yet', facts: {}, want: 'keep' },
    { name: "online, the cloud's endpoint still names the old address", facts: { observed: new Map([['IPv4', 'stale']]) }, want: 'keep' },
    { name: 'online, the cloud names the current address', facts: { observed: new Map([['IPv4', 'current']]) }, want: 'caught-up' },
    {
      name: 'dual-stack: one family caught up, the other not',
      facts: {
        observed: new Map([
          ['IPv4', 'current'],
          ['IPv6', 'stale'],
        ]),
      },
      want: 'keep',
    },
    {
      name: 'dual-stack: both caught up',
      facts: {
        observed: new Map([
          ['IPv4', 'current'],
          ['IPv6', 'current'],
        ]),
      },
      want: 'caught-up',
    },
    { name: 'the TTL ran out with the cloud still stale', facts: { now: 61_000, observed: new Map([['IPv4', 'stale']]) }, want: 'ttl' },
    { name: 'the TTL ran out, never seen (a pod the cloud no longer lists)', facts: { now: 61_000 }, want: 'ttl' },
    { name: 'just short of the TTL', facts: { now: 60_999 }, want: 'keep' },
  ]
  for (const c of cases) {
    const verdict = overlayVerdict({ ...base, ...c.facts })
    t.equal(verdict.keep ? 'keep' : verdict.why, c.want, c.name)
  }
})

t.test(
  'a read carrying a minted version: 410 where the hub cannot answer it exactly, the current state where it can; a real version is always as it is',
  async t => {
    const offline: MintedRange = { over: 100n, top: 103n, offline: true }
    const back: MintedRange = { ...offline, offline: false }
    const cases: [string, string, boolean, bigint, MintedRange | undefined, MintedRead][] = [
      ['no range', 'watch', false, 102n, undefined, 'as-is'],
      ['a real version below the range', 'watch', false, 100n, offline, 'as-is'],
      ['a real version above the range', 'watch', false, 104n, offline, 'as-is'],
      ['a real version below, online', 'list', true, 50n, back, 'as-is'],
      ['offline, a watch from the newest minted version: from now', 'watch', false, 103n, offline, 'now'],
      ['offline, a watch from an older minted version: start again', 'watch', false, 101n, offline, 'expired'],
      ['online, a watch from any minted version: start again', 'watch', false, 103n, back, 'expired'],
      ['an Exact list at a minted version: start again', 'list', true, 102n, offline, 'expired'],
      ['an Exact list at a minted version online: start again', 'list', true, 102n, back, 'expired'],
      ['offline, a list not older than a minted version: the current state', 'list', false, 102n, offline, 'state'],
      ['online, a list not older than a minted version: the apiserver answers it as it is', 'list', false, 102n, back, 'as-is'],
      ['offline, a get at a minted version: the current state', 'get', false, 103n, offline, 'state'],
    ]
    for (const [name, verb, exact, version, range, want] of cases) t.equal(mintedRead(verb, exact, version, range), want, name)
  },
)

function memoryState(): OverlayState & { saved: unknown; writes: number } {
  const state = {
    saved: undefined as unknown,
    writes: 0,
    async readState() {
      return state.saved === undefined ? undefined : JSON.parse(JSON.stringify(state.saved))
    },
    async writeState(_: string, value: unknown) {
      state.writes++
      await new Promise(resolve => setTimeout(resolve, 5))
      state.saved = JSON.parse(JSON.stringify(value))
    },
  }
  return state
}

const pod = (name: string, ips: string[], ready = true): LocalPod => ({
  namespace: 'shop',
  name,
  uid: `uid-${name}`,
  ips,
  ready,
  serving: ready,
  gone: false,
  terminating: false,
})

t.test('learned pods are on disk before learn() resolves, and a restart reads them back', async t => {
  const state = memoryState()
  const overlay = new PodOverlay({ nodeName: 'n1', state, log, ttlMs: 60_000 })
  overlay.setOnline(false)
  let changes = 0
  overlay.on('change', () => changes++)
  await Promise.all(Array.from({ length: 20 }, (_, i) => overlay.learn(pod(`p${i}`, [`10.0.0.${i}`]), [`10.1.0.${i}`])))
  t.equal(changes, 20, 'one change per pod')
  t.ok(state.writes < 20, `20 pods learned at once share saves (${state.writes})`)
  t.equal((state.saved as any).pods.length, 20, 'every one is saved')
  await overlay.learn(pod('p0', ['10.0.0.0']), ['10.1.0.0'])
  t.equal(changes, 20, 'the same status again is no change')

  const again = new PodOverlay({ nodeName: 'n1', state, log, ttlMs: 60_000 })
  await again.load()
  t.equal(again.size, 20)
  t.same(again.input().pods.get('shop/p3')?.ips, ['10.0.0.3'])
  t.same(again.describe().pods.find(p => p.pod === 'shop/p3')?.was, ['10.1.0.3'], 'with the address the cloud had')
})

t.test('offline, each change mints a version above every real one, and the range is kept exactly', async t => {
  let now = 0
  const state = memoryState()
  const overlay = new PodOverlay({ nodeName: 'n1', state, log, ttlMs: 60_000, now: () => now })
  overlay.setRealVersion(() => 120n)
  overlay.setOnline(false)
  t.equal(overlay.mintedVersion(), undefined, 'nothing minted before a change')
  const gap = 2n ** 40n
  await overlay.learn(pod('a', ['10.0.0.1']), ['10.1.0.1'])
  t.equal(overlay.mintedVersion(), 121n + gap, 'far above the highest real version (etcd moves on meanwhile: no real version meets it)')
  await overlay.learn(pod('a', ['10.0.0.1'], false), ['10.1.0.1'])
  t.equal(overlay.mintedVersion(), 122n + gap, 'a second change of the same pod: another version')
  t.same(overlay.mintedRange(), { over: 120n + gap, top: 122n + gap, offline: true }, 'the range: exactly the minted versions')
  const restarted = new PodOverlay({ nodeName: 'n1', state, log, ttlMs: 60_000, now: () => now })
  await restarted.load()
  restarted.setOnline(false)
  t.same(restarted.mintedRange(), { over: 120n + gap, top: 122n + gap, offline: true }, 'kept on disk')
  overlay.setOnline(true)
  t.equal(overlay.mintedVersion(), undefined, 'online nothing is minted')
  t.same(overlay.mintedRange(), { over: 120n + gap, top: 122n + gap, offline: false }, 'still told from real versions once the cloud is back')
  now += 2 * 60 * 60 * 1000
  t.equal(overlay.mintedRange(), undefined, 'and forgotten an hour after')
  overlay.close()
  restarted.close()
})

t.test("online, an entry goes once the cloud's endpoint names the pod's address", async t => {
  let now = 0
  const overlay = new PodOverlay({ nodeName: 'n1', state: memoryState(), log, ttlMs: 60_000, now: () => now, checkMs: 1_000_000 })
  overlay.setOnline(false)
  await overlay.learn(pod('a', ['10.0.0.1']), ['10.1.0.1'])
  overlay.setOnline(true)
  const seen = overlay.input()
  const a = seen.pods.get('shop/a')!
  seen.observed?.(a, 'IPv4', ['10.1.0.1'])
  overlay.check()
  t.equal(overlay.size, 1, 'the cloud still names the old address: kept')
  seen.observed?.(a, 'IPv4', ['10.0.0.1'])
  overlay.check()
  t.equal(overlay.size, 0, 'caught up: gone')
  await overlay.learn(pod('b', ['10.0.0.2']), ['10.1.0.2'])
  now = 61_000
  overlay.check()
  t.equal(overlay.size, 0, 'never seen, and the TTL since the cloud came back ran out')
  overlay.close()
})

t.test("kubelet's retries of the same status cost no disk write; an overlay read back with the cloud up runs out its TTL", async t => {
  const state = memoryState()
  let now = 0
  const overlay = new PodOverlay({ nodeName: 'n1', state, log, ttlMs: 60_000, now: () => now, checkMs: 1_000_000 })
  overlay.setOnline(false)
  await overlay.learn(pod('a', ['10.0.0.1']), ['10.1.0.1'])
  const writes = state.writes
  for (let i = 0; i < 10; i++) await overlay.learn(pod('a', ['10.0.0.1']), ['10.1.0.1'])
  t.equal(state.writes, writes, 'ten retries, no save')

  // the hub restarts with the cloud up: the TTL counts from then, entries are not kept for good
  const again = new PodOverlay({ nodeName: 'n1', state, log, ttlMs: 60_000, now: () => now, checkMs: 1_000_000 })
  await again.load()
  now = 5_000
  again.setOnline(true)
  again.check()
  t.equal(again.size, 1, 'kept while the cloud may still catch up')
  now = 65_000
  again.check()
  t.equal(again.size, 0, 'gone once the TTL since the start ran out')
  again.close()
})
