// Live re-filtering: on the recorded protobuf stream, and through the watch pipeline, where a
// re-filter must never overtake a newer frame nor carry a version the stream has not reached.
import t from 'tap'
import http from 'node:http'
import { once } from 'node:events'
import { PassThrough } from 'node:stream'
import { request } from 'undici'
import { fixtureBytes, fixtureJson, recordedAnnotations, recordedContext, watchFrames } from './helpers/fixtures.ts'
import { pino } from 'pino'
import { FilterRegistry } from '../filters/registry.ts'
import type { TopologyProvider } from '../filters/registry.ts'
import { FilteredWatch } from '../lib/watch/refilter.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { decodeUnknown, decodeWatchEvent, objectMeta } from '../lib/codec/protobuf.ts'
import { streamWatch } from '../lib/watch/pipeline.ts'
import { responseSink } from '../lib/front/respond.ts'
import { WatchFrameSplitter } from '../lib/api/frames.ts'
import type { CachedObject } from '../lib/cache/types.ts'
import type { Frame } from '../lib/watch/frame-sink.ts'

/** a frame as the client gets it */
const whole = (frame: Frame): Buffer => (Buffer.isBuffer(frame) ? frame : Buffer.concat(frame))

function topology() {
  const context = recordedContext('kind-worker2')
  const annotations = recordedAnnotations()
  const provider: TopologyProvider = { known: true, nodePool: '', context: () => context, annotationOf: (ns, name) => annotations.get(`${ns}/${name}`) }
  const registry = new FilterRegistry(provider, { enabled: ['servicetopology'], components: { servicetopology: ['kube-proxy'] } }, pino({ level: 'silent' }))
  const change = (service: string, value: string) => {
    annotations.set(service, value)
    registry.invalidate()
  }
  return { registry, change }
}

const sliceWatch = (query = '') => classify('GET', `/apis/discovery.k8s.io/v1/endpointslices?watch=true${query}`, 'kube-proxy/v1.24.0')

t.test('protobuf frames: filtered once, tracked, and re-filtered when an annotation changes', async t => {
  const { registry, change } = topology()
  const filter = registry.forRequest(sliceWatch())!
  const queue: (() => Frame[])[] = []
  const watch = new FilteredWatch('protobuf', filter, produce => queue.push(produce))

  const input = watchFrames(fixtureBytes('watch-endpointslices.pb'))
  let newest = 0
  for (const frame of input) {
    const out = watch.take(frame)
    t.same(out, [filter.frame('protobuf', frame)], 'the same bytes as the chain alone')
    newest = Math.max(newest, Number(objectMeta(Buffer.from(decodeUnknown(decodeWatchEvent(frame).object).raw)).resourceVersion))
  }

  watch.settle() // as the hub does on the topology's 'beforechange'
  change('default/svc-ud1', 'kubernetes.io/hostname')
  watch.refilter()
  watch.refilter()
  t.equal(queue.length, 1, 'two changes before its turn share one re-filter')
  const injected = queue.shift()!()
  t.equal(injected.length, 1, 'one object filters differently now')
  const event = decodeWatchEvent(whole(injected[0]))
  t.equal(event.type, 'MODIFIED')
  const meta = objectMeta(Buffer.from(decodeUnknown(event.object).raw))
  t.equal(meta.name, 'svc-ud1-abcde')
  t.equal(meta.resourceVersion, String(newest), "it carries the stream's newest version, never one the stream has not reached")
  watch.refilter()
  t.same(queue.shift()!(), [], 'nothing more to send')
  watch.close()
})

