// lib/codec/intern.ts: recurring values read as the same text they are, whatever the table holds.
import t from 'tap'
import { interned, internedAscii } from '../lib/codec/intern.ts'
import { internedStringAt } from '../lib/codec/json-scan.ts'

const read = (text: string) => {
  const buf = Buffer.from(`xx${text}yy`)
  return internedAscii(buf, 2, buf.length - 2)
}

t.test('ASCII values read as themselves, first and every later time', async t => {
  for (const value of ['EndpointSlice', 'discovery.k8s.io/v1', 'MODIFIED', 'kube-system', 'a', '']) {
    t.equal(read(value), value)
    t.equal(read(value), value, `${value} again`)
    t.equal(interned(value), value)
  }
})

t.test('bytes that are not plain ASCII are left to the caller', async t => {
  t.equal(read('zöne'), undefined, 'UTF-8')
  t.equal(read('a\\"b'), undefined, 'a JSON escape')
  t.equal(internedStringAt(Buffer.from('"zöne"'), 0, Buffer.byteLength('"zöne"')), 'zöne', 'internedStringAt decodes UTF-8 itself')
  t.equal(internedStringAt(Buffer.from('"a\\"b"'), 0, 6), 'a"b', 'and unescapes')
  t.equal(internedStringAt(Buffer.from('42'), 0, 2), undefined, 'a number is not a string')
})

t.test('long values are left to the caller, which decodes them', async t => {
  const long = 'x'.repeat(500)
  t.equal(read(long), undefined)
  t.equal(internedStringAt(Buffer.from(`"${long}"`), 0, long.length + 2), long)
  t.equal(internedStringAt(Buffer.from(`"${long}ö"`), 0, Buffer.byteLength(`"${long}ö"`)), `${long}ö`)
  t.equal(interned(long), long)
})

t.test('more distinct values than the table holds: each reads as itself, and a full table starts over', async t => {
  // more distinct values than the table holds, each read twice: every read is its own value
  const wrong: string[] = []
  for (let i = 0; i < 25_000; i++) {
    const value = `node-${i}`
    if (read(value) !== value || read(value) !== value || interned(value) !== value) wrong.push(value)
  }
  t.same(wrong, [], '25,000 values, each read as itself')
  t.equal(read('EndpointSlice'), 'EndpointSlice')
  t.equal(interned('zöne-ö'), 'zöne-ö', 'a non-ASCII value through interned()')
})
