// What `outpost --version` prints: the version, and the Kubernetes it was tested against.
// A JSON import, not a file read at run time: esbuild inlines it into the image's bundle, which has
// no package.json beside it; tsc copies it to dist/ (dist/package.json), and tsx reads it in place.
import pkg from '../package.json' with { type: 'json' }

export const version: string = pkg.version

export const versionText: string = [
  `outpost ${version}`,
  'Kubernetes API v1.24: a real kube-apiserver v1.24.0 (its recorded bytes: test/fixtures/apiserver-v1.24)',
  'Kubernetes clients 1.33-1.37: their WatchList and 64-bit integer resourceVersions, as the simulator plays them',
  '',
].join('\n')
