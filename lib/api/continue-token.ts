// The apiserver's list continue token: base64url of {"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"},
// where <key> is the storage key after the resource's prefix (`<namespace>/<name>`, or `<name>` for
// cluster-scoped objects). The hub reads and writes the same tokens, so a client that began paging
// against the cloud can go on against the cache, and the other way round.

export interface ContinueToken {
  /** the version every page is read at; negative (in the token of a 410 Expired): the latest */
  rv: number
  /** the storage key to start from (inclusive): the last key returned, plus "\u0000" */
  start: string
}

export function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: token.rv, start: token.start })).toString('base64url')
}

/** The token, or the apiserver's message for a bad one (the caller answers 400). */
export function decodeContinue(token: string): ContinueToken | string {
  const invalid = (why: string) => `invalid continue token: continue key is not valid: ${why}`
  const bad = token.search(/[^A-Za-z0-9_=-]/)
  if (bad !== -1) return invalid(`illegal base64 data at input byte ${bad}`)
  let parsed: { v?: unknown; rv?: unknown; start?: unknown }
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'))
  } catch (error) {
    return invalid((error as Error).message)
  }
  if (parsed === null || typeof parsed !== 'object' || parsed.v !== 'meta.k8s.io/v1') return invalid('server does not recognize this encoded version')
  if (!Number.isSafeInteger(parsed.rv) || parsed.rv === 0) return invalid('incorrect encoded start resourceVersion (version meta.k8s.io/v1)')
  if (typeof parsed.start !== 'string' || parsed.start === '') return invalid('encoded start key empty (version meta.k8s.io/v1)')
  return { rv: parsed.rv as number, start: parsed.start }
}

/** An object's storage key, in the order the apiserver lists (bytewise). */
export function storageKey(namespace: string, name: string): string {
  return namespace ? `${namespace}/${name}` : name
}
