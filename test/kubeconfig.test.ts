import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import { KubeconfigError, loadKubeconfig, type UpstreamCredentials } from '../lib/upstream/kubeconfig.ts'
import { createTestPki, writeKubeconfig, type TestPki } from './helpers/pki.ts'

const TOKEN = 'abcdef.0123456789abcdef-SECRET-TOKEN'

let pki: TestPki
t.before(async () => {
  pki = await createTestPki()
})

/** a fresh temp dir outside the repository, removed after the test */
async function tempdir(t: Tap): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-kubeconfig-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** A kubeconfig from parts: one cluster `c`, one user `u`, context `ctx` current. */
function kubeconfig(cluster: Record<string, unknown>, user?: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'ctx',
    clusters: [{ name: 'c', cluster }],
    users: user ? [{ name: 'u', user }] : [],
    contexts: [{ name: 'ctx', context: user ? { cluster: 'c', user: 'u' } : { cluster: 'c' } }],
    ...extra,
  }
}

async function write(dir: string, content: unknown, name = 'kubeconfig'): Promise<string> {
  const file = path.join(dir, name)
  await writeFile(file, typeof content === 'string' ? content : stringify(content))
  return file
}

const b64 = (s: string) => Buffer.from(s).toString('base64')

async function loadError(t: Tap, file: string): Promise<string> {
  try {
    await loadKubeconfig(file)
  } catch (err) {
    t.type(err, KubeconfigError)
    const message = (err as Error).message
    t.ok(message.startsWith(`kubeconfig ${file}: `), `names the file: ${message}`)
    t.notMatch(message, /[\r\n]/, 'one line')
    t.notMatch(message, /SECRET/, 'no secret in the message')
    t.notMatch(message, /PRIVATE KEY|BEGIN/, 'no PEM in the message')
    return message.slice(`kubeconfig ${file}: `.length)
  }
  t.fail('loaded without error')
  return ''
}

function checkFull(t: Tap, creds: UpstreamCredentials) {
  t.equal(creds.server, 'https://127.0.0.1:6443')
  t.equal(creds.ca?.toString(), pki.ca.cert)
  t.equal(creds.cert?.toString(), pki.client.cert)
  t.equal(creds.key?.toString(), pki.client.key)
  t.equal(creds.token, TOKEN)
  t.equal(creds.insecureSkipTLSVerify, undefined)
  t.ok(Buffer.isBuffer(creds.ca) && Buffer.isBuffer(creds.cert) && Buffer.isBuffer(creds.key))
}

t.test('inline *-data fields and token', async t => {
  const dir = await tempdir(t)
  const file = await writeKubeconfig(dir, {
    server: 'https://127.0.0.1:6443',
    ca: pki.ca.cert,
    cert: pki.client.cert,
    key: pki.client.key,
    token: TOKEN,
    inline: true,
  })
  checkFull(t, await loadKubeconfig(file))
})

t.test('files referenced by relative paths, resolved against the kubeconfig directory', async t => {
  const dir = await tempdir(t)
  const file = await writeKubeconfig(path.join(dir, 'etc', 'outpost'), {
    server: 'https://127.0.0.1:6443',
    ca: pki.ca.cert,
    cert: pki.client.cert,
    key: pki.client.key,
    token: TOKEN,
    inline: false,
  })
  t.not(process.cwd(), path.dirname(file), 'the working directory is elsewhere')
  checkFull(t, await loadKubeconfig(file)) // tokenFile: trailing newline trimmed

  // the same kubeconfig through a relative path of its own
  const relative = path.relative(process.cwd(), file)
  checkFull(t, await loadKubeconfig(relative))
})

