// Who may use the HTTPS port. The hub authorizes nothing itself: a bearer token goes to the
// apiserver untouched, which authenticates and authorizes it; a client certificate from
// --client-ca-file vouches for a local component the operator trusts to act as this node, so its
// request goes with the node's credentials. Everyone else is turned away here, as the apiserver
// turns away anonymous requests.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
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
    if (ownCredentials(req.headers)) return undefined // a WebSocket's token, relayed as it came
    if (clientCaConfigured && (req.socket as TLSSocket).authorized) return undefined
    const why = clientCaConfigured ? 'a bearer token or a client certificate signed by --client-ca-file' : 'a bearer token (no --client-ca-file is configured)'
    return failure(401, `Unauthorized: this port needs ${why}`, 'Unauthorized')
  }
}

/** kubectl exec/attach/port-forward over WebSocket carry the token as a subprotocol (client-go's wsstream) */
const webSocketBearer = /(?:^|,)\s*base64url\.bearer\.authorization\.k8s\.io\.[A-Za-z0-9_-]+\s*(?:,|$)/

/** Whether the client brought credentials of its own: then it is relayed as itself, never as the node. */
export function ownCredentials(headers: IncomingHttpHeaders): boolean {
  if (headers.authorization !== undefined) return true
  const protocols = headers['sec-websocket-protocol']
  return protocols !== undefined && webSocketBearer.test(Array.isArray(protocols) ? protocols.join(',') : protocols)
}

/**
 * A request the hub would send with the node's credential may not ask the apiserver to treat it as
 * someone else: impersonation rides on the credential that sends it, so a local process could
 * borrow whatever the node's credential may impersonate (with a credential that may, system:masters).
 * With a token of its own, the apiserver decides, as it would for the client directly.
 */
export function impersonationProblem(headers: IncomingHttpHeaders): Status | undefined {
  if (ownCredentials(headers)) return undefined
  for (const name in headers) {
    if (name.startsWith('impersonate-'))
      return failure(403, `Forbidden: ${name} needs the client's own credentials; the hub sends the node's, which impersonate no one`, 'Forbidden')
  }
  return undefined
}
