// The filter chain on what a real apiserver sent, whole and damaged: every filter on, for every
// component a filter is for. Well-formed bodies come out well-formed; a malformed list, object or
// watch frame (cut short, bytes flipped, bytes inserted) never throws out of the chain: it comes
// out as some bytes or as "dropped", and the response goes on.
import t from 'tap'
import { pino } from 'pino'
import { FilterRegistry, filterNames } from '../filters/registry.ts'
import { createMetrics } from '../lib/observe/metrics.ts'
import type { ResponseFilter, TopologyProvider } from '../filters/registry.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { decodeUnknown } from '../lib/codec/protobuf.ts'
import { FilteredWatch } from '../lib/watch/refilter.ts'
import { FilterChain } from '../filters/chain.ts'
import type { Step } from '../filters/chain.ts'
import { filterEndpointsObject } from '../filters/servicetopology.ts'
import { fixtureBytes, recordedAnnotations, recordedContext, watchFrames } from './helpers/fixtures.ts'
import { seededRandom } from './helpers/random.ts'
import type { WireFormat } from '../lib/api/wire-format.ts'

function registry(hub: { host: string; port: number } | null = { host: '169.254.2.1', port: 10268 }): FilterRegistry {
  const context = recordedContext('kind-worker2')
  const annotations = recordedAnnotations()
  const provider: TopologyProvider = { known: true, nodePool: 'shanghai', context: () => context, annotationOf: (ns, name) => annotations.get(`${ns}/${name}`) }
  // an overlay naming a pod the recordings do not have: localendpoints runs on every slice and changes none
  const pods = new Map([
    [
      'default/not-recorded',
      { namespace: 'default', name: 'not-recorded', uid: 'u', ips: ['10.9.9.9'], ready: true, serving: true, gone: false, terminating: false },
    ],
  ])
  const local = { input: () => ({ nodeName: 'kind-worker2', pods }) }
  return new FilterRegistry(provider, { enabled: filterNames, components: {}, local, ...(hub ? { hub } : {}) }, pino({ level: 'silent' }))
}

const chainFor = (r: FilterRegistry, path: string, component: string): ResponseFilter => {
  const chain = r.forRequest(classify('GET', path, `${component}/v1.24.0`))
  if (!chain) throw new Error(`no filter for ${component} ${path}`)
  return chain
}

function* damaged(input: Buffer, count: number, seed: number): Generator<Buffer> {
  const next = seededRandom(seed) // the same damage on every run
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
  {
    what: "kube-proxy's EndpointSlices",
    path: '/apis/discovery.k8s.io/v1/endpointslices',
    component: 'kube-proxy',
    json: 'list-endpointslices.json',
    protobuf: 'list-endpointslices.pb',
  },
  { what: "kubelet's Pods", path: '/api/v1/pods', component: 'kubelet', json: 'list-pods-kind-worker2.json', protobuf: 'list-pods-kind-worker2.pb' },
  {
    what: "kube-proxy's Endpoints",
    path: '/api/v1/namespaces/default/endpoints/svc-ud1',
    component: 'kube-proxy',
    json: 'get-endpoints-svc-ud1.json',
    protobuf: 'get-endpoints-svc-ud1.pb',
  },
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
    for (const [format, file] of [
      ['json', c.json],
      ['protobuf', c.protobuf],
    ] as const) {
      t.ok(wellFormed(format, chain.body(format, fixtureBytes(file))), `${c.what}, ${format}`)
    }
  }
  const described = r.describe()
  t.ok(
    described.every(f => f.enabled && f.failed === 0),
    'every filter on, none failed on what the apiserver sent',
  )
})