t.test('an object that is the newest thing in its stream waits for the stream to move on', async t => {
  const { registry, change } = topology()
  const filter = registry.forRequest(sliceWatch())!
  const queue: (() => Frame[])[] = []
  const list = fixtureJson('list-endpointslices.json')
  const watch = new FilteredWatch('json', filter, produce => queue.push(produce), { startResourceVersion: '200', deferMs: 60_000 })
  const slice = list.items.find((s: any) => s.metadata.name === 'svc-ud1-abcde')
  const seed: CachedObject = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    namespace: 'default',
    name: slice.metadata.name,
    resourceVersion: '200',
    format: 'json',
    body: Buffer.from(JSON.stringify({ kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...slice })),
  }
  watch.seed([seed])
  watch.settle() // as the hub does on the topology's 'beforechange'
  change('default/svc-ud1', 'kubernetes.io/hostname')
  watch.refilter()
  t.same(queue.shift()!(), [], 'version 200 is the newest the stream has delivered: the event waits')
  const bookmark = Buffer.from(
    JSON.stringify({ type: 'BOOKMARK', object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: { resourceVersion: '230' } } }) + '\n',
  )
  const out = watch.take(bookmark)
  t.equal(out.length, 2, 'the BOOKMARK, then the waiting event')
  const event = JSON.parse(whole(out[1]).toString())
  t.equal(event.type, 'MODIFIED')
  t.equal(event.object.metadata.resourceVersion, '230', 'at the version the stream has now reached')
  t.same(
    event.object.endpoints.map((e: any) => e.nodeName),
    ['kind-worker2'],
  )
  watch.close()
})

