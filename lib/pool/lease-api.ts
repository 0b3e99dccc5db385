// The pool's Lease on the apiserver, read and written with the node's credentials: what
// LeaseElection needs and nothing more. A 409 (AlreadyExists on create, Conflict on a stale
// resourceVersion) is a lost race, LeaseConflictError; anything else is an error that says why.
import { resourcePath } from '../api/paths.ts'
import { LeaseConflictError } from './lease-election.ts'
import type { LeaseApi, LeaseRecord, StoredLease } from './lease-election.ts'

export type JsonCall = (method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown) => Promise<{ statusCode: number; body: any }>

function stored(body: any): StoredLease {
  const spec = body?.spec ?? {}
  return {
    record: {
      holderIdentity: spec.holderIdentity ?? '',
      leaseDurationSeconds: Number(spec.leaseDurationSeconds) || 0,
      acquireTime: spec.acquireTime ?? '',
      renewTime: spec.renewTime ?? '',
      leaseTransitions: Number(spec.leaseTransitions) || 0,
    },
    resourceVersion: String(body?.metadata?.resourceVersion ?? ''),
    annotations: { ...(body?.metadata?.annotations ?? {}) },
  }
}

function failed(what: string, answer: { statusCode: number; body: any }): Error {
  if (answer.statusCode === 409) return new LeaseConflictError(`${what}: ${answer.body?.message ?? 'conflict'}`)
  return new Error(`${what}: HTTP ${answer.statusCode}${answer.body?.message ? `: ${answer.body.message}` : ''}`)
}

export function leaseApi(call: JsonCall, namespace: string, name: string): LeaseApi {
  const collection = resourcePath({ group: 'coordination.k8s.io', version: 'v1', namespace, resource: 'leases' })
  const path = resourcePath({ group: 'coordination.k8s.io', version: 'v1', namespace, resource: 'leases', name })
  const object = (record: LeaseRecord, annotations: Record<string, string>, resourceVersion?: string) => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, annotations, ...(resourceVersion ? { resourceVersion } : {}) },
    spec: record,
  })
  return {
    async get() {
      const answer = await call('GET', path)
      if (answer.statusCode === 404) return undefined
      if (answer.statusCode !== 200) throw failed(`reading Lease ${namespace}/${name}`, answer)
      return stored(answer.body)
    },
    async create(record, annotations) {
      const answer = await call('POST', collection, object(record, annotations))
      if (answer.statusCode !== 201 && answer.statusCode !== 200) throw failed(`creating Lease ${namespace}/${name}`, answer)
      return stored(answer.body)
    },
    async update(record, annotations, resourceVersion) {
      const answer = await call('PUT', path, object(record, annotations, resourceVersion))
      if (answer.statusCode !== 200) throw failed(`renewing Lease ${namespace}/${name}`, answer)
      return stored(answer.body)
    },
  }
}
