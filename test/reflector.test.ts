// The reflector the watch caches and the topology context share: it backs off like client-go's
// against an apiserver that answers garbage, says which resource failed, and reads only metadata when asked;
// its watches' timeouts are drawn as client-go's, and a seeded sink's first list asks for no older state.
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import { once } from 'node:events'
import { Backoff } from '../lib/upstream/backoff.ts'
import { Reflector, watchTimeoutSeconds } from '../lib/watch/reflector.ts'
import { metadataAccept } from '../lib/topology/source.ts'
import type { CachedObject } from '../lib/cache/types.ts'
import { Upstream } from '../lib/upstream/upstream.ts'
import { LiveStreams } from '../lib/watch/streams.ts'
import { ApiServerSimulator } from './simulator/index.ts'
import { capturingLogger, eventually } from './helpers/hub.ts'

t.test("backoff: client-go's shape, exponential from 800 ms, capped at 30 s, jittered, reset after quiet", async t => {
  let now = 0
  const steady = new Backoff({ random: () => 0, now: () => now })
  const waits = Array.from({ length: 8 }, () => steady.next())
  t.same(waits, [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000])
  const jittered = new Backoff({ random: () => 0.5, now: () => now })
  t.same([jittered.next(), jittered.next()], [1200, 2400], 'up to twice the wait, so a fleet does not retry in step')
  now += 121_000
  t.equal(steady.next(), 800, 'two minutes without a failure: from the start again')
})