t.test('through the pipeline, a re-filter waiting behind a slow frame uses that frame’s body', async t => {
  const { registry, change } = topology()
  const filter = registry.forRequest(sliceWatch('&resourceVersion=206'))!
  const list = fixtureJson('list-endpointslices.json')
  const original = list.items.find((s: any) => s.metadata.name === 'svc-ud1-abcde')
  const seed: CachedObject = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    namespace: 'default',
    name: 'svc-ud1-abcde',
    resourceVersion: original.metadata.resourceVersion,
    format: 'json',
    body: Buffer.from(JSON.stringify({ kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...original })),
  }
  // the newer body: kind-worker2's endpoint gone, one added on kind-worker3 (same pool)
  const newer = structuredClone({ kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...original })
  newer.metadata.resourceVersion = '210'
  newer.endpoints = original.endpoints
    .filter((e: any) => e.nodeName !== 'kind-worker2')
    .concat([{ addresses: ['10.244.3.9'], conditions: { ready: true }, nodeName: 'kind-worker3' }])

  const upstream = new PassThrough()
  let releaseDisk!: () => void
  const disk = new Promise<void>(resolve => (releaseDisk = resolve))
  let frameWaiting!: () => void
  const waiting = new Promise<void>(resolve => (frameWaiting = resolve))
  // what happened, in order: the race is only a race if the re-filter is queued while the frame waits
  const steps: string[] = []
  let watch!: FilteredWatch
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.flushHeaders() // the head is the caller's: streamWatch writes frames only
    void streamWatch(upstream, new WatchFrameSplitter('json'), responseSink(res), {
      prepare: () => {
        steps.push('frame waits for the disk')
        frameWaiting()
        return disk // the frame's fsync is slow
      },
      take: frame => {
        steps.push('frame taken')
        return watch.take(frame)
      },
      onInject: inject => {
        const traced = (produce: () => Frame[]) => {
          steps.push('re-filter queued')
          inject(() => {
            steps.push('re-filter run')
            return produce()
          })
        }
        watch = new FilteredWatch('json', filter, traced, { startResourceVersion: '206' })
        watch.seed([seed])
      },
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const res = await request(`http://127.0.0.1:${(server.address() as { port: number }).port}/`)
  upstream.write(JSON.stringify({ type: 'MODIFIED', object: newer }) + '\n')
  await waiting
  // the topology changes while the newer frame waits for the disk
  watch.settle()
  change('default/svc-ud1', 'openyurt.io/nodepool,*')
  watch.settle()
  change('default/svc-ud1', 'kubernetes.io/hostname,openyurt.io/nodepool')
  watch.refilter()
  releaseDisk()
  upstream.end()
  const events = (await res.body.text())
    .trim()
    .split('\n')
    .map(l => JSON.parse(l))
  watch.close()
  t.same(
    steps,
    ['frame waits for the disk', 're-filter queued', 'frame taken', 're-filter run'],
    'the re-filter was queued behind the waiting frame, and ran after it',
  )
  const addresses = (e: any) => e.object.endpoints.map((p: any) => p.addresses[0]).sort()
  // kind-worker2 has no endpoint in the newer body: hostname finds none, the pool keeps kind-worker3's
  t.same(
    events.map(e => [e.type, e.object.metadata.name, e.object.metadata.resourceVersion, addresses(e)]),
    [['MODIFIED', 'svc-ud1-abcde', '210', ['10.244.3.2', '10.244.3.9']]],
    "one event: the newer body's endpoints, filtered as now, at the version the stream delivered; the re-filter, from that body, has nothing to add",
  )
})

t.test('a seed is filtered when it is first needed, as it read before the change that settle() precedes', async t => {
  const { registry, change } = topology()
  const filter = registry.forRequest(sliceWatch())!
  const ran = () => registry.tallies().find(r => r.name === 'servicetopology')!.ran
  const list = fixtureJson('list-endpointslices.json')
  const seeds: CachedObject[] = list.items.map((slice: any) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    namespace: slice.metadata.namespace,
    name: slice.metadata.name,
    resourceVersion: '200',
    format: 'json',
    body: Buffer.from(JSON.stringify({ kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...slice })),
  }))
  t.ok(seeds.length > 1)
  const queue: (() => Frame[])[] = []
  const watch = new FilteredWatch('json', filter, produce => queue.push(produce), { startResourceVersion: '200', deferMs: 60_000 })
  const before = ran()
  watch.seed(seeds)
  t.equal(ran(), before, 'seeding filters nothing')
  watch.settle()
  t.equal(ran(), before + seeds.length, 'settle() filters every seeded object once')
  watch.settle()
  t.equal(ran(), before + seeds.length, 'and only once')

  // a second watch, not settled before the change: it cannot know what its client was shown, and
  // takes the new form for it (this is why the hub settles every watch on 'beforechange')
  const unsettled = new FilteredWatch('json', filter, produce => queue.push(produce), { startResourceVersion: '200', deferMs: 60_000 })
  unsettled.seed(seeds)
  change('default/svc-ud1', 'kubernetes.io/hostname')
  watch.refilter()
  unsettled.refilter()
  const bookmark = Buffer.from(
    JSON.stringify({ type: 'BOOKMARK', object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: { resourceVersion: '230' } } }) + '\n',
  )
  t.same(queue.shift()!(), [], 'the settled watch waits for the stream to move on')
  t.same(queue.shift()!(), [])
  const settledOut = watch
    .take(bookmark)
    .slice(1)
    .map(f => JSON.parse(whole(f).toString()))
  t.same(
    settledOut.map(e => [e.type, e.object.metadata.name]),
    [['MODIFIED', 'svc-ud1-abcde']],
    'the settled watch tells its client of the one slice the change filters differently',
  )
  t.same(unsettled.take(bookmark).slice(1), [], 'the unsettled one has nothing to tell')
})

