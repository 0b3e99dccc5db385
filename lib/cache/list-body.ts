// Answers from stored objects as the apiserver writes them: one object (a get), and a list, one page
// of them (limit/continue), JSON spliced from the stored text and protobuf reassembled from the
// items' raw messages. Offline answers (offline.ts), shared watch caches (lib/watch/cache-reads.ts)
// and offline watches' initial events all go through storedBody: the one place a stored object
// meets the request's filters.
import type { RequestInfo } from '../api/requestinfo.ts'
import type { WireFormat } from '../api/wire-format.ts'
import type { Status } from '../api/status.ts'
import { failure } from '../api/status.ts'
import { decodeContinue, encodeContinue, storageKey } from '../api/continue-token.ts'
import { encodeUnknown, listWireParts } from '../codec/protobuf.ts'
import type { ResponseFilter } from '../../filters/registry.ts'
import type { CachedObject } from './types.ts'
import type { ParsedScope } from './scope.ts'
import { bodyIn } from './translate.ts'

export interface Page {
  items: readonly CachedObject[]
  continue: string
  remainingItemCount?: number
}

/**
 * limit/continue as the apiserver pages `items`, the state at `resourceVersion` (a continue token's
 * own, for pages after the first); a first page at resourceVersion=0 reads the watch cache, which ignores limit.
 */
export function paginate(info: RequestInfo, items: readonly CachedObject[], resourceVersion: string, scope: ParsedScope): Page | Status {
  // keys in tokens are relative to the list's own prefix: a namespaced list's are bare names
  const keyOf = (o: CachedObject) => (info.namespace ? o.name : storageKey(o.namespace, o.name))
  const token = info.query.get('continue')
  let start = 0
  if (token) {
    const decoded = decodeContinue(token)
    if (typeof decoded === 'string') return failure(400, decoded)
    start = items.findIndex(o => keyOf(o) >= decoded.start)
    if (start === -1) start = items.length
  }
  const limit = Number(info.query.get('limit'))
  if (!(limit > 0) || (info.resourceVersion === '0' && !token)) return { items: items.slice(start), continue: '' }
  const page = items.slice(start, start + limit)
  const rest = items.length - start - page.length
  if (rest <= 0) return { items: page, continue: '' }
  const next = encodeContinue({ rv: Number(resourceVersion) || 1, start: `${keyOf(page[page.length - 1])}\u0000` })
  const selectors = scope.labels.requirements.length > 0 || scope.fields.requirements.length > 0
  return selectors ? { items: page, continue: next } : { items: page, continue: next, remainingItemCount: rest }
}

/** One stored object as the client gets it: in its format, through its filters; null when they drop it. */
export function storedBody(o: CachedObject, format: WireFormat, filter?: ResponseFilter): Buffer | null {
  const body = bodyIn(o, format)
  return filter ? filter.object(format, o.apiVersion, o.kind, body) : body
}

/** A get's body: the object as storedBody gives it, a protobuf one in its Unknown envelope; null when the filters drop it. */
export function getBody(o: CachedObject, format: WireFormat, filter?: ResponseFilter): Buffer | null {
  const out = storedBody(o, format, filter)
  return out === null || format === 'json' ? out : encodeUnknown({ apiVersion: o.apiVersion, kind: o.kind, raw: out })
}

/**
 * A list as the apiserver writes it, from stored objects, each through the request's filters (if
 * any; the dropped left out): protobuf reassembled from the items' raw messages, JSON spliced from
 * the stored text (no parse and re-serialize per object); objects in the other format translated.
 * Returned as parts to write in order: the stored bytes are shared, not copied into one body per
 * client (50 clients that never read a 13 MB list would otherwise hold 650 MB).
 */
export function listBody(format: WireFormat, kind: string, apiVersion: string, page: Page, meta: Record<string, unknown>, filter?: ResponseFilter): Buffer[] {
  const listKind = `${kind}List`
  const items: Buffer[] = []
  const kept: CachedObject[] = []
  for (const o of page.items) {
    const out = storedBody(o, format, filter)
    if (out === null) continue
    items.push(out)
    kept.push(o)
  }
  if (format === 'protobuf') {
    return listWireParts(apiVersion, listKind, {
      resourceVersion: String(meta.resourceVersion),
      continue: page.continue,
      remainingItemCount: page.remainingItemCount,
      items,
    })
  }
  const head = `{"kind":${JSON.stringify(listKind)},"apiVersion":${JSON.stringify(apiVersion)},"metadata":${JSON.stringify(meta)},"items":[`
  const parts: Buffer[] = [Buffer.from(head)]
  items.forEach((body, i) => {
    // the apiserver writes list items without kind and apiVersion
    const typeMeta = typeMetaLength(body, kept[i].kind, kept[i].apiVersion)
    if (typeMeta === 0) parts.push(...(i === 0 ? [body] : [comma, body]))
    else parts.push(i === 0 ? openBrace : commaOpenBrace, body.subarray(typeMeta))
  })
  parts.push(closeList)
  return parts
}

const openBrace = Buffer.from('{')
const comma = Buffer.from(',')
const commaOpenBrace = Buffer.from(',{')
const closeList = Buffer.from(']}')
const typeMetaPrefixes = new Map<string, Buffer>()

/** How many bytes of a stored JSON object are its `{"kind":…,"apiVersion":…,` (0 when it does not begin so). */
function typeMetaLength(body: Buffer, kind: string, apiVersion: string): number {
  const key = `${kind} ${apiVersion}`
  let prefix = typeMetaPrefixes.get(key)
  if (!prefix) {
    prefix = Buffer.from(`{"kind":${JSON.stringify(kind)},"apiVersion":${JSON.stringify(apiVersion)},`)
    if (typeMetaPrefixes.size < 1_000) typeMetaPrefixes.set(key, prefix)
  }
  return body.length > prefix.length && body.compare(prefix, 0, prefix.length, 0, prefix.length) === 0 ? prefix.length : 0
}
