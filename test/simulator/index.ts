// The apiserver simulator: one stand-in for kube-apiserver v1.24 for tests and the demo.
export { ApiServerSimulator } from './server.ts'
export type { SimulatorOptions, Fault, LoggedRequest, RequestFilter } from './server.ts'
export type { ResourceType, ResourceEntry } from './resources.ts'
export { ApiError } from './errors.ts'
export { startDemoCluster } from './demo.ts'