t.test('what an event was shown is not kept, and is worked out again as it read before the context changes', async t => {
  let context = recordedContext('kind-worker2')
  const annotations = recordedAnnotations()
  const provider: TopologyProvider = { known: true, nodePool: '', context: () => context, annotationOf: (ns, name) => annotations.get(`${ns}/${name}`) }
  const registry = new FilterRegistry(provider, { enabled: ['servicetopology'], components: { servicetopology: ['kube-proxy'] } }, pino({ level: 'silent' }))
  const filter = registry.forRequest(sliceWatch())!
  const ran = () => registry.tallies().find(r => r.name === 'servicetopology')!.ran
  const original = fixtureJson('list-endpointslices.json').items.find((s: any) => s.metadata.name === 'svc-ud1-abcde')
  t.equal(annotations.get('default/svc-ud1'), 'openyurt.io/nodepool', 'the slice is filtered to its pool')
  const frame = (rv: string) =>
    Buffer.from(
      JSON.stringify({
        type: 'MODIFIED',
        object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...original, metadata: { ...original.metadata, resourceVersion: rv } },
      }) + '\n',
    )
  const addresses = (out: Frame) =>
    JSON.parse(whole(out).toString())
      .object.endpoints.map((e: any) => e.addresses[0])
      .sort()
  const queue: (() => Frame[])[] = []
  const watch = new FilteredWatch('json', filter, produce => queue.push(produce), { startResourceVersion: '200', deferMs: 60_000 })

  const [first] = watch.take(frame('210'))
  t.same(addresses(first), ['10.244.1.3', '10.244.3.2'], 'shanghai: kind-worker2 and kind-worker3')
  const afterEvent = ran()
  watch.settle() // 'beforechange': kind-worker is about to join the pool
  t.equal(ran(), afterEvent + 1, 'the filtered form was not kept: settle() works it out again')
  context = recordedContext('kind-worker2', { 'kind-worker': { 'apps.openyurt.io/nodepool': 'shanghai' } })
  // an event between the change and the filters' taking of the new context is shown as before
  const [between] = watch.take(frame('220'))
  t.same(addresses(between), ['10.244.1.3', '10.244.3.2'], 'the filters still read the context they took')
  // 'change', as the hub wires it: settle, then the filters read the new context, then the re-filter
  watch.settle()
  registry.invalidate()
  watch.refilter()
  t.same(queue.shift()!(), [], 'version 220 is the newest the stream has delivered: the event waits')
  const bookmark = Buffer.from(
    JSON.stringify({ type: 'BOOKMARK', object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: { resourceVersion: '230' } } }) + '\n',
  )
  const out = watch.take(bookmark)
  t.equal(out.length, 2, 'the BOOKMARK, then the re-filtered slice')
  t.same(addresses(out[1]), ['10.244.1.3', '10.244.2.2', '10.244.2.3', '10.244.3.2'], "the client gets kind-worker's endpoints too")
  watch.close()
})

t.test('a seeded object a filter may drop: the client is taken to have it only if the filters keep it', async t => {
  const provider: TopologyProvider = { known: true, nodePool: '', context: () => recordedContext('kind-worker2'), annotationOf: () => undefined }
  const registry = new FilterRegistry(
    provider,
    { enabled: ['discardcloudservice', 'servicetopology'], components: { discardcloudservice: ['kube-proxy'], servicetopology: ['kube-proxy'] } },
    pino({ level: 'silent' }),
  )
  const filter = registry.forRequest(classify('GET', '/api/v1/services?watch=true', 'kube-proxy/v1.24.0'))!
  t.equal(filter.mayDrop('Service'), true, 'discardcloudservice drops Services')
  t.equal(registry.forRequest(sliceWatch())!.mayDrop('EndpointSlice'), false, 'service topology never drops a slice')
  const service = (name: string, discard: boolean, rv: string) => ({
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace: 'default', resourceVersion: rv, ...(discard ? { annotations: { 'svc.openyurt.io/discard': 'true' } } : {}) },
    spec: { type: 'LoadBalancer', ports: [{ port: 80 }] },
  })
  const cached = (object: any): CachedObject => ({
    apiVersion: 'v1',
    kind: 'Service',
    namespace: 'default',
    name: object.metadata.name,
    resourceVersion: object.metadata.resourceVersion,
    format: 'json',
    body: Buffer.from(JSON.stringify(object)),
  })
  const watch = new FilteredWatch('json', filter, () => {}, { startResourceVersion: '10' })
  watch.seed([cached(service('cloud', true, '5')), cached(service('edge', false, '6'))])
  const event = (type: string, object: any) => watch.take(Buffer.from(JSON.stringify({ type, object }) + '\n')).map(f => JSON.parse(whole(f).toString()))
  t.same(
    event('MODIFIED', service('cloud', false, '11')).map(e => e.type),
    ['ADDED'],
    'the client never had the cloud-only Service: now it is kept, it is news',
  )
  t.same(
    event('MODIFIED', service('edge', true, '12')).map(e => [e.type, e.object.metadata.resourceVersion]),
    [['DELETED', '12']],
    'the client had the edge one: now dropped, it is told it is gone',
  )
})

