// Hop-by-hop headers describe one connection, not the message: they never cross the proxy. Nor do
// the front-proxy identity headers (X-Remote-User, -Group, -Extra-*): an apiserver believes them
// only from its requestheader client certificate, and no client of the hub speaks for anyone.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'

const hopByHop = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])

const empty: ReadonlySet<string> = new Set<string>()

/** `name` lower-cased */
export const isFrontProxyIdentity = (name: string): boolean => name.startsWith('x-remote-')

function connectionTokens(value: string | string[] | undefined): ReadonlySet<string> {
  if (value === undefined) return empty // the common case, on every proxied request and answer
  const joined = Array.isArray(value) ? value.join(',') : value
  return new Set(
    joined
      .split(',')
      .map(t => t.trim().toLowerCase())
      .filter(Boolean),
  )
}

function withoutHopByHop(headers: Record<string, string | string[] | number | undefined>, alsoDrop: ReadonlySet<string>): Record<string, string | string[]> {
  const listed = connectionTokens(headers.connection as string | string[] | undefined)
  const out: Record<string, string | string[]> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined) continue
    const lower = name.toLowerCase()
    if (hopByHop.has(lower) || listed.has(lower) || alsoDrop.has(lower) || isFrontProxyIdentity(lower)) continue
    out[lower] = typeof value === 'number' ? String(value) : value
  }
  return out
}

// host is the upstream's; the body is re-sent whole so its length is recomputed; undici refuses expect.
const requestOnly = new Set(['host', 'content-length', 'expect'])

export function upstreamRequestHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  return withoutHopByHop(headers, requestOnly)
}

export function clientResponseHeaders(headers: Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  return withoutHopByHop(headers, empty)
}