t.test('absolute file paths', async t => {
  const dir = await tempdir(t)
  await mkdir(path.join(dir, 'pki'))
  const abs = (n: string) => path.join(dir, 'pki', n)
  await writeFile(abs('ca.crt'), pki.ca.cert)
  await writeFile(abs('c.crt'), pki.client.cert)
  await writeFile(abs('c.key'), pki.client.key)
  const file = await write(
    path.join(dir),
    kubeconfig(
      { server: 'https://127.0.0.1:6443', 'certificate-authority': abs('ca.crt') },
      { 'client-certificate': abs('c.crt'), 'client-key': abs('c.key') },
    ),
  )
  const creds = await loadKubeconfig(file)
  t.equal(creds.ca?.toString(), pki.ca.cert)
  t.equal(creds.cert?.toString(), pki.client.cert)
  t.equal(creds.key?.toString(), pki.client.key)
  t.equal(creds.token, undefined)
})

t.test('the credentials work for mutual TLS against a server of the test PKI', async t => {
  const dir = await tempdir(t)
  const server = https.createServer(
    { cert: pki.server.cert, key: pki.server.key, ca: pki.ca.cert, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate()
      res.end(JSON.stringify({ cn: peer.subject.CN, o: peer.subject.O, auth: req.headers.authorization ?? null }))
    },
  )
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo

  for (const inline of [true, false]) {
    const file = await writeKubeconfig(path.join(dir, String(inline)), {
      server: `https://127.0.0.1:${port}`,
      ca: pki.ca.cert,
      cert: pki.client.cert,
      key: pki.client.key,
      inline,
    })
    const creds = await loadKubeconfig(file)
    for (const host of ['127.0.0.1', 'localhost']) {
      const body = await new Promise<string>((resolve, reject) => {
        const url = new URL(creds.server as string)
        url.hostname = host
        https
          .get(url, { ca: creds.ca, cert: creds.cert, key: creds.key }, res => {
            let data = ''
            res.on('data', chunk => (data += chunk))
            res.on('end', () => resolve(data))
          })
          .on('error', reject)
      })
      t.strictSame(JSON.parse(body), { cn: 'system:node:kind-worker2', o: 'system:nodes', auth: null }, `inline=${inline} via ${host}`)
    }
  }
})

t.test('token and tokenFile', async t => {
  const dir = await tempdir(t)
  await writeFile(path.join(dir, 'token'), `  ${TOKEN}\r\n\n`)
  const cluster = { server: 'https://127.0.0.1:6443' }

  let creds = await loadKubeconfig(await write(dir, kubeconfig(cluster, { tokenFile: 'token' })))
  t.equal(creds.token, TOKEN, 'tokenFile, relative, whitespace trimmed')
  t.equal(creds.cert, undefined)

  creds = await loadKubeconfig(await write(dir, kubeconfig(cluster, { token: 'inline-token', tokenFile: 'token' })))
  t.equal(creds.token, 'inline-token', 'an inline token wins over tokenFile, as in client-go')

  creds = await loadKubeconfig(
    await write(dir, kubeconfig(cluster, { tokenFile: 'token', 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64(pki.client.key) })),
  )
  t.equal(creds.token, TOKEN, 'a token beside a client certificate')
  t.equal(creds.cert?.toString(), pki.client.cert)
})

t.test('cluster settings', async t => {
  const dir = await tempdir(t)
  let creds = await loadKubeconfig(await write(dir, kubeconfig({ server: 'https://10.0.0.1:6443', 'insecure-skip-tls-verify': true })))
  t.strictSame(creds, { server: 'https://10.0.0.1:6443', insecureSkipTLSVerify: true })

  creds = await loadKubeconfig(await write(dir, kubeconfig({ server: 'https://10.0.0.1:6443', 'insecure-skip-tls-verify': false })))
  t.strictSame(creds, { server: 'https://10.0.0.1:6443' }, 'no user, no credentials: anonymous')

  creds = await loadKubeconfig(await write(dir, kubeconfig({ 'certificate-authority-data': b64(pki.ca.cert) }, { token: 'x' })))
  t.equal(creds.server, undefined, 'server is optional (it may come from --server)')
  t.equal(creds.ca?.toString(), pki.ca.cert)

  // base64 wrapped over lines, as some tools write it
  const wrapped = b64(pki.ca.cert).replace(/(.{64})/g, '$1\n')
  creds = await loadKubeconfig(
    await write(
      dir,
      `apiVersion: v1\ncurrent-context: ctx\nclusters:\n- name: c\n  cluster:\n    certificate-authority-data: |\n${wrapped
        .split('\n')
        .map(l => `      ${l}`)
        .join('\n')}\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n`,
    ),
  )
  t.equal(creds.ca?.toString(), pki.ca.cert, 'base64 over several lines')
})

