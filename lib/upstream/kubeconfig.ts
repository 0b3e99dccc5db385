// The node's credentials towards the apiserver, read from a kubeconfig the way client-go reads one:
// the current context's cluster and user; `*-data` fields inline (base64), other paths relative to
// the kubeconfig's own directory. One file (no KUBECONFIG merging), no exec or auth-provider plugins.
//
// Error messages name the file and the field, never a value: a kubeconfig holds tokens and keys.

import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { parse, YAMLParseError } from 'yaml'

export interface UpstreamCredentials {
  server?: string
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
  token?: string
  insecureSkipTLSVerify?: boolean
}

export class KubeconfigError extends Error {
  override name = 'KubeconfigError'
}

type Obj = Record<string, unknown>

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** "no such file or directory (ENOENT)" from a Node fs error, without the rest of its message. */
function fsReason(err: unknown): string {
  const e = err as NodeJS.ErrnoException
  const m = /^(E[A-Z]+): ([^,]+)/.exec(e?.message ?? '')
  if (m) return `${m[2]} (${m[1]})`
  return e?.code ?? 'unknown error'
}

export async function loadKubeconfig(file: string): Promise<UpstreamCredentials> {
  const absolute = path.resolve(file)
  const dir = path.dirname(absolute)
  const fail = (what: string): never => {
    throw new KubeconfigError(`kubeconfig ${file}: ${what}`)
  }

  let text: string
  try {
    text = await readFile(absolute, 'utf8')
  } catch (err) {
    return fail(`cannot read: ${fsReason(err)}`)
  }

  let doc: unknown
  try {
    // warnings (which quote the file) are not printed; errors throw and are reported by position
    doc = parse(text, { logLevel: 'error' })
  } catch (err) {
    // the parser's message quotes the offending line, which may hold a token: report the position only
    if (err instanceof YAMLParseError) {
      const at = err.linePos ? ` at line ${err.linePos[0].line}, column ${err.linePos[0].col}` : ''
      return fail(`not valid YAML${at} (${err.code})`)
    }
    return fail('not valid YAML')
  }
  if (!isObj(doc)) return fail('not a kubeconfig (expected a mapping with clusters, contexts and users)')

  const str = (v: unknown, what: string): string | undefined => {
    if (v === undefined || v === null) return undefined
    if (typeof v !== 'string') return fail(`${what} must be a string`)
    return v
  }
  const name = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined)

  /** The entry called `wanted` in the named list (`clusters`, `contexts`, `users`), or undefined. */
  const find = (list: 'clusters' | 'contexts' | 'users', field: string, wanted: string): Obj | undefined => {
    const entries = doc[list]
    if (entries === undefined || entries === null) return undefined
    if (!Array.isArray(entries)) return fail(`${list} must be a list`)
    for (const entry of entries) {
      if (isObj(entry) && name(entry.name) === wanted) {
        const body = entry[field]
        if (body === undefined || body === null) return {}
        if (!isObj(body)) return fail(`${field} "${wanted}" must be a mapping`)
        return body
      }
    }
    return undefined
  }

  const contextName = name(doc['current-context'])
  if (contextName === undefined || contextName === '') return fail('no current-context set')
  const context = find('contexts', 'context', contextName)
  if (context === undefined) return fail(`current-context "${contextName}" not found in contexts`)

  const clusterName = name(context.cluster)
  if (clusterName === undefined || clusterName === '') return fail(`context "${contextName}" names no cluster`)
  const cluster = find('clusters', 'cluster', clusterName)
  if (cluster === undefined) return fail(`cluster "${clusterName}" (of context "${contextName}") not found in clusters`)

  const userName = name(context.user)
  let user: Obj = {}
  if (userName !== undefined && userName !== '') {
    const found = find('users', 'user', userName)
    if (found === undefined) return fail(`user "${userName}" (of context "${contextName}") not found in users`)
    user = found
  }

  /** Inline `<field>-data` (base64) or a file `<field>`, relative to the kubeconfig's directory. */
  const material = async (owner: string, body: Obj, field: string, kind: 'certificate' | 'private key'): Promise<Buffer | undefined> => {
    const dataField = `${field}-data`
    const data = str(body[dataField], `${dataField} of ${owner}`)
    const fileRef = str(body[field], `${field} of ${owner}`)
    if (data !== undefined && data !== '' && fileRef !== undefined && fileRef !== '') {
      return fail(`${owner} sets both ${field} and ${dataField}; use one`)
    }
    let bytes: Buffer
    let where: string
    if (data !== undefined && data !== '') {
      const compact = data.replace(/\s+/g, '')
      if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
        return fail(`${dataField} of ${owner} is not valid base64`)
      }
      bytes = Buffer.from(compact, 'base64')
      where = dataField
    } else if (fileRef !== undefined && fileRef !== '') {
      const resolved = path.resolve(dir, fileRef)
      try {
        bytes = await readFile(resolved)
      } catch (err) {
        return fail(`cannot read ${field} file ${resolved} of ${owner}: ${fsReason(err)}`)
      }
      where = `${field} file ${resolved}`
    } else {
      return undefined
    }
    const pem = bytes.toString('latin1')
    const ok = kind === 'certificate' ? pem.includes('-----BEGIN CERTIFICATE-----') : /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)
    if (!ok) return fail(`${where} of ${owner} holds no PEM ${kind}`)
    return bytes
  }

  const clusterLabel = `cluster "${clusterName}"`
  const userLabel = `user "${userName ?? ''}"`
  const creds: UpstreamCredentials = {}

  const server = str(cluster.server, `server of ${clusterLabel}`)
  if (server !== undefined && server !== '') {
    let url: URL | undefined
    try {
      url = new URL(server)
    } catch {
      url = undefined
    }
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.hostname === '') {
      return fail(`server of ${clusterLabel} is not an http or https URL`)
    }
    creds.server = server
  }

  const insecure = cluster['insecure-skip-tls-verify']
  if (insecure !== undefined && insecure !== null && typeof insecure !== 'boolean') {
    return fail(`insecure-skip-tls-verify of ${clusterLabel} must be true or false`)
  }
  const ca = await material(clusterLabel, cluster, 'certificate-authority', 'certificate')
  if (insecure === true && ca !== undefined) {
    // client-go refuses this combination too: which one did the user mean?
    return fail(`${clusterLabel} sets both insecure-skip-tls-verify and a certificate authority; use one`)
  }
  if (ca !== undefined) creds.ca = ca
  if (insecure === true) creds.insecureSkipTLSVerify = true

  for (const plugin of ['exec', 'auth-provider', 'username', 'password'] as const) {
    if (user[plugin] !== undefined && user[plugin] !== null) {
      return fail(`${userLabel} uses ${plugin}, which outpost does not support; use a client certificate or a token`)
    }
  }
  const cert = await material(userLabel, user, 'client-certificate', 'certificate')
  const key = await material(userLabel, user, 'client-key', 'private key')
  if ((cert === undefined) !== (key === undefined)) {
    return fail(`${userLabel} has a client ${cert ? 'certificate but no client key' : 'key but no client certificate'}`)
  }
  if (cert !== undefined && key !== undefined) {
    creds.cert = cert
    creds.key = key
  }

  // like client-go: an inline token wins over tokenFile
  const token = str(user.token, `token of ${userLabel}`)
  const tokenFile = str(user.tokenFile, `tokenFile of ${userLabel}`)
  if (token !== undefined && token !== '') {
    creds.token = token
  } else if (tokenFile !== undefined && tokenFile !== '') {
    const resolved = path.resolve(dir, tokenFile)
    let content: string
    try {
      content = await readFile(resolved, 'utf8')
    } catch (err) {
      return fail(`cannot read tokenFile ${resolved} of ${userLabel}: ${fsReason(err)}`)
    }
    const trimmed = content.trim()
    if (trimmed === '') return fail(`tokenFile ${resolved} of ${userLabel} is empty`)
    creds.token = trimmed
  }
  return creds
}
