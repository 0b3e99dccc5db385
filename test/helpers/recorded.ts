// Recorded apiserver objects loaded into the simulator as a client would have written them.
import type { ApiServerSimulator } from '../simulator/index.ts'

/** A recorded object as a client would have written it: no server-assigned metadata. */
export function asWritten(obj: any, apiVersion: string, kind: string): any {
  const { uid: _u, resourceVersion: _r, creationTimestamp: _c, generation: _g, managedFields: _m, ...meta } = obj.metadata
  return { ...obj, apiVersion, kind, metadata: meta }
}

/** Every item of a recorded list, created in the simulator. */
export function loadList(sim: ApiServerSimulator, list: any): void {
  const kind = list.kind.replace(/List$/, '')
  for (const item of list.items) sim.create(asWritten(item, list.apiVersion, kind))
}
