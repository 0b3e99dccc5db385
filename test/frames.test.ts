import t from 'tap'
import { Readable } from 'node:stream'
import { WatchFrameSplitter, FrameTooLargeError, framingOf, maxFrameBytes } from '../lib/api/frames.ts'

async function split(framing: 'json' | 'protobuf', chunks: Buffer[]): Promise<Buffer[]> {
  const out: Buffer[] = []
  for await (const frame of Readable.from(chunks).pipe(new WatchFrameSplitter(framing))) out.push(frame as Buffer)
  return out
}

function lengthPrefixed(payload: string): Buffer {
  const body = Buffer.from(payload)
  const head = Buffer.alloc(4)
  head.writeUInt32BE(body.length)
  return Buffer.concat([head, body])
}

t.test('JSON watch: one output chunk per line, whatever the input chunking', async t => {
  const stream = '{"type":"ADDED","object":{"a":1}}\n{"type":"MODIFIED","object":{"a":2}}\n{"type":"DELETED","object":{"a":3}}\n'
  const whole = Buffer.from(stream)
  const expected = stream
    .split('\n')
    .filter(Boolean)
    .map(l => l + '\n')
  for (const size of [1, 2, 7, 33, whole.length]) {
    const chunks: Buffer[] = []
    for (let i = 0; i < whole.length; i += size) chunks.push(whole.subarray(i, i + size))
    const frames = await split('json', chunks)
    t.same(
      frames.map(f => f.toString()),
      expected,
      `chunks of ${size} bytes`,
    )
  }
})

t.test('JSON watch: a trailing half event (upstream broke mid-frame) is dropped, not forwarded', async t => {
  const frames = await split('json', [Buffer.from('{"type":"ADDED"}\n{"type":"MODI')])
  t.same(
    frames.map(f => f.toString()),
    ['{"type":"ADDED"}\n'],
  )
})

t.test('protobuf watch: length-prefixed frames split across chunks, including inside the prefix', async t => {
  const whole = Buffer.concat([lengthPrefixed('first'), lengthPrefixed(''), lengthPrefixed('third frame')])
  for (const size of [1, 3, 5, whole.length]) {
    const chunks: Buffer[] = []
    for (let i = 0; i < whole.length; i += size) chunks.push(whole.subarray(i, i + size))
    const frames = await split('protobuf', chunks)
    t.same(
      frames.map(f => f.subarray(4).toString()),
      ['first', '', 'third frame'],
      `chunks of ${size} bytes`,
    )
  }
  const cut = await split('protobuf', [lengthPrefixed('kept'), lengthPrefixed('lost').subarray(0, 6)])
  t.same(
    cut.map(f => f.subarray(4).toString()),
    ['kept'],
    'a partial trailing frame is dropped',
  )
})

t.test('a frame claiming more than the limit fails the stream instead of buffering it', async t => {
  const head = Buffer.alloc(4)
  head.writeUInt32BE(maxFrameBytes + 1)
  await t.rejects(split('protobuf', [head, Buffer.from('x')]), FrameTooLargeError)
})

t.test('framing follows the response Content-Type', async t => {
  t.equal(framingOf('application/json'), 'json')
  t.equal(framingOf('application/vnd.kubernetes.protobuf;stream=watch'), 'protobuf')
  t.equal(framingOf('text/plain'), undefined)
  t.equal(framingOf(undefined), undefined)
})
