// An object's body with metadata.resourceVersion set to another version, every other byte kept: what
// a watch sends when it tells of an object at the stream's version rather than the object's own (a
// re-filtered object, an object leaving a watcher's selector).
import type { WireFormat } from '../api/wire-format.ts'
import { objectMeta, withResourceVersion } from '../codec/protobuf.ts'
import { memberRanges } from '../codec/json-scan.ts'

export function stampedBody(format: WireFormat, body: Buffer, rv: string): Buffer {
  if (format === 'protobuf') return objectMeta(body).resourceVersion === rv ? body : withResourceVersion(body, rv)
  return jsonWithResourceVersion(body, rv)
}

/** The JSON object with metadata.resourceVersion set to `rv`; every other byte kept. */
function jsonWithResourceVersion(object: Buffer, rv: string): Buffer {
  const metadata = memberRanges(object, ['metadata']).get('metadata')
  const value = Buffer.from(JSON.stringify(rv))
  if (!metadata) return Buffer.concat([Buffer.from(`{"metadata":{"resourceVersion":${value}},`), object.subarray(object.indexOf(0x7b) + 1)])
  const current = memberRanges(object, ['resourceVersion'], metadata.start, metadata.end).get('resourceVersion')
  if (current) return Buffer.concat([object.subarray(0, current.start), value, object.subarray(current.end)])
  const open = object.indexOf(0x7b, metadata.start) + 1
  const empty =
    object
      .subarray(open, metadata.end - 1)
      .toString()
      .trim() === ''
  return Buffer.concat([object.subarray(0, open), Buffer.from(`"resourceVersion":${value}${empty ? '' : ','}`), object.subarray(open)])
}