t.test('a watch of a watch cache keeps the cache’s objects, not copies', async t => {
  // what that saves (memory kept per watch of 10,000 slices) is the bench's: attack.watches.*.per-watch
  const objects: CachedObject[] = Array.from({ length: 10_000 }, (_, i) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    namespace: `app-${i % 10}`,
    name: `svc-${i}-${i.toString(36)}`,
    resourceVersion: String(1_000 + i),
    format: 'json',
    body: Buffer.from(`{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"svc-${i}"},"endpoints":[]}`),
  }))
  const { registry } = topology()
  const filter = registry.forRequest(sliceWatch())!
  t.ok(filter, 'kube-proxy’s slices are filtered')
  for (const how of ['listed first (seeded)', 'sent as ADDED events'] as const) {
    const watches = Array.from({ length: 20 }, () => {
      const watch = new FilteredWatch('json', filter, () => {})
      if (how === 'listed first (seeded)') watch.seed(objects)
      else for (const object of objects) watch.takeObject('ADDED', object, 20_000n)
      return watch
    })
    // each watch's entry for an object is the cache's object itself: no copy of it, of its body, or of a filtered form
    const kept = watches.map(watch => [...((watch as any).objects as Map<string, unknown>).values()])
    t.same(
      kept.map(entries => entries.length),
      watches.map(() => objects.length),
      `${how}: each watch knows every object`,
    )
    const copies = kept.reduce((n, entries) => n + entries.filter((entry, i) => entry !== objects[i]).length, 0)
    t.equal(copies, 0, `${how}: every one it keeps is the cache’s own`)
    for (const watch of watches) watch.close()
  }
})

t.test('clients of the same filters share what they made of an object until something they read changes', async t => {
  const { registry, change } = topology()
  const objects = watchFrames(fixtureBytes('watch-endpointslices.pb')).map(frame => decodeUnknown(decodeWatchEvent(frame).object))
  const [first, second] = [registry.forRequest(sliceWatch())!, registry.forRequest(sliceWatch())!]
  const ran = () => registry.tallies().find(r => r.name === 'servicetopology')!.ran
  let changed = 0
  for (const o of objects) {
    const raw = Buffer.from(o.raw)
    const mine = first.object('protobuf', o.apiVersion, o.kind, raw)
    const before = ran()
    const theirs = second.object('protobuf', o.apiVersion, o.kind, raw)
    t.equal(theirs, mine, 'the same Buffer, not a copy')
    t.equal(ran(), before + 1, 'still counted for each client')
    if (mine !== raw) changed++
  }
  t.ok(changed > 0, `${changed} of ${objects.length} objects changed by the filter, shared`)
  const raw = Buffer.from(objects.find(o => objectMeta(Buffer.from(o.raw)).name === 'svc-ud1-abcde')!.raw)
  const shown = first.object('protobuf', 'discovery.k8s.io/v1', 'EndpointSlice', raw)
  t.equal(second.object('protobuf', 'discovery.k8s.io/v1', 'EndpointSlice', raw), shown)
  change('default/svc-ud1', 'kubernetes.io/hostname')
  const now = second.object('protobuf', 'discovery.k8s.io/v1', 'EndpointSlice', raw)
  t.not(now, shown, 'filtered again once what the filters read changed')
  t.notOk(now?.equals(shown!), 'and filtered differently')
})
