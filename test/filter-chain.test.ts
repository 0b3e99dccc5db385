// The filter chain on what a real apiserver sent, whole and damaged: every filter on, for every
// component a filter is for. Well-formed bodies come out well-formed; a malformed list, object or
// watch frame (cut short, bytes flipped, bytes inserted) never throws out of the chain: it comes
// out as some bytes or as "dropped", and the response goes on.
import t from 'tap'
import { pino } from 'pino'
import { FilterRegistry, filterNames } from '../filters/registry.ts'
import type { ResponseFilter, TopologyProvider } from '../filters/registry.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { decodeUnknown } from '../lib/codec/protobuf.ts'
import { FilteredWatch } from '../lib/watch/refilter.ts'
import type { WireFormat } from '../lib/cache/types.ts'
import { fixtureBytes, recordedAnnotations, recordedContext, watchFrames } from './helpers/fixtures.ts'

function registry(): FilterRegistry {
  const context = recordedContext('kind-worker2')
  const annotations = recordedAnnotations()
  const provider: TopologyProvider = { known: true, nodePool: 'shanghai', context: () => context, annotationOf: (ns, name) => annotations.get(`${ns}/${name}`) }
  return new FilterRegistry(provider, { enabled: filterNames, components: {}, hub: { host: '169.254.2.1', port: 10268 } }, pino({ level: 'silent' }))
}

const chainFor = (r: FilterRegistry, path: string, component: string): ResponseFilter => {
  const chain = r.forRequest(classify('GET', path, `${component}/v1.24.0`))
  if (!chain) throw new Error(`no filter for ${component} ${path}`)
  return chain
}

/** A small deterministic generator: the same damage on every run. */
function random(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = Math.imul(s ^ (s >>> 15), 1 | s)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function* damaged(input: Buffer, count: number, seed: number): Generator<Buffer> {
  const next = random(seed)
  const at = () => Math.floor(next() * input.length)
  for (let i = 0; i < count; i++) {
    const copy = Buffer.from(input)
    switch (i % 3) {
      case 0:
        yield copy.subarray(0, at())
        break
      case 1:
        for (let n = 0; n < 1 + (i % 4); n++) copy[at()] = Math.floor(next() * 256)
        yield copy
        break
      default: {
        const p = at()
        yield Buffer.concat([copy.subarray(0, p), Buffer.from([Math.floor(next() * 256), Math.floor(next() * 256)]), copy.subarray(p)])
      }
    }
  }
}

const cases: { what: string; path: string; component: string; json: string; protobuf: string }[] = [
  { what: "kube-proxy's Services", path: '/api/v1/services', component: 'kube-proxy', json: 'list-services.json', protobuf: 'list-services.pb' },
  { what: "kubelet's Services", path: '/api/v1/services', component: 'kubelet', json: 'list-services.json', protobuf: 'list-services.pb' },
  { what: "kube-proxy's EndpointSlices", path: '/apis/discovery.k8s.io/v1/endpointslices', component: 'kube-proxy', json: 'list-endpointslices.json', protobuf: 'list-endpointslices.pb' },
  { what: "kubelet's Pods", path: '/api/v1/pods', component: 'kubelet', json: 'list-pods-kind-worker2.json', protobuf: 'list-pods-kind-worker2.pb' },
  { what: "kube-proxy's Endpoints", path: '/api/v1/namespaces/default/endpoints/svc-ud1', component: 'kube-proxy', json: 'get-endpoints-svc-ud1.json', protobuf: 'get-endpoints-svc-ud1.pb' },
]

function wellFormed(format: WireFormat, out: Buffer | null): boolean {
  if (out === null) return true
  try {
    if (format === 'json') JSON.parse(out.toString())
    else decodeUnknown(out)
    return true
  } catch {
    return false
  }
}

t.test('whole bodies: well-formed in, well-formed out', async t => {
  const r = registry()
  for (const c of cases) {
    const chain = chainFor(r, c.path, c.component)
    for (const [format, file] of [['json', c.json], ['protobuf', c.protobuf]] as const) {
      t.ok(wellFormed(format, chain.body(format, fixtureBytes(file))), `${c.what}, ${format}`)
    }
  }
  const described = r.describe()
  t.ok(described.every(f => f.enabled && f.failed === 0), 'every filter on, none failed on what the apiserver sent')
})

t.test('damaged bodies and frames never throw out of the chain', async t => {
  const r = registry()
  let tried = 0
  for (const [i, c] of cases.entries()) {
    const chain = chainFor(r, c.path, c.component)
    for (const [format, file] of [['json', c.json], ['protobuf', c.protobuf]] as const) {
      const problems: string[] = []
      for (const body of damaged(fixtureBytes(file), 300, 1000 + i)) {
        tried++
        try {
          const out = chain.body(format, body)
          if (out !== null && !Buffer.isBuffer(out)) problems.push('not bytes')
        } catch (error) {
          problems.push((error as Error).message)
        }
      }
      t.same(problems, [], `${c.what}, ${format}: 300 damaged bodies`)
    }
  }
  const slices = chainFor(r, '/apis/discovery.k8s.io/v1/endpointslices?watch=true', 'kube-proxy')
  const streams: [WireFormat, Buffer[]][] = [
    ['protobuf', watchFrames(fixtureBytes('watch-endpointslices.pb'))],
    ['json', fixtureBytes('watch-endpointslices.json').toString().split('\n').filter(Boolean).map(l => Buffer.from(l + '\n'))],
  ]
  for (const [format, frames] of streams) {
    const problems: string[] = []
    // the chain alone, and a tracked watch (the re-filter's bookkeeping) in front of it
    const tracked = new FilteredWatch(format, slices, () => {})
    for (const [i, frame] of frames.entries()) {
      for (const bad of damaged(frame, 100, 2000 + i)) {
        tried++
        try {
          slices.frame(format, bad)
          tracked.take(bad)
        } catch (error) {
          problems.push((error as Error).message)
        }
      }
    }
    t.same(problems, [], `${format} watch frames: ${frames.length * 100} damaged`)
  }
  t.ok(tried >= 4000, `${tried} damaged inputs`)
})

t.test("'*' in a filter's components means every component, as in --cache-components", async t => {
  const context = recordedContext('kind-worker2')
  const provider: TopologyProvider = { known: true, nodePool: 'shanghai', context: () => context, annotationOf: () => undefined }
  const r = new FilterRegistry(provider, { enabled: filterNames, components: { discardcloudservice: ['*'] } }, pino({ level: 'silent' }))
  t.same(r.forRequest(classify('GET', '/api/v1/services', 'my-agent/v1'))?.names, ['discardcloudservice'])
  t.equal(r.forRequest(classify('GET', '/api/v1/configmaps', 'my-agent/v1')), undefined, 'only for the resources it reads')
})
