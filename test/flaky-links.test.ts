// What an edge link does to watches: a blip too short to count as an outage, and a NAT that
// forgets a flow (half-open: nobody is told). In both, a client's watch must not sit on a dead
// stream: it ends, the client re-watches, and sees what changes next.
import t from 'tap'
import { request } from 'undici'
import { ApiServerSimulator } from './simulator/index.ts'
import { startHub } from '../lib/hub.ts'
import { eventually, hubConfig, quietLogger, startHarness } from './helpers/hub.ts'
import { startNat } from './helpers/nat.ts'
import { readWatch } from './helpers/watch.ts'

const kubeletUA = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const configMap = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default' }, data: { v: name } })

/** A watch opened through the hub as kubelet, read in the background. */
async function openWatch(url: string) {
  const res = await request(url, { headers: { 'user-agent': kubeletUA } })
  const reader = readWatch(res.body)
  const state = {
    status: res.statusCode,
    headers: res.headers,
    events: reader.events,
    get ended() {
      return !reader.isOpen()
    },
  }
  return { state, stop: () => res.body.destroy() }
}

t.test('a watch answered from the cache during a blip ends as soon as an apiserver answers again', async t => {
  // the hub never declares the cloud offline: the blip is shorter than failures × interval
  const { simulator, hub, close } = await startHarness({
    config: { healthFailures: 1_000_000, healthIntervalMs: 100 },
    start: { offlineBookmarkIntervalMs: 100 },
  })
  t.teardown(close)
  simulator.create(configMap('a'))
  const list = (await (await request(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps`, { headers: { 'user-agent': kubeletUA } })).body.json()) as any

  await simulator.setFault('refuse')
  const watch = await openWatch(
    `${hub.proxyUrl}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${list.metadata.resourceVersion}`,
  )
  t.teardown(watch.stop)
  t.equal(watch.state.status, 200)
  t.equal(watch.state.headers['x-outpost-cache'], 'hit', 'answered from the cache')
  await eventually(() => watch.state.events.filter(e => e.type === 'BOOKMARK').length >= 2, 10_000, 'BOOKMARKs on the cached watch')
  t.notOk(watch.state.ended, 'open while every apiserver refuses')
  t.equal(hub.health.state, 'online', 'and the hub still counts the cloud as up')

  await simulator.setFault('none')
  await eventually(() => watch.state.ended, 10_000, 'the cached watch to end once the apiserver answers')
  t.pass('ended: the client re-watches against the apiserver')
  const again = await openWatch(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${list.metadata.resourceVersion}`)
  t.teardown(again.stop)
  t.notOk(again.state.headers['x-outpost-cache'], 'the re-watch is the apiserver’s')
  simulator.create(configMap('b'))
  await eventually(() => again.state.events.some(e => e.type === 'ADDED' && e.object.metadata.name === 'b'), 10_000, 'the next change')
})

t.test('a watch whose link went half-open (a NAT forgot the flow) is ended, and the re-watch sees what changes', async t => {
  const simulator = await ApiServerSimulator.start({ bookmarkIntervalMs: 100 })
  const nat = await startNat(simulator.url)
  const hub = await startHub(hubConfig([nat.url], { watchSilenceTimeoutMs: 1_000 }), { logger: quietLogger() })
  t.teardown(async () => {
    await hub.close()
    await nat.close()
    await simulator.close()
  })
  simulator.create(configMap('a'))
  const list = (await (await request(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps`, { headers: { 'user-agent': kubeletUA } })).body.json()) as any
  // the client did not ask for BOOKMARKs: the hub asks for them itself, and keeps them to itself
  const watch = await openWatch(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${list.metadata.resourceVersion}`)
  t.teardown(watch.stop)
  simulator.create(configMap('b'))
  await eventually(() => watch.state.events.length === 1, 10_000, 'the first change')
  t.same(
    watch.state.events.map(e => e.type),
    ['ADDED'],
    'no BOOKMARK the client did not ask for',
  )

  nat.forget()
  await eventually(() => watch.state.ended, 15_000, 'the silent watch to be ended')
  t.equal(hub.health.state, 'online', 'new connections work: only the old flow was forgotten')
  const rv = watch.state.events[0].object.metadata.resourceVersion
  const again = await openWatch(`${hub.proxyUrl}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}`)
  t.teardown(again.stop)
  simulator.create(configMap('c'))
  await eventually(() => again.state.events.some(e => e.object.metadata.name === 'c'), 10_000, 'the change after the re-watch')
})
