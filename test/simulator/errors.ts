import { failure, type Status, type StatusDetails } from '../../lib/api/status.ts'

/** An error the simulator answers with a Status object (HTTP) or throws from its programmatic API. */
export class ApiError extends Error {
  readonly status: Status
  constructor(status: Status) {
    super(status.message)
    this.status = status
  }
  static of(code: number, message: string, reason?: string, details?: StatusDetails): ApiError {
    return new ApiError(failure(code, message, reason, details))
  }
}

export function badRequest(message: string): ApiError {
  return ApiError.of(400, message, 'BadRequest')
}

/** `the server could not find the requested resource`, as for unknown resources and paths. */
export function noSuchResource(): ApiError {
  return ApiError.of(404, 'the server could not find the requested resource', 'NotFound', {})
}
