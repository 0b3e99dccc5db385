// Live re-filtering on the recorded protobuf watch stream (the simulator speaks JSON only).
import t from 'tap'
import { fixtureBytes, recordedAnnotations, recordedContext, watchFrames } from './helpers/fixtures.ts'
import { pino } from 'pino'
import { FilterRegistry } from '../filters/registry.ts'
import type { TopologyProvider } from '../filters/registry.ts'
import { filterProtobufWatchFrame } from '../filters/servicetopology-protobuf.ts'
import { FilteredWatch } from '../lib/refilter.ts'
import { classify } from '../lib/requestinfo.ts'
import { decodeUnknown, decodeWatchEvent, objectMeta } from '../lib/codec/protobuf.ts'

const fixture = fixtureBytes

const frames = watchFrames

t.test('protobuf frames: filtered once, tracked, and re-filtered when an annotation changes', async t => {
  const context = recordedContext('kind-worker2')
  const annotations = recordedAnnotations()
  const provider: TopologyProvider = {
    known: true,
    context: () => context,
    annotationOf: (ns, name) => annotations.get(`${ns}/${name}`),
  }
  const registry = new FilterRegistry(provider, ['kube-proxy'], pino({ level: 'silent' }))
  const filter = registry.forRequest(classify('GET', '/apis/discovery.k8s.io/v1/endpointslices?watch=true', 'kube-proxy/v1.24.0'))!
  const injected: Buffer[] = []
  const watch = new FilteredWatch('protobuf', filter, frame => injected.push(frame))

  const input = frames(fixture('watch-endpointslices.pb'))
  for (const frame of input) {
    const out = watch.onFrame(frame)
    t.same(out, filterProtobufWatchFrame(frame, { topology: provider.context(), annotationOf: provider.annotationOf }).frame, 'the same bytes as the wire filter')
  }

  annotations.set('default/svc-ud1', 'kubernetes.io/hostname')
  registry.invalidate()
  t.equal(watch.refilter('99999'), 1, 'one object filters differently now')
  const event = decodeWatchEvent(injected[0])
  t.equal(event.type, 'MODIFIED')
  const unknown = decodeUnknown(event.object)
  const meta = objectMeta(Buffer.from(unknown.raw))
  t.equal(meta.name, 'svc-ud1-abcde')
  t.equal(meta.resourceVersion, '99999', 'carries the version of the change')
  t.equal(watch.refilter('99999'), 0, 'nothing more to send')
})
