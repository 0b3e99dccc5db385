// Kubernetes clients (client-go, client-node, kubectl) understand errors only as metav1.Status
// objects; every error the hub produces, and every error the simulator produces, is one of these.

export interface StatusDetails {
  name?: string
  group?: string
  kind?: string
  causes?: { reason?: string; message?: string; field?: string }[]
  retryAfterSeconds?: number
}

export interface Status {
  kind: 'Status'
  apiVersion: 'v1'
  /** a 410 for a too old continue token carries one for the rest of the list at the latest version */
  metadata: { continue?: string }
  status: 'Failure' | 'Success'
  message: string
  reason: string
  details?: StatusDetails
  code: number
}

/** Whether a result is a Status (an error to answer with) rather than the value asked for. */
export function isStatus<T extends object>(value: T | Status): value is Status {
  return (value as { kind?: unknown }).kind === 'Status'
}

const reasonByCode: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  502: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
}

export function failure(code: number, message: string, reason?: string, details?: StatusDetails): Status {
  const status: Status = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: reason ?? reasonByCode[code] ?? 'Unknown',
    code,
  }
  if (details) status.details = details
  return status
}

/** The apiserver's NotFound: `endpointslices.discovery.k8s.io "nope" not found`. */
export function notFound(resource: string, group: string, name: string): Status {
  const qualified = group ? `${resource}.${group}` : resource
  const details: StatusDetails = { name, kind: resource }
  if (group) details.group = group
  return failure(404, `${qualified} "${name}" not found`, 'NotFound', details)
}

/** The apiserver's 400 for a resourceVersion that is not a number; undefined when it is one (or unset). */
export function invalidResourceVersion(rv: string): Status | undefined {
  return rv === '' || /^\d+$/.test(rv) ? undefined : failure(400, `invalid resource version "${rv}"`, 'BadRequest')
}

/** What the watch cache answers to a read newer than it has reached (after waiting for it). */
export function tooLargeResourceVersion(wanted: bigint | string, current: bigint | string): Status {
  return failure(504, `Timeout: Too large resource version: ${wanted}, current: ${current}`, 'Timeout', {
    causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
    retryAfterSeconds: 1,
  })
}

export function serviceUnavailable(message: string): Status {
  return failure(503, message, 'ServiceUnavailable')
}
