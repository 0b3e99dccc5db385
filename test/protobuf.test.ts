import t from 'tap'
import { eventFrameParts } from '../lib/api/watch-event-frames.ts'
import { watchFrames } from './helpers/fixtures.ts'
import { readFileSync } from 'node:fs'
import {
  type ListParts,
  ProtobufError,
  assembleList,
  listWireParts,
  decodeUnknown,
  decodeWatchEvent,
  encodeUnknown,
  encodeWatchEvent,
  isProtobuf,
  k8sMagic,
  objectMeta,
  splitList,
  withResourceVersion,
} from '../lib/codec/protobuf.ts'
import { FieldReader, varintSize, writeVarint } from '../lib/codec/wire.ts'

const dir = new URL('./fixtures/apiserver-v1.24/', import.meta.url)
const bytes = (name: string): Buffer => readFileSync(new URL(name, dir))
const json = (name: string): any => JSON.parse(readFileSync(new URL(name, dir), 'utf8'))

function metaOf(m: any) {
  return {
    name: m.name ?? '',
    namespace: m.namespace ?? '',
    uid: m.uid ?? '',
    resourceVersion: m.resourceVersion ?? '',
    generation: m.generation,
    labels: m.labels ?? {},
    annotations: m.annotations ?? {},
  }
}

function summary(raw: Buffer) {
  const s = objectMeta(raw)
  return { ...s, generation: s.generation }
}

const frames = watchFrames

const lists = ['list-endpointslices', 'list-services', 'list-pods-kind-worker2', 'list-services.metadata']

t.test('magic', async t => {
  t.same([...k8sMagic], [0x6b, 0x38, 0x73, 0])
  t.ok(isProtobuf(bytes('list-services.pb')))
  t.notOk(isProtobuf(Buffer.from('{"kind":"x"}')))
  t.notOk(isProtobuf(Buffer.from('k8s')))
})

for (const name of lists) {
  t.test(`${name}.pb`, async t => {
    const body = bytes(`${name}.pb`)
    const twin = json(`${name}.json`)
    const u = decodeUnknown(body)
    t.match(u.kind, /List$/)
    t.equal(u.kind, twin.kind)
    t.equal(u.apiVersion, twin.apiVersion)
    t.equal(u.contentEncoding, '')
    t.equal(u.contentType, '')
    const parts = splitList(u.raw)
    t.equal(parts.resourceVersion, twin.metadata.resourceVersion)
    t.equal(parts.continue, twin.metadata.continue ?? '')
    t.equal(parts.remainingItemCount, twin.metadata.remainingItemCount)
    t.equal(parts.items.length, twin.items.length)
    parts.items.forEach((item, i) => {
      t.equal(item.buffer, body.buffer, 'items are subarrays')
      t.same(summary(item), metaOf(twin.items[i].metadata), `item ${i}`)
    })
    t.ok(assembleList(parts).equals(u.raw), 'assembleList(splitList(raw)) is byte-identical')
    t.ok(encodeUnknown(u).equals(body), 'encodeUnknown(decodeUnknown(body)) is byte-identical')
    const wire = listWireParts(u.apiVersion, u.kind, parts)
    t.ok(Buffer.concat(wire).equals(body), 'listWireParts joined is the apiserver’s list, byte for byte')
    t.ok(
      parts.items.every(item => wire.includes(item)),
      'its parts are the items themselves, not copies',
    )
  })
}

