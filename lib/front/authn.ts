// Who may use the HTTPS port. The hub authorizes nothing itself: a bearer token goes to the
// apiserver untouched, which authenticates and authorizes it; a client certificate from
// --client-ca-file vouches for a local component the operator trusts to act as this node, so its
// request goes with the node's credentials. Everyone else is turned away here, as the apiserver
// turns away anonymous requests.
import type { IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'
import { failure } from '../api/status.ts'
import type { Status } from '../api/status.ts'

export type Authenticate = (req: IncomingMessage) => Status | undefined

const bearer = /^Bearer\s+\S+$/i

export function secureAuthentication(clientCaConfigured: boolean): Authenticate {
  return req => {
    const authorization = req.headers.authorization
    if (authorization !== undefined) {
      return bearer.test(authorization) ? undefined : failure(401, 'Unauthorized: only bearer tokens are accepted in Authorization', 'Unauthorized')
    }
    if (clientCaConfigured && (req.socket as TLSSocket).authorized) return undefined
    const why = clientCaConfigured ? 'a bearer token or a client certificate signed by --client-ca-file' : 'a bearer token (no --client-ca-file is configured)'
    return failure(401, `Unauthorized: this port needs ${why}`, 'Unauthorized')
  }
}
