// A JSON watch event is read in one pass (watchEventRanges): decodeEvent must still say what
// JSON.parse of the frame says, on the real apiserver's frames and on shapes it never writes.
import t from 'tap'
import { decodeEvent } from '../lib/cache/decode.ts'
import { JsonScanError } from '../lib/codec/json-scan.ts'
import { fixtureBytes } from './helpers/fixtures.ts'

const recordedFrames = (name: string): Buffer[] =>
  fixtureBytes(name)
    .toString()
    .split('\n')
    .filter(line => line !== '')
    .map(line => Buffer.from(line + '\n'))

/** What decodeEvent should find, read with JSON.parse. */
function expected(frame: Buffer) {
  const event = JSON.parse(frame.toString())
  const meta = event.object?.metadata ?? {}
  return {
    type: event.type,
    name: meta.name,
    namespace: meta.namespace ?? '',
    resourceVersion: meta.resourceVersion ?? '',
    kind: event.object?.kind,
    body: JSON.stringify(event.object),
  }
}

t.test('the recorded watch frames decode as JSON.parse reads them', async t => {
  const frames = recordedFrames('watch-endpointslices.json')
  t.ok(frames.length > 0)
  for (const frame of frames) {
    const want = expected(frame)
    const got = decodeEvent('json', frame)
    t.equal(got.type, want.type)
    if (want.type === 'BOOKMARK') {
      t.equal(got.resourceVersion, want.resourceVersion)
      continue
    }
    t.equal(got.object?.name, want.name)
    t.equal(got.object?.namespace, want.namespace)
    t.equal(got.object?.resourceVersion, want.resourceVersion)
    t.equal(got.object?.kind, want.kind)
    t.equal(JSON.stringify(JSON.parse(got.object!.body.toString())), want.body, 'the body is the object, byte for byte up to whitespace')
  }
})

t.test('an ERROR event is its type alone', async t => {
  const [frame] = recordedFrames('watch-expired.json')
  t.same(decodeEvent('json', frame), { type: 'ERROR' })
})

t.test('shapes no apiserver writes are read as JSON.parse would', async t => {
  const object = '{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"7"},"data":{"k":"}{\\"]"}}'
  const cases: [string, string][] = [
    ['object before type', `{"object":${object},"type":"MODIFIED"}`],
    ['an escaped type', `{"type":"MODI\\u0046IED","object":${object}}`],
    ['whitespace between the members', `{ "type" : "MODIFIED" ,\n "object" : ${object} }`],
    ['a repeated object: the last counts', `{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"old"}},"object":${object}}`],
    ['a repeated metadata: the last counts', `{"type":"MODIFIED","object":{"metadata":{"name":"old"},${object.slice(1)}}`],
  ]
  for (const [what, text] of cases) {
    const got = decodeEvent('json', Buffer.from(text))
    t.equal(got.type, 'MODIFIED', what)
    t.equal(got.object?.name, 'a', what)
    t.equal(got.object?.resourceVersion, '7', what)
    t.same(JSON.parse(got.object!.body.toString()), JSON.parse(object), what)
  }
})

t.test('a broken frame throws a scan error, not a wrong object', async t => {
  for (const text of [
    '{"type":"MODIFIED","object":{"metadata":{"name":"a"}',
    '{"type":"MODIFIED","object":[1]}',
    '{"type":"MODIFIED","object":{"metadata":{"name":"a"}}',
  ]) {
    t.throws(() => decodeEvent('json', Buffer.from(text)), JsonScanError, text)
  }
})