t.test('picks the current context among several', async t => {
  const dir = await tempdir(t)
  const file = await write(dir, {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'edge',
    clusters: [
      { name: 'cloud', cluster: { server: 'https://cloud:6443' } },
      { name: 'hub', cluster: { server: 'https://hub:6443', 'insecure-skip-tls-verify': true } },
    ],
    users: [
      { name: 'admin', user: { token: 'admin-token' } },
      { name: 'node', user: { token: 'node-token' } },
    ],
    contexts: [
      { name: 'admin', context: { cluster: 'cloud', user: 'admin' } },
      { name: 'edge', context: { cluster: 'hub', user: 'node', namespace: 'kube-system' } },
    ],
  })
  t.strictSame(await loadKubeconfig(file), { server: 'https://hub:6443', insecureSkipTLSVerify: true, token: 'node-token' })
})

t.test('a JSON kubeconfig', async t => {
  const dir = await tempdir(t)
  const file = await write(dir, JSON.stringify(kubeconfig({ server: 'https://10.0.0.1:6443' }, { token: 'json-token' })))
  t.strictSame(await loadKubeconfig(file), { server: 'https://10.0.0.1:6443', token: 'json-token' })
})

t.test('errors name the file and the problem, never a secret', async t => {
  const dir = await tempdir(t)
  const server = 'https://127.0.0.1:6443'
  const secretB64 = b64(`-----BEGIN PRIVATE KEY-----\nSECRET\n-----END PRIVATE KEY-----\n`)
  const cases: [string, unknown, RegExp][] = [
    [
      'invalid YAML with a token in it',
      `current-context: ctx\nusers:\n- name: u\n  user:\n    token: SECRET: [\n`,
      /^not valid YAML at line \d+, column \d+ \([A-Z_]+\)$/,
    ],
    ['not a mapping', '- a\n- b\n', /^not a kubeconfig/],
    ['empty file', '', /^not a kubeconfig/],
    ['no current-context', { ...kubeconfig({ server }), 'current-context': undefined }, /^no current-context set$/],
    ['empty current-context', { ...kubeconfig({ server }), 'current-context': '' }, /^no current-context set$/],
    ['context not found', { ...kubeconfig({ server }), 'current-context': 'other' }, /^current-context "other" not found in contexts$/],
    ['contexts not a list', { ...kubeconfig({ server }), contexts: { ctx: {} } }, /^contexts must be a list$/],
    ['cluster not found', { ...kubeconfig({ server }), clusters: [] }, /^cluster "c" \(of context "ctx"\) not found in clusters$/],
    ['context without cluster', { ...kubeconfig({ server }), contexts: [{ name: 'ctx', context: { user: 'u' } }] }, /^context "ctx" names no cluster$/],
    ['user not found', { ...kubeconfig({ server }, { token: 'SECRET' }), users: [] }, /^user "u" \(of context "ctx"\) not found in users$/],
    [
      'bad base64',
      kubeconfig({ server }, { 'client-certificate-data': b64(pki.client.cert), 'client-key-data': 'SECRET!!not*base64' }),
      /^client-key-data of user "u" is not valid base64$/,
    ],
    ['bad base64 length', kubeconfig({ server, 'certificate-authority-data': 'abc' }), /^certificate-authority-data of cluster "c" is not valid base64$/],
    [
      'data that is not PEM',
      kubeconfig({ server }, { 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64('SECRET') }),
      /^client-key-data of user "u" holds no PEM private key$/,
    ],
    [
      'CA data that is PEM text, not base64',
      kubeconfig({ server, 'certificate-authority-data': pki.ca.cert }),
      /^certificate-authority-data of cluster "c" is not valid base64$/,
    ],
    [
      'double base64',
      kubeconfig({ server, 'certificate-authority-data': b64(b64(pki.ca.cert)) }),
      /^certificate-authority-data of cluster "c" holds no PEM certificate$/,
    ],
    [
      'missing CA file',
      kubeconfig({ server, 'certificate-authority': 'pki/nope.crt' }),
      /^cannot read certificate-authority file .*\/pki\/nope\.crt of cluster "c": no such file or directory \(ENOENT\)$/,
    ],
    [
      'missing key file',
      kubeconfig({ server }, { 'client-certificate-data': b64(pki.client.cert), 'client-key': 'missing.key' }),
      /^cannot read client-key file .*\/missing\.key of user "u": no such file or directory \(ENOENT\)$/,
    ],
    [
      'key file is a directory',
      kubeconfig({ server }, { 'client-certificate-data': b64(pki.client.cert), 'client-key': '.' }),
      /^cannot read client-key file .* of user "u": illegal operation on a directory \(EISDIR\)$/,
    ],
    [
      'missing tokenFile',
      kubeconfig({ server }, { tokenFile: 'no-token' }),
      /^cannot read tokenFile .*\/no-token of user "u": no such file or directory \(ENOENT\)$/,
    ],
    ['empty tokenFile', kubeconfig({ server }, { tokenFile: 'empty-token' }), /^tokenFile .*\/empty-token of user "u" is empty$/],
    [
      'certificate without key',
      kubeconfig({ server }, { 'client-certificate-data': b64(pki.client.cert) }),
      /^user "u" has a client certificate but no client key$/,
    ],
    ['key without certificate', kubeconfig({ server }, { 'client-key-data': secretB64 }), /^user "u" has a client key but no client certificate$/],
    [
      'both data and file',
      kubeconfig({ server, 'certificate-authority': 'ca.crt', 'certificate-authority-data': b64(pki.ca.cert) }),
      /^cluster "c" sets both certificate-authority and certificate-authority-data; use one$/,
    ],
    [
      'exec plugin',
      kubeconfig({ server }, { exec: { command: 'aws', args: ['SECRET'] } }),
      /^user "u" uses exec, which outpost does not support; use a client certificate or a token$/,
    ],
    ['auth-provider', kubeconfig({ server }, { 'auth-provider': { name: 'oidc' } }), /^user "u" uses auth-provider, which outpost does not support/],
    ['basic auth', kubeconfig({ server }, { username: 'admin', password: 'SECRET' }), /^user "u" uses username, which outpost does not support/],
    [
      'insecure with a CA',
      kubeconfig({ server, 'insecure-skip-tls-verify': true, 'certificate-authority-data': b64(pki.ca.cert) }),
      /^cluster "c" sets both insecure-skip-tls-verify and a certificate authority; use one$/,
    ],
    ['insecure not a boolean', kubeconfig({ server, 'insecure-skip-tls-verify': 'yes' }), /^insecure-skip-tls-verify of cluster "c" must be true or false$/],
    ['server not a URL', kubeconfig({ server: '10.0.0.1:6443' }), /^server of cluster "c" is not an http or https URL$/],
    ['token not a string', kubeconfig({ server }, { token: 12345 }), /^token of user "u" must be a string$/],
    ['user not a mapping', { ...kubeconfig({ server }, { token: 'x' }), users: [{ name: 'u', user: 'SECRET' }] }, /^user "u" must be a mapping$/],
  ]
  await writeFile(path.join(dir, 'empty-token'), '\n')
  for (const [what, content, want] of cases) {
    const file = await write(dir, content, `${what.replace(/\W+/g, '-')}.yaml`)
    t.match(await loadError(t, file), want, what)
  }

  const missing = path.join(dir, 'does-not-exist')
  t.match(await loadError(t, missing), /^cannot read: no such file or directory \(ENOENT\)$/, 'missing kubeconfig')
})
