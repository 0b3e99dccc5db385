// Who a request is, in the order kube-apiserver's authenticators run: a verified client certificate
// first (CN = user, O = groups), then a bearer token, else anonymous. The simulator has no token
// database beyond a list, so a token's user is named after its first characters.

import type { IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'
import { tlsSocketOf } from './h2.ts'

export interface Identity {
  username: string
  groups: string[]
}

export const anonymous: Identity = { username: 'system:anonymous', groups: ['system:unauthenticated'] }

export interface AuthConfig {
  /** the valid bearer tokens */
  tokens?: string[]
  /** credentials are checked (tokens set, or client certificates verified); otherwise any token is taken at its word */
  required: boolean
}

const publicPaths = ['/healthz', '/livez', '/readyz', '/version']

/** Paths served to anonymous requests, like `system:public-info-viewer`. */
export function isPublic(path: string): boolean {
  return publicPaths.some(p => path === p || path.startsWith(`${p}/`))
}

/** The request's identity (the `anonymous` object itself when it presented none), or undefined when its credentials are refused. */
export function identify(req: IncomingMessage, config: AuthConfig): Identity | undefined {
  const cert = verifiedPeerCertificate(req)
  if (cert) {
    const cn = cert.subject?.CN
    const o = cert.subject?.O
    const groups = o === undefined ? [] : Array.isArray(o) ? o : [o]
    return { username: (Array.isArray(cn) ? cn[0] : cn) ?? '', groups: [...groups, 'system:authenticated'] }
  }
  const auth = req.headers.authorization
  if (!auth) return anonymous
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(auth)
  if (!bearer) return config.required ? undefined : anonymous
  if (config.required && !(config.tokens ?? []).includes(bearer[1])) return undefined
  return { username: `token:${bearer[1].slice(0, 6)}`, groups: ['system:authenticated'] }
}

function verifiedPeerCertificate(req: IncomingMessage): ReturnType<TLSSocket['getPeerCertificate']> | undefined {
  const sock = tlsSocketOf(req)
  if (!sock.authorized || typeof sock.getPeerCertificate !== 'function') return undefined
  const cert = sock.getPeerCertificate()
  return cert && Object.keys(cert).length > 0 ? cert : undefined
}
