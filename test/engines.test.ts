// `npm ci` on the oldest Node the project says it runs on (package.json engines) installs every
// package without an EBADENGINE warning: each package the lock installs, dev ones too, accepts
// that Node. fastify's light-my-request 6.8 brought cookie 2, which wants Node 22, onto Node 20
// machines; package.json's overrides keep light-my-request at 6.6 (cookie 1).
import t from 'tap'
import { readFileSync } from 'node:fs'
// semver comes with fastify (a runtime dependency), so it is not declared as a dev dependency:
// test/build.e2e.ts checks that no dev dependency is bundled, and the bundle holds fastify's
import semver from 'semver'

const root = new URL('..', import.meta.url)
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8'))

t.test('every package the lock installs accepts the oldest Node of package.json engines', async t => {
  const oldest = semver.minVersion(pkg.engines.node)!.version
  t.ok(semver.satisfies(process.version, pkg.engines.node), `this Node (${process.version}) is one package.json accepts`)
  const refused = Object.entries(lock.packages as Record<string, { engines?: { node?: unknown } }>)
    .filter(([name, p]) => name !== '' && typeof p.engines?.node === 'string' && !semver.satisfies(oldest, p.engines.node))
    .map(([name, p]) => `${name.replace(/^.*node_modules\//, '')} wants node ${String(p.engines!.node)}`)
  t.same(refused, [], `every locked package runs on node ${oldest}`)
})
