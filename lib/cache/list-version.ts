// The version a list reads at, as kube-apiserver decides it: the state now (unset, 0, NotOlderThan),
// exactly N (`Exact`, a legacy resourceVersion=N with limit, a continue token's version), and the
// apiserver's 400/422 for parameters that do not go together and its 410 for a version it no longer has.
import type { RequestInfo } from '../api/requestinfo.ts'
import { listStatesPresent } from '../api/requestinfo.ts'
import type { Status } from '../api/status.ts'
import { failure, invalidResourceVersion } from '../api/status.ts'
import { decodeContinue, encodeContinue } from '../api/continue-token.ts'

/** The version a list reads at. */
export type ListVersion =
  /** the state now (unset, 0, NotOlderThan): resourceVersion semantics of the watch cache */
  | { kind: 'state' }
  /** exactly this version: `Exact`, a legacy resourceVersion=N with limit, or a continue token's */
  | { kind: 'exact'; version: bigint; from: 'resourceVersion' | 'continue' }
  /** a continue token the apiserver gave with a 410: the rest of the list at the latest version */
  | { kind: 'latest' }

/** What version a list asks for, or the apiserver's 400/422 for parameters that do not go together. */
export function listVersionOf(info: RequestInfo): ListVersion | Status {
  const rv = info.resourceVersion
  const invalid = invalidResourceVersion(rv)
  if (invalid) return invalid
  const token = info.query.get('continue')
  if (token) {
    if (info.query.get('resourceVersionMatch')) return forbiddenMatchWithContinue()
    if (rv !== '' && rv !== '0') return failure(400, 'specifying resource version is not allowed when using continue', 'BadRequest')
    const decoded = decodeContinue(token)
    if (typeof decoded === 'string') return failure(400, decoded, 'BadRequest')
    return decoded.rv < 0 ? { kind: 'latest' } : { kind: 'exact', version: BigInt(decoded.rv), from: 'continue' }
  }
  if (rv === '' || rv === '0' || listStatesPresent(info)) return { kind: 'state' }
  return { kind: 'exact', version: BigInt(rv), from: 'resourceVersion' }
}

/** The apiserver's validation of resourceVersionMatch beside continue (422 Invalid ListOptions). */
function forbiddenMatchWithContinue(): Status {
  const message = 'Forbidden: resourceVersionMatch is forbidden when continue is provided'
  return failure(422, `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: ${message}`, 'Invalid', {
    group: 'meta.k8s.io',
    kind: 'ListOptions',
    causes: [{ reason: 'FieldValueForbidden', message, field: 'resourceVersionMatch' }],
  })
}

const continueTooOld =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.'

/** The apiserver's 410 for a list at a version it no longer has: for a token, with one for the rest at the latest version. */
export function pastExpired(info: RequestInfo, at: Extract<ListVersion, { kind: 'exact' }>): Status {
  if (at.from === 'resourceVersion') return failure(410, 'The resourceVersion for the provided list is too old.', 'Expired')
  const status = failure(410, continueTooOld, 'Expired')
  const decoded = decodeContinue(info.query.get('continue') ?? '')
  if (typeof decoded !== 'string') status.metadata = { continue: encodeContinue({ rv: -1, start: decoded.start }) }
  return status
}
