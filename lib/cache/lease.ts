// The node's Lease while the cloud is away. kubelet renews it every 10 s and restarts its node
// status loop when renewals fail, so an offline renewal is acknowledged (lib/front/offline-answerer.ts);
// kubelet builds each renewal from the previous answer, so one built from another version than the
// last the apiserver acknowledged is the apiserver's 409 Conflict (kubelet then reads the Lease
// again, from the cache, and renews from that).
import type { RequestInfo } from '../api/requestinfo.ts'
import { failure } from '../api/status.ts'
import type { Status } from '../api/status.ts'
import type { CacheStore } from './store.ts'
import { decodeObject, formatOf } from './decode.ts'
import { resourceKeyOf } from './types.ts'
import { numericVersion } from './versions.ts'

export function isOwnLeaseRenewal(info: RequestInfo, nodeName: string): boolean {
  return (
    info.verb === 'update' &&
    info.apiGroup === 'coordination.k8s.io' &&
    info.resource === 'leases' &&
    info.namespace === 'kube-node-lease' &&
    info.name === nodeName
  )
}

/** The 409 a renewal gets when built from another version than the newest cached; undefined: acknowledge it. */
export async function leaseConflict(store: CacheStore, info: RequestInfo, contentType: string | undefined, body: Buffer): Promise<Status | undefined> {
  const format = formatOf(contentType ?? 'application/json')
  if (!format) return undefined
  let sent: string
  try {
    sent = decodeObject(format, body).resourceVersion
  } catch {
    return undefined // not the cache's to judge: acknowledged as before
  }
  let held = ''
  for (const c of await store.candidates(resourceKeyOf(info))) {
    const lease = await store.get(c.key, info.namespace, info.name).catch(() => undefined)
    if (lease && numericVersion(lease.resourceVersion) > numericVersion(held)) held = lease.resourceVersion
  }
  if (!held || !sent || sent === held) return undefined
  return failure(
    409,
    `Operation cannot be fulfilled on leases.coordination.k8s.io "${info.name}": the object has been modified; please apply your changes to the latest version and try again`,
    'Conflict',
    { name: info.name, group: 'coordination.k8s.io', kind: 'leases' },
  )
}
