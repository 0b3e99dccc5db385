// The query parameters of list and watch requests, validated as the apiserver's handler does before
// storage sees them (k8s.io/apimachinery/pkg/apis/meta/internalversion/validation): 422 Invalid
// for the kind ListOptions.meta.k8s.io. Without watchList these are v1.24's rules, which do not
// know sendInitialEvents (ignored, like any unknown parameter) and forbid resourceVersionMatch on
// watches, so a WatchList client falls back to list+watch as it would against a real v1.24.

import type { RequestInfo } from '../../lib/api/requestinfo.ts'
import { ApiError } from './errors.ts'

export interface ListQuery {
  resourceVersion: string
  resourceVersionMatch: string
  continue: string
  allowWatchBookmarks: boolean
  /** undefined when not given, or when the server predates WatchList */
  sendInitialEvents?: boolean
}

/** Go's query-parameter bool (runtime.Convert_Slice_string_To_bool): present and not "0"/"false" is true. */
function queryBool(query: URLSearchParams, name: string): boolean | undefined {
  const value = query.get(name)
  if (value === null) return undefined
  return !(value === '0' || value.toLowerCase() === 'false')
}

interface FieldError {
  field: string
  reason: 'FieldValueForbidden' | 'FieldValueNotSupported'
  body: string
}

const forbidden = (field: string, detail: string): FieldError => ({ field, reason: 'FieldValueForbidden', body: `Forbidden: ${detail}` })
const notSupported = (field: string, value: string, supported: string[]): FieldError => ({
  field,
  reason: 'FieldValueNotSupported',
  body: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported.map(v => JSON.stringify(v)).join(', ')}`,
})

function invalid(errs: FieldError[]): ApiError {
  const messages = [...new Set(errs.map(e => `${e.field}: ${e.body}`))]
  const aggregate = messages.length === 1 ? messages[0] : `[${messages.join(', ')}]`
  return ApiError.of(422, `ListOptions.meta.k8s.io "" is invalid: ${aggregate}`, 'Invalid', {
    group: 'meta.k8s.io',
    kind: 'ListOptions',
    causes: errs.map(e => ({ reason: e.reason, message: e.body, field: e.field })),
  })
}

const rvm = 'resourceVersionMatch'

function validate(q: ListQuery, watch: boolean, watchList: boolean): FieldError[] {
  const errs: FieldError[] = []
  const match = q.resourceVersionMatch
  if (watch && watchList) {
    if (q.sendInitialEvents !== undefined && match !== 'NotOlderThan')
      errs.push(forbidden(rvm, 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'))
    if (match) {
      if (q.sendInitialEvents === undefined) errs.push(forbidden(rvm, 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'))
      if (match !== 'NotOlderThan') errs.push(notSupported(rvm, match, ['NotOlderThan']))
      if (q.continue) errs.push(forbidden(rvm, 'resourceVersionMatch is forbidden when continue is provided'))
    }
    return errs
  }
  if (match) {
    if (watch) errs.push(forbidden(rvm, 'resourceVersionMatch is forbidden for watch'))
    if (!q.resourceVersion) errs.push(forbidden(rvm, 'resourceVersionMatch is forbidden unless resourceVersion is provided'))
    if (q.continue) errs.push(forbidden(rvm, 'resourceVersionMatch is forbidden when continue is provided'))
    if (match !== 'Exact' && match !== 'NotOlderThan') errs.push(notSupported(rvm, match, ['Exact', 'NotOlderThan', '']))
    if (match === 'Exact' && q.resourceVersion === '0') errs.push(forbidden(rvm, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
  }
  if (q.sendInitialEvents !== undefined) errs.push(forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'))
  return errs
}

/** The list/watch parameters of a request; throws the apiserver's 422 when they do not go together. */
export function listQuery(info: RequestInfo, watchList: boolean): ListQuery {
  const q: ListQuery = {
    resourceVersion: info.resourceVersion,
    resourceVersionMatch: info.query.get(rvm) ?? '',
    continue: info.query.get('continue') ?? '',
    allowWatchBookmarks: queryBool(info.query, 'allowWatchBookmarks') ?? false,
    sendInitialEvents: watchList ? queryBool(info.query, 'sendInitialEvents') : undefined,
  }
  const errs = validate(q, info.verb === 'watch', watchList)
  if (errs.length > 0) throw invalid(errs)
  return q
}