t.test('assembleList with continue and remainingItemCount round-trips', async t => {
  const items = splitList(decodeUnknown(bytes('list-services.pb')).raw).items
  for (const remainingItemCount of [undefined, 0, 1, 300, 2 ** 40, -1]) {
    const parts: ListParts = { resourceVersion: '1234', continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ', items }
    if (remainingItemCount !== undefined) parts.remainingItemCount = remainingItemCount
    const again = splitList(assembleList(parts))
    t.same(again, parts)
    t.ok(assembleList(again).equals(assembleList(parts)))
  }
  const empty = { resourceVersion: '', continue: '', items: [] }
  t.same(splitList(assembleList(empty)), empty)
})

t.test('single objects', async t => {
  const node = decodeUnknown(bytes('get-node-kind-worker2.pb'))
  t.equal(node.kind, 'Node')
  t.equal(node.apiVersion, 'v1')
  const nodeJson = json('list-nodes.json').items.find((n: any) => n.metadata.name === 'kind-worker2')
  const nm = objectMeta(node.raw)
  t.equal(nm.name, 'kind-worker2')
  t.equal(nm.namespace, '')
  t.equal(nm.uid, nodeJson.metadata.uid)
  t.same(nm.labels, nodeJson.metadata.labels)
  t.ok(Object.keys(nm.labels).length > 3)
  t.ok(encodeUnknown(node).equals(bytes('get-node-kind-worker2.pb')))

  for (const [name, kind] of [
    ['get-lease-kind-worker2', 'Lease'],
    ['get-endpoints-svc-ud1', 'Endpoints'],
    ['get-endpointslice-v1beta1', 'EndpointSlice'],
  ]) {
    const body = bytes(`${name}.pb`)
    const twin = json(`${name}.json`)
    const u = decodeUnknown(body)
    t.equal(u.kind, kind, name)
    t.equal(u.apiVersion, twin.apiVersion, name)
    t.same(summary(u.raw), metaOf(twin.metadata), name)
    t.ok(encodeUnknown(u).equals(body), `${name} re-encodes byte-identically`)
  }
})

t.test('watch-endpointslices.pb', async t => {
  const stream = bytes('watch-endpointslices.pb')
  const events = readFileSync(new URL('watch-endpointslices.json', dir), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map(line => JSON.parse(line))
  const fs = frames(stream)
  t.equal(fs.length, events.length)
  fs.forEach((frame, i) => {
    const ev = decodeWatchEvent(frame)
    t.equal(ev.type, events[i].type, `event ${i} type`)
    const u = decodeUnknown(ev.object)
    t.equal(u.kind, events[i].object.kind)
    t.equal(u.apiVersion, events[i].object.apiVersion)
    const m = objectMeta(u.raw)
    t.equal(m.name, events[i].object.metadata.name ?? '', `event ${i} name`)
    t.equal(m.resourceVersion, events[i].object.metadata.resourceVersion, `event ${i} resourceVersion`)
    t.ok(encodeUnknown(u).equals(ev.object))
    t.ok(encodeWatchEvent(ev.type, ev.object).equals(frame), `event ${i} re-encodes byte-identically`)
  })
  t.same(
    fs.map(f => decodeWatchEvent(f).type),
    ['MODIFIED', 'ADDED', 'DELETED', 'BOOKMARK', 'BOOKMARK'],
  )
})

t.test('watch-expired.pb', async t => {
  const stream = bytes('watch-expired.pb')
  const fs = frames(stream)
  t.equal(fs.length, 1)
  const ev = decodeWatchEvent(fs[0])
  t.equal(ev.type, 'ERROR')
  const u = decodeUnknown(ev.object)
  t.equal(u.kind, 'Status')
  t.equal(u.apiVersion, 'v1')
  // Status: 2 status, 3 message, 4 reason, 6 code
  const r = new FieldReader(u.raw)
  const fields: Record<number, string | number> = {}
  while (r.next()) fields[r.field] = r.field === 6 ? r.int64() : r.string()
  t.equal(fields[2], 'Failure')
  t.equal(fields[4], 'Expired')
  t.equal(fields[6], 410)
  t.ok(encodeWatchEvent(ev.type, ev.object).equals(stream))
})

/** The object message with ObjectMeta's resourceVersion field removed, ObjectMeta's length re-encoded. */
function withoutRv(raw: Buffer): Buffer {
  const r = new FieldReader(raw)
  while (r.next()) {
    if (r.field !== 1) continue
    const m = new FieldReader(raw, r.start, r.end)
    const kept: Buffer[] = []
    while (m.next()) if (m.field !== 6) kept.push(raw.subarray(m.tagStart, m.pos))
    const meta = Buffer.concat(kept)
    const header = Buffer.alloc(1 + varintSize(meta.length))
    header[0] = 0x0a
    writeVarint(header, 1, meta.length)
    return Buffer.concat([raw.subarray(0, r.tagStart), header, meta, raw.subarray(r.pos)])
  }
  return raw
}

t.test('withResourceVersion', async t => {
  const samples: Buffer[] = [
    decodeUnknown(bytes('get-node-kind-worker2.pb')).raw,
    decodeUnknown(bytes('get-lease-kind-worker2.pb')).raw,
    ...splitList(decodeUnknown(bytes('list-endpointslices.pb')).raw).items,
  ]
  for (const raw of samples) {
    const before = objectMeta(raw)
    for (const rv of ['1', '999999999', '', 'x'.repeat(300)]) {
      const out = withResourceVersion(raw, rv)
      const after = objectMeta(out)
      t.equal(after.resourceVersion, rv)
      t.same({ ...after, resourceVersion: '' }, { ...before, resourceVersion: '' })
      t.ok(withoutRv(out).equals(withoutRv(raw)), 'only the resourceVersion changed')
    }
    t.ok(withResourceVersion(raw, before.resourceVersion).equals(raw), 'same version gives the same bytes')
    // inserted when absent, in field order (before generation, field 7)
    const stripped = withoutRv(raw)
    const inserted = withResourceVersion(stripped, before.resourceVersion)
    t.ok(inserted.equals(raw), 'inserting the field back restores the original bytes')
  }
  // an object without ObjectMeta gets one
  const bare = Buffer.from([0x12, 0x02, 0x41, 0x42])
  const out = withResourceVersion(bare, '7')
  t.equal(objectMeta(out).resourceVersion, '7')
  t.ok(out.subarray(out.length - 4).equals(bare))
})

t.test('varints', async t => {
  for (const n of [0, 1, 127, 128, 16383, 16384, 2 ** 28 - 1, 2 ** 28, 2 ** 31, 2 ** 32 + 5, 2 ** 35, 2 ** 53 - 1, -1, -410]) {
    const buf = Buffer.alloc(1 + varintSize(n))
    buf[0] = 0x08
    t.equal(writeVarint(buf, 1, n), buf.length, `size of ${n}`)
    const r = new FieldReader(buf)
    t.ok(r.next())
    t.equal(r.int64(), n)
    t.notOk(r.next())
  }
  // an 11-byte varint and a 10th byte above 1 are rejected
  t.throws(() => new FieldReader(Buffer.from([0x08, ...Array(10).fill(0xff), 0x01])).next(), ProtobufError)
  t.throws(() => new FieldReader(Buffer.from([0x08, ...Array(9).fill(0xff), 0x02])).next(), ProtobufError)
  // fixed32/fixed64 skipped, groups and invalid wire types rejected
  const skip = Buffer.from([0x1d, 1, 2, 3, 4, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x18, 0x96, 0x01, 0x0a, 0x00])
  t.same(splitList(skip), { resourceVersion: '', continue: '', items: [] })
  for (const tag of [0x0b, 0x0c, 0x0e, 0x0f, 0x00]) {
    t.throws(() => splitList(Buffer.from([tag, 0, 0, 0, 0, 0, 0, 0, 0])), ProtobufError, `tag ${tag}`)
  }
})

/** Runs fn and asserts it returns or throws a ProtobufError, nothing else. */
function onlyProtobufErrors(fn: () => unknown): boolean {
  try {
    fn()
    return true
  } catch (err) {
    if (err instanceof ProtobufError) return true
    throw err
  }
}

function everyDecoder(input: Buffer): void {
  onlyProtobufErrors(() => decodeUnknown(input))
  onlyProtobufErrors(() => splitList(input))
  onlyProtobufErrors(() => objectMeta(input))
  onlyProtobufErrors(() => withResourceVersion(input, '5'))
  onlyProtobufErrors(() => decodeWatchEvent(input))
  onlyProtobufErrors(() => {
    const u = decodeUnknown(input)
    const parts = splitList(u.raw)
    for (const item of parts.items) objectMeta(item)
  })
}

t.test('malformed input', async t => {
  t.throws(() => decodeUnknown(Buffer.from('k8s\x01abc')), ProtobufError)
  t.throws(() => decodeUnknown(Buffer.from('{}')), ProtobufError)
  t.throws(() => decodeUnknown(Buffer.alloc(0)), ProtobufError)
  t.throws(() => decodeWatchEvent(Buffer.from([0, 0, 0])), ProtobufError)
  t.throws(() => decodeWatchEvent(Buffer.from([0, 0, 0, 9, 0x0a, 0x00])), ProtobufError)

  const small = bytes('get-lease-kind-worker2.pb')
  let threw = 0
  for (let i = 0; i < small.length; i++) {
    const cut = small.subarray(0, i)
    // copy so that reading past the cut would be visible as garbage, not as the real bytes
    const input = Buffer.from(cut)
    everyDecoder(input)
    try {
      const u = decodeUnknown(input)
      objectMeta(u.raw)
    } catch (err) {
      t.type(err, ProtobufError)
      threw++
    }
  }
  t.ok(threw > small.length / 2, `most truncations are detected (${threw}/${small.length})`)

  const frame = frames(bytes('watch-expired.pb'))[0]
  for (let i = 0; i < frame.length; i++) {
    t.throws(() => decodeWatchEvent(frame.subarray(0, i)), ProtobufError)
    const patched = Buffer.from(frame.subarray(0, i))
    if (i >= 4) patched.writeUInt32BE(i - 4, 0)
    everyDecoder(patched)
  }

  // seeded garbage: random bytes, and fixtures with random bytes flipped
  let seed = 0x2545f491
  const rand = (): number => {
    seed ^= seed << 13
    seed ^= seed >>> 17
    seed ^= seed << 5
    return (seed >>> 0) / 0x100000000
  }
  const base = [bytes('list-services.pb'), bytes('get-node-kind-worker2.pb'), frame]
  for (let n = 0; n < 4000; n++) {
    let input: Buffer
    if (n % 2 === 0) {
      input = Buffer.alloc(Math.floor(rand() * 64))
      for (let i = 0; i < input.length; i++) input[i] = Math.floor(rand() * 256)
      if (n % 4 === 0) input = Buffer.concat([k8sMagic, input])
    } else {
      input = Buffer.from(base[n % base.length])
      const flips = 1 + Math.floor(rand() * 4)
      for (let f = 0; f < flips; f++) input[Math.floor(rand() * input.length)] = Math.floor(rand() * 256)
    }
    everyDecoder(input)
  }
  t.pass('4000 garbage inputs: only ProtobufErrors')
})

t.test('a watch event in parts is the same frame, byte for byte, with the object’s bytes not copied', async t => {
  for (const format of ['json', 'protobuf'] as const) {
    for (const size of [0, 1, 127, 128, 16_383, 16_384, 300_000]) {
      const object = Buffer.alloc(size, format === 'json' ? 0x20 : 7)
      for (const type of ['ADDED', 'MODIFIED', 'DELETED']) {
        const parts = eventFrameParts(format, type, 'discovery.k8s.io/v1', 'EndpointSlice', object)
        const whole =
          format === 'protobuf'
            ? encodeWatchEvent(type, encodeUnknown({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', raw: object }))
            : Buffer.from(`{"type":"${type}","object":${object.toString()}}\n`)
        if (!Buffer.concat(parts).equals(whole)) t.fail(`${format} ${type} of ${size} bytes differs`)
        if (!parts.includes(object)) t.fail(`${format} ${type} of ${size} bytes copied the object`)
      }
    }
  }
  t.pass('JSON and protobuf, ADDED, MODIFIED and DELETED, objects of 0 to 300,000 bytes')
})