t.test('a reflector against an apiserver that answers garbage waits longer each time and names its resource', async t => {
  const seen: number[] = []
  const server = http.createServer((req, res) => {
    seen.push(performance.now())
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"kind":"NodeList","items":[{"no":"metadata"}]}')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const upstream = new Upstream({ servers: [new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}`)], credentials: {} })
  const waits: number[] = []
  const backoff = new Backoff({ initialMs: 20, maxMs: 400, random: () => 0 })
  const next = backoff.next.bind(backoff)
  backoff.next = () => {
    const wait = next()
    waits.push(wait)
    return wait
  }
  const { logger, text } = capturingLogger()
  const items: CachedObject[][] = []
  const reflector = new Reflector(
    '/api/v1/nodes',
    'nodes',
    { replace: list => void items.push(list), event: () => {}, progress: () => {} },
    { upstream, streams: new LiveStreams(), isOnline: () => true, log: logger, backoff, accept: metadataAccept },
  )
  void reflector.run()
  t.teardown(async () => {
    reflector.halt()
    server.close()
    await upstream.close()
  })
  await eventually(() => seen.length >= 6, 10_000, 'six attempts')
  t.same(waits.slice(0, 5), [20, 40, 80, 160, 320], 'each wait twice the last')
  for (let i = 1; i < 6; i++)
    t.ok(seen[i] - seen[i - 1] >= waits[i - 1] - 5, `attempt ${i + 1} came after its wait (${Math.round(seen[i] - seen[i - 1])} ms ≥ ${waits[i - 1]} ms)`)
  t.same(items, [], 'nothing taken from a list it could not read')
  t.match(text(), /"resource":"nodes"/)
  t.match(text(), /list nodes: .*without metadata\.name/, 'the error names the resource it read')
  t.notMatch(text(), /EndpointSlice/)
})

t.test('the reflector asks for metadata only and follows the stream', async t => {
  const simulator = await ApiServerSimulator.start({ bookmarkIntervalMs: 50 })
  simulator.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', labels: { a: '1' } }, status: { capacity: { cpu: '4' } } })
  const upstream = new Upstream({ servers: [new URL(simulator.url)], credentials: {} })
  const state = new Map<string, Record<string, string>>()
  let reached = ''
  const labels = (n: CachedObject) => (JSON.parse(n.body.toString()) as any).metadata.labels ?? {}
  const reflector = new Reflector(
    '/api/v1/nodes',
    'nodes',
    {
      replace: list => list.forEach(n => state.set(n.name, labels(n))),
      event: (type, n) => void (type === 'DELETED' ? state.delete(n.name) : state.set(n.name, labels(n))),
      progress: rv => (reached = rv),
    },
    {
      upstream,
      streams: new LiveStreams(),
      isOnline: () => true,
      log: capturingLogger().logger,
      accept: {
        list: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
        watch: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      },
    },
  )
  void reflector.run()
  t.teardown(async () => {
    reflector.halt()
    await upstream.close()
    await simulator.close()
  })
  await eventually(() => state.has('n1'), 10_000, 'the list')
  simulator.patch('v1', 'Node', '', 'n1', { metadata: { labels: { a: '2' } } })
  await eventually(() => state.get('n1')?.a === '2', 10_000, 'the label change')
  const accepts = simulator.requests.filter(r => r.url.startsWith('/api/v1/nodes')).map(r => r.headers.accept)
  t.ok(accepts.length >= 2 && accepts.every(a => /as=PartialObjectMetadata/.test(String(a))), 'every request asks for metadata only')
  await eventually(() => Number(reached) >= Number(simulator.currentResourceVersion()), 10_000, 'BOOKMARKs to carry the stream forward')
})

t.test("the upstream watch's timeout is drawn as client-go draws it: in [5 min, 10 min)", async t => {
  const cases: [random: number, seconds: number][] = [
    [0, 300],
    [0.25, 375],
    [0.5, 450],
    [0.999999, 599],
    [1, 599],
  ]
  for (const [random, seconds] of cases) t.equal(watchTimeoutSeconds(random), seconds, `random ${random}: ${seconds} s`)

  const simulator = await ApiServerSimulator.start({ bookmarkIntervalMs: 50 })
  const upstream = new Upstream({ servers: [new URL(simulator.url)], credentials: {} })
  const reflector = new Reflector(
    '/api/v1/nodes',
    'nodes',
    { replace: () => {}, event: () => {}, progress: () => {} },
    { upstream, streams: new LiveStreams(), isOnline: () => true, log: capturingLogger().logger, accept: metadataAccept, random: () => 0.25 },
  )
  void reflector.run()
  t.teardown(async () => {
    reflector.halt()
    await upstream.close()
    await simulator.close()
  })
  const watch = await eventually(() => simulator.requests.find(r => r.url.includes('watch=true')), 10_000, 'the watch')
  t.match(watch!.url, /[?&]timeoutSeconds=375(&|$)/, 'the watch asks for the drawn timeout')
})

/** A reflector of nodes whose sink says it was seeded at `seeded`, recording the lists it takes. */
async function seededReflector(t: Test, seeded: string) {
  const simulator = await ApiServerSimulator.start({ bookmarkIntervalMs: 50 })
  for (const name of ['n1', 'n2', 'n3']) simulator.create({ apiVersion: 'v1', kind: 'Node', metadata: { name } })
  const upstream = new Upstream({ servers: [new URL(simulator.url)], credentials: {} })
  const lists: { names: string[]; resourceVersion: string }[] = []
  let seededAt: string | undefined = seeded
  const reflector = new Reflector(
    '/api/v1/nodes',
    'nodes',
    {
      replace: (items, resourceVersion) => {
        seededAt = undefined
        lists.push({ names: items.map(i => i.name), resourceVersion })
      },
      event: () => {},
      progress: () => {},
      seeded: () => seededAt,
    },
    { upstream, streams: new LiveStreams(), isOnline: () => true, log: capturingLogger().logger, accept: metadataAccept },
  )
  t.teardown(async () => {
    reflector.halt()
    await upstream.close()
    await simulator.close()
  })
  const listUrls = () => simulator.requests.filter(r => r.url.startsWith('/api/v1/nodes') && !r.url.includes('watch=true')).map(r => r.url)
  return { simulator, reflector, lists, listUrls }
}

t.test('a cache seeded from disk lists first for a state not older than its seed', async t => {
  const { simulator, reflector, lists, listUrls } = await seededReflector(t, '')
  const seed = simulator.currentResourceVersion()
  const seeded = await seededReflector(t, seed)
  void seeded.reflector.run()
  await eventually(() => seeded.lists.length > 0, 10_000, 'the list')
  t.match(seeded.listUrls()[0], new RegExp(`[?&]resourceVersion=${seed}&resourceVersionMatch=NotOlderThan`), 'the first list asks for no older than the seed')
  t.ok(BigInt(seeded.lists[0].resourceVersion) >= BigInt(seed), 'and takes a state not older')
  t.equal(seeded.listUrls().length, 1, 'one list')
  // unseeded, as before: any state, the cheapest
  void reflector.run()
  await eventually(() => lists.length > 0, 10_000, 'the unseeded list')
  t.match(listUrls()[0], /[?&]resourceVersion=0(&|$)/)
})

t.test('a seed the apiserver cannot give (504 Too large resource version): the present is listed, at once', async t => {
  const { simulator, reflector, lists, listUrls } = await seededReflector(t, '1000000')
  void reflector.run()
  await eventually(() => lists.length > 0, 10_000, 'the list of the present')
  const urls = listUrls()
  t.match(urls[0], /[?&]resourceVersion=1000000&resourceVersionMatch=NotOlderThan/, 'asked for the seed first')
  t.notMatch(urls[1], /resourceVersion=/, 'then for the present, with no version')
  t.same(lists[0].names.sort(), ['n1', 'n2', 'n3'])
  t.equal(lists[0].resourceVersion, simulator.currentResourceVersion(), 'the sink is given the present: older than its seed, a new history to it')
})
