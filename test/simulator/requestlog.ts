// The simulator's request log: enough about each request for a test to count what reached the
// apiserver, e.g. upstream watches per scope (path, selectors) and format (Accept).

import type { IncomingMessage } from 'node:http'
import { apiserverRequestInfo } from '../../lib/api/requestinfo.ts'

export interface LoggedRequest {
  method: string
  url: string
  /** the URL's path, and its query parameters (first value of each) */
  path: string
  query: Record<string, string>
  /** the resource verb (get, list, watch, create, …), or the lower-cased method of a non-resource request */
  verb: string
  watch: boolean
  headers: Record<string, string | string[] | undefined>
  /** who it authenticated as: a client certificate's CN, `token:<first 6 chars>`, `system:anonymous`; undefined when its credentials were refused */
  user?: string
}

/** What `countRequests` matches: equal fields, and these query parameters among the request's. */
export type RequestFilter = Partial<Pick<LoggedRequest, 'method' | 'path' | 'verb' | 'watch' | 'user'>> & { query?: Record<string, string> }

export function logEntry(req: IncomingMessage, user: string | undefined): LoggedRequest {
  const method = req.method ?? 'GET'
  const url = req.url ?? '/'
  const info = apiserverRequestInfo(method, url, req.headers['user-agent'])
  const query: Record<string, string> = {}
  for (const [k, v] of info.query) if (!(k in query)) query[k] = v
  return { method, url, path: info.path, query, verb: info.verb, watch: info.verb === 'watch', headers: { ...req.headers }, user }
}

export function countMatching(requests: LoggedRequest[], filter: RequestFilter | ((r: LoggedRequest) => boolean)): number {
  if (typeof filter === 'function') return requests.filter(filter).length
  const { query = {}, ...fields } = filter
  const same = (r: LoggedRequest) =>
    Object.entries(fields).every(([k, v]) => r[k as keyof typeof fields] === v) && Object.entries(query).every(([k, v]) => r.query[k] === v)
  return requests.filter(same).length
}
