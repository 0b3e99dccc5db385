// What `outpost --version` prints: the version, and the Kubernetes it was tested against.
import { version } from '../lib/observe/build-info.ts'

export { version }

export const versionText: string = [
  `outpost ${version}`,
  'Kubernetes API v1.24: a real kube-apiserver v1.24.0 (its recorded bytes: test/fixtures/apiserver-v1.24)',
  'Kubernetes clients 1.33-1.37: their WatchList and 64-bit integer resourceVersions, as the simulator plays them',
  '',
].join('\n')
