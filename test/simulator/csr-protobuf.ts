// A CertificateSigningRequest sent as protobuf, as `kubectl certificate approve|deny` (1.32) sends it
// to the approval subresource. The typed codec (lib/codec) does not know CSRs field by field (the
// hub never caches them), so this reads k8s.io/api/certificates/v1's generated.proto directly:
// metadata (name, uid, resourceVersion, labels, annotations), spec and status. Other ObjectMeta
// fields are not read; the approval subresource takes only status.conditions anyway.
import { decodeUnknown, objectMeta } from '../../lib/codec/protobuf.ts'
import { FieldReader, WIRE_LEN } from '../../lib/codec/wire.ts'

type Json = Record<string, unknown>

/** Each field of the message in buf[start, end), as (field number, reader positioned on it). */
function* fields(buf: Buffer, start: number, end: number): Generator<FieldReader> {
  const r = new FieldReader(buf, start, end)
  while (r.next()) yield r
}

function sub(r: FieldReader): [Buffer, number, number] {
  r.expect(WIRE_LEN)
  return [r.buf, r.start, r.end]
}

/** meta/v1 Time: seconds (1) and nanos (2), in JSON as RFC 3339 to the second; Go's zero time is an empty message. */
function time(r: FieldReader): string | undefined {
  let seconds: number | undefined
  for (const f of fields(...sub(r))) if (f.field === 1) seconds = f.int64()
  return seconds === undefined ? undefined : new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function condition(r: FieldReader): Json {
  const names: Record<number, string> = { 1: 'type', 6: 'status', 2: 'reason', 3: 'message' }
  const c: Json = {}
  for (const f of fields(...sub(r))) {
    if (names[f.field]) c[names[f.field]] = f.string()
    else if ((f.field === 4 || f.field === 5) && time(f) !== undefined) c[f.field === 4 ? 'lastUpdateTime' : 'lastTransitionTime'] = time(f)
  }
  return c
}

function spec(r: FieldReader): Json {
  const s: Json = {}
  const list = (key: string, value: string) => (s[key] = [...((s[key] as string[] | undefined) ?? []), value])
  for (const f of fields(...sub(r))) {
    if (f.field === 1) s.request = Buffer.from(f.buf.subarray(f.start, f.end)).toString('base64')
    else if (f.field === 2) s.username = f.string()
    else if (f.field === 3) list('usages', f.string())
    else if (f.field === 4) s.uid = f.string()
    else if (f.field === 5) list('groups', f.string())
    else if (f.field === 7) s.signerName = f.string()
    else if (f.field === 8) s.expirationSeconds = f.lo | 0
    else if (f.field === 6) {
      // map<string, ExtraValue{repeated string items = 1}>
      let key = ''
      const items: string[] = []
      for (const e of fields(...sub(f))) {
        if (e.field === 1) key = e.string()
        else if (e.field === 2) for (const i of fields(...sub(e))) if (i.field === 1) items.push(i.string())
      }
      s.extra = { ...(s.extra as Json | undefined), [key]: items }
    }
  }
  return s
}

function status(r: FieldReader): Json {
  const s: Json = {}
  for (const f of fields(...sub(r))) {
    if (f.field === 1) s.conditions = [...((s.conditions as Json[] | undefined) ?? []), condition(f)]
    else if (f.field === 2) s.certificate = Buffer.from(f.buf.subarray(f.start, f.end)).toString('base64')
  }
  return s
}

/** The JSON form of a protobuf-encoded CertificateSigningRequest (throws ProtobufError when malformed). */
export function decodeCsr(body: Buffer): Json {
  const { apiVersion, kind, raw } = decodeUnknown(body)
  const meta = objectMeta(raw)
  const metadata: Json = { name: meta.name, uid: meta.uid || undefined, resourceVersion: meta.resourceVersion || undefined }
  if (Object.keys(meta.labels).length > 0) metadata.labels = meta.labels
  if (Object.keys(meta.annotations).length > 0) metadata.annotations = meta.annotations
  const out: Json = { apiVersion, kind, metadata }
  for (const f of fields(raw, 0, raw.length)) {
    if (f.field === 2) out.spec = spec(f)
    else if (f.field === 3) out.status = status(f)
  }
  return out
}
