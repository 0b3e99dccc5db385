// Run before `npm test` (the pretest script). tap rebuilds its Test class when the configured
// plugins differ from the ones it was built with (package.json drops @tapjs/typescript: tsx loads
// the TypeScript), but only after the runner has chosen the loaders of the test processes: the
// first run after `npm ci` would still start every test process with ts-node loaded too (+1 s
// each, ~130 s for the suite). Building here first makes the first run like every other one.
import { spawnSync } from 'node:child_process'
import { TapConfig } from '@tapjs/config'
import { signature } from '@tapjs/test'

const config = await TapConfig.load()
if (signature !== config.pluginSignature) {
  const build = spawnSync('npx', ['tap', 'build'], { stdio: 'inherit' })
  process.exit(build.status ?? 1)
}
