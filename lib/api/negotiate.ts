import type { WireFormat } from './wire-format.ts'
// The apiserver's content negotiation, for answers the hub gives itself (from its cache): the
// client's Accept ranges in order of preference (q values respected), `*/*` meaning JSON, the
// default serializer; protobuf only for a client that names it. `as=Table` asks for kubectl's
// Table view.

export const protobufType = 'application/vnd.kubernetes.protobuf'

export type Wanted = { kind: 'object'; format: WireFormat } | { kind: 'table' }

interface Range {
  type: string
  params: Record<string, string>
  q: number
}

function parseAccept(accept: string | undefined): Range[] {
  const ranges: Range[] = []
  for (const part of (accept?.trim() ? accept : '*/*').split(',')) {
    const [type, ...rest] = part.split(';').map(s => s.trim())
    if (!type) continue
    const params: Record<string, string> = {}
    for (const p of rest) {
      const eq = p.indexOf('=')
      if (eq > 0)
        params[p.slice(0, eq).trim().toLowerCase()] = p
          .slice(eq + 1)
          .trim()
          .replace(/^"|"$/g, '')
    }
    const q = params.q === undefined ? 1 : Number(params.q)
    if (!(q > 0)) continue
    ranges.push({ type: type.toLowerCase(), params, q })
  }
  // stable: equal q keeps the client's order
  return ranges
    .map((r, i) => ({ r, i }))
    .sort((a, b) => b.r.q - a.r.q || a.i - b.i)
    .map(({ r }) => r)
}

/** What the client asks for, most preferred first: formats of the object itself, or a Table. */
export function wantedRepresentations(accept: string | undefined): Wanted[] {
  const out: Wanted[] = []
  for (const range of parseAccept(accept)) {
    const as = range.params.as
    if (as !== undefined) {
      if (as === 'Table' && range.params.g === 'meta.k8s.io' && (range.params.v === 'v1' || range.params.v === 'v1beta1')) out.push({ kind: 'table' })
      continue // other views (PartialObjectMetadata) are not made offline
    }
    if (range.type === protobufType) out.push({ kind: 'object', format: 'protobuf' })
    else if (range.type === 'application/json' || range.type === '*/*' || range.type === 'application/*') out.push({ kind: 'object', format: 'json' })
  }
  return out
}

export function contentTypeOf(format: WireFormat): string {
  return format === 'json' ? 'application/json' : protobufType
}

const goTrue = new Set(['1', 't', 'T', 'true', 'TRUE', 'True'])
const goBool = new Set([...goTrue, '0', 'f', 'F', 'false', 'FALSE', 'False'])

/**
 * Whether JSON is written indented, as kube-apiserver decides it: `?pretty=` when it is given a
 * boolean (Go's strconv.ParseBool), else for curl, Wget and browsers by their User-Agent.
 */
export function prettyWanted(pretty: string | undefined, userAgent: string | undefined): boolean {
  if (pretty !== undefined && goBool.has(pretty)) return goTrue.has(pretty)
  if (pretty !== undefined && pretty !== '') return false
  return /^(curl|Wget|Mozilla\/5\.0)/.test(userAgent ?? '')
}
