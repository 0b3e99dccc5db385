// The read contract as Kubernetes' API-machinery conformance tests phrase it, through a hub whose
// shared watch caches answer: watches from the same version see the same events in the same order,
// and a watch restarted from the last version it observed sees exactly what came after.
import t from 'tap'
import { request } from 'undici'
import { startHarness, eventually } from './helpers/hub.ts'
import type { Harness } from './helpers/hub.ts'
import { readWatch } from './helpers/watch.ts'

const kubeProxy = 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'
const path = '/api/v1/namespaces/contract/services'
const service = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'contract' },
  spec: { ports: [{ port: 80, protocol: 'TCP' }] },
})

async function watchFrom(h: Harness, resourceVersion: string) {
  const res = await request(`${h.url}${path}?watch=true&resourceVersion=${resourceVersion}`, { headers: { 'user-agent': kubeProxy } })
  t.equal(res.statusCode, 200, `a watch from ${resourceVersion}`)
  return { ...readWatch(res.body), stop: () => res.body.destroy() }
}

const seen = (events: any[]) => events.map(e => `${e.type} ${e.object.metadata.name}@${e.object.metadata.resourceVersion}`)

/** Creates, changes and deletes Services (a shared watch cache's resource) at the apiserver: `count` events. */
function changes(h: Harness, prefix: string): number {
  for (let i = 0; i < 5; i++) h.simulator.create(service(`${prefix}-${i}`))
  for (let i = 0; i < 5; i += 2) h.simulator.patch('v1', 'Service', 'contract', `${prefix}-${i}`, { metadata: { labels: { changed: 'yes' } } })
  h.simulator.remove('v1', 'Service', 'contract', `${prefix}-1`)
  return 5 + 3 + 1
}

t.test('watches from the same version see the same events in the same order', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const listed = (await (await request(`${h.url}${path}?resourceVersion=0`, { headers: { 'user-agent': kubeProxy } })).body.json()) as any
  const from = listed.metadata.resourceVersion
  const early = await watchFrom(h, from) // open while the changes happen
  const count = changes(h, 'same')
  await eventually(() => early.events.length >= count, 10_000, 'the first watch to see every change')
  const late = [await watchFrom(h, from), await watchFrom(h, from)] // opened after: replayed from the cache's window
  t.equal(
    h.simulator.countRequests(r => r.watch && r.path === path),
    0,
    "every watch was the hub's shared watch cache's",
  )
  await eventually(() => late.every(w => w.events.length >= count), 10_000, 'the replays')
  for (const w of [early, ...late]) w.stop()
  t.equal(early.events.length, count)
  for (const w of late) t.same(seen(w.events), seen(early.events), 'the same events, in the same order')
  const versions = early.events.map(e => BigInt(e.object.metadata.resourceVersion))
  t.ok(
    versions.every((v, i) => i === 0 || v > versions[i - 1]),
    'in version order',
  )
})

t.test('a watch restarted from the last version it observed sees the rest, nothing twice and nothing missed', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  const listed = (await (await request(`${h.url}${path}?resourceVersion=0`, { headers: { 'user-agent': kubeProxy } })).body.json()) as any
  const whole = await watchFrom(h, listed.metadata.resourceVersion)
  const first = await watchFrom(h, listed.metadata.resourceVersion)
  const count = changes(h, 'restart')
  await eventually(() => whole.events.length >= count && first.events.length >= 3, 10_000, 'events')
  first.stop()
  const cut = first.events.slice(0, 3) // what the client had taken when its watch broke
  const resumed = await watchFrom(h, cut[2].object.metadata.resourceVersion)
  await eventually(() => cut.length + resumed.events.length >= count, 10_000, 'the rest')
  resumed.stop()
  whole.stop()
  t.same([...seen(cut), ...seen(resumed.events)], seen(whole.events), 'the broken watch and its restart together are the whole')
})