t.test('damaged bodies and frames never throw out of the chain', async t => {
  const r = registry()
  let tried = 0
  for (const [i, c] of cases.entries()) {
    const chain = chainFor(r, c.path, c.component)
    for (const [format, file] of [
      ['json', c.json],
      ['protobuf', c.protobuf],
    ] as const) {
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
    [
      'json',
      fixtureBytes('watch-endpointslices.json')
        .toString()
        .split('\n')
        .filter(Boolean)
        .map(l => Buffer.from(l + '\n')),
    ],
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
  // what outpost_filter_failures_total reports: each object a filter could not read, by filter
  const metrics = createMetrics()
  metrics.observeFilters(() => r.tallies())
  const failed = r.describe().filter(f => f.failed > 0)
  t.ok(failed.length > 0, 'some damaged objects were more than a filter could read')
  const text = await metrics.registry.metrics()
  for (const f of failed) t.match(text, `outpost_filter_failures_total{filter="${f.name}"} ${f.failed}\n`, `${f.name}: ${f.failed} failures in the metrics`)
})

t.test("'*' in a filter's components means every component, as in --cache-components", async t => {
  const context = recordedContext('kind-worker2')
  const provider: TopologyProvider = { known: true, nodePool: 'shanghai', context: () => context, annotationOf: () => undefined }
  const r = new FilterRegistry(provider, { enabled: filterNames, components: { discardcloudservice: ['*'] } }, pino({ level: 'silent' }))
  t.same(r.forRequest(classify('GET', '/api/v1/services', 'my-agent/v1'))?.names, ['discardcloudservice'])
  t.equal(r.forRequest(classify('GET', '/api/v1/configmaps', 'my-agent/v1')), undefined, 'only for the resources it reads')
})

t.test('JSON bytes: steps that read bytes need no parse; the first that cannot parses once, and the result is serialized once', async t => {
  const calls: string[] = []
  const report = {
    ran: (s: string) => calls.push(`ran ${s}`),
    changed: (s: string, what: () => string) => calls.push(`changed ${s} ${what()}`),
    dropped: (s: string, what: () => string) => calls.push(`dropped ${s} ${what()}`),
    failed: (s: string, what: () => string) => calls.push(`failed ${s} ${what()}`),
  }
  const kinds = new Set(['Thing'])
  const tag = (name: string): Step => ({
    name,
    kinds,
    json: (o: any) => (calls.push(`json ${name}`), { ...o, tags: [...(o.tags ?? []), name] }),
    protobuf: raw => raw,
    drops: false,
  })
  const bytesStep: Step = {
    name: 'bytes',
    kinds,
    drops: false,
    json: () => {
      throw new Error('never: it reads bytes')
    },
    jsonBytes: raw => (calls.push('bytes'), Buffer.from(raw.toString().replace('"v":1', '"v":2'))),
    protobuf: raw => raw,
  }
  const declines: Step = { ...tag('declines'), jsonBytes: () => undefined }
  const chain = new FilterChain([bytesStep, declines, tag('after')], report)
  const object = Buffer.from('{"kind":"Thing","apiVersion":"v1","metadata":{"name":"a","namespace":"n"},"v":1}')
  const out = chain.object('json', 'v1', 'Thing', object)
  t.same(JSON.parse(String(out)), { kind: 'Thing', apiVersion: 'v1', metadata: { name: 'a', namespace: 'n' }, v: 2, tags: ['declines', 'after'] })
  t.same(
    calls,
    [
      'ran bytes',
      'bytes',
      'changed bytes Thing n/a',
      'ran declines',
      'json declines',
      'changed declines Thing n/a',
      'ran after',
      'json after',
      'changed after Thing n/a',
    ],
    'each step told once, in order',
  )

  calls.length = 0
  const onlyBytes = new FilterChain([bytesStep], report)
  const frame = Buffer.from(`{"type":"MODIFIED","object":${object}}\n`)
  t.equal(
    String(onlyBytes.frame('json', frame)),
    `{"type":"MODIFIED","object":${object.toString().replace('"v":1', '"v":2')}}\n`,
    "a frame's envelope is the apiserver's bytes",
  )
  const untouched = new FilterChain([{ ...bytesStep, jsonBytes: raw => raw }], report)
  t.equal(untouched.frame('json', frame), frame, 'unchanged: the same frame')
  t.equal(untouched.object('json', 'v1', 'Thing', object), object, 'unchanged: the same object')
  const bookmark = Buffer.from('{"type":"BOOKMARK","object":{"kind":"Thing","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}\n')
  t.equal(onlyBytes.frame('json', bookmark), bookmark, 'a BOOKMARK passes as it is')
  const failing = new FilterChain([{ ...bytesStep, jsonBytes: () => JSON.parse('{') }], report)
  calls.length = 0
  t.equal(failing.object('json', 'v1', 'Thing', object), object, 'a step that throws lets the object pass')
  t.same(calls, ['ran bytes', 'failed bytes Thing n/a'])
})

t.test("kube-proxy's JSON slices through the chain: the same endpoints as the decoded filter keeps", async t => {
  const context = recordedContext('kind-worker2')
  const annotations = recordedAnnotations()
  const input = { topology: context, annotationOf: (ns: string, name: string) => annotations.get(`${ns}/${name}`) }
  // (no hub address: forwardkubesvctraffic is off, service topology alone)
  const chain = chainFor(registry(null), '/apis/discovery.k8s.io/v1/endpointslices', 'kube-proxy')
  const list = fixtureBytes('list-endpointslices.json')
  const expected = JSON.parse(list.toString())
  expected.items = expected.items.map((i: unknown) => filterEndpointsObject(i, input, 'EndpointSlice').object)
  t.same(JSON.parse(String(chain.body('json', list))), expected, 'a list')
  const lines = fixtureBytes('watch-endpointslices.json').toString().split('\n').filter(Boolean)
  for (const line of lines) {
    const event = JSON.parse(line)
    const out = chain.frame('json', Buffer.from(line + '\n'))
    t.same(JSON.parse(String(out)), { ...event, object: filterEndpointsObject(event.object, input).object }, `${event.type} ${event.object.metadata.name}`)
  }
})

t.test("a filter of one object (masterservice for kubelet) changes that one and passes the others' bytes unread", async t => {
  const chain = chainFor(registry(), '/api/v1/services', 'kubelet')
  const list = fixtureBytes('list-services.json')
  const before = JSON.parse(list.toString()).items
  const after = JSON.parse(String(chain.body('json', list))).items
  t.equal(after.length, before.length)
  const changed = after
    .filter((s: any, i: number) => JSON.stringify(s) !== JSON.stringify(before[i]))
    .map((s: any) => `${s.metadata.namespace}/${s.metadata.name}`)
  t.same(changed, ['default/kubernetes'])
  t.equal(after.find((s: any) => s.metadata.name === 'kubernetes').spec.clusterIP, '169.254.2.1')
  const other = Buffer.from(JSON.stringify(before.find((s: any) => s.metadata.name !== 'kubernetes')))
  t.equal(chain.object('json', 'v1', 'Service', other), other, 'another Service: the same Buffer')
  const escaped = Buffer.from(
    JSON.stringify(before.find((s: any) => s.metadata.name === 'kubernetes')).replace('"name":"kubernetes"', '"n\\u0061me":"kubernetes"'),
  )
  t.equal(JSON.parse(String(chain.object('json', 'v1', 'Service', escaped))).spec.clusterIP, '169.254.2.1', 'its name written with an escape: still the one')
})
