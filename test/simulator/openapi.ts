// A minimal OpenAPI v3 surface: for each served group/version, the PATCH operations with their
// x-kubernetes-group-version-kind and the fieldValidation query parameter. That is what kubectl
// (create/apply, --validate=strict by default) looks for to hand validation to the server instead of
// downloading the full OpenAPI v2 schema, which the simulator does not have.

import { createHash } from 'node:crypto'
import type { ResourceRegistry } from './resources.ts'

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`
}

export function openapiIndex(registry: ResourceRegistry): any {
  const paths: Record<string, { serverRelativeURL: string }> = {}
  for (const { group, versions } of registry.groups()) {
    for (const version of versions) {
      const p = gvPath(group, version)
      const hash = createHash('sha256')
        .update(JSON.stringify(openapiDocument(registry, p)))
        .digest('hex')
        .slice(0, 32)
        .toUpperCase()
      paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=${hash}` }
    }
  }
  return { paths }
}

/** The document for `api/v1` or `apis/<group>/<version>`, or undefined. */
export function openapiDocument(registry: ResourceRegistry, path: string): any | undefined {
  const parts = path.split('/').filter(Boolean)
  let group: string
  let version: string
  if (parts[0] === 'api' && parts.length === 2) [group, version] = ['', parts[1]]
  else if (parts[0] === 'apis' && parts.length === 3) [group, version] = [parts[1], parts[2]]
  else return undefined
  const entries = registry.resourcesOf(group, version)
  if (entries.length === 0) return undefined
  const paths: Record<string, unknown> = {}
  for (const e of entries) {
    const scope = e.namespaced ? 'namespaces/{namespace}/' : ''
    paths[`/${gvPath(group, version)}/${scope}${e.resource}/{name}`] = {
      patch: {
        description: `partially update the specified ${e.kind}`,
        operationId: `patch${e.kind}`,
        'x-kubernetes-action': 'patch',
        'x-kubernetes-group-version-kind': { group, version, kind: e.kind },
        parameters: [
          { name: 'dryRun', in: 'query', schema: { type: 'string', uniqueItems: true } },
          { name: 'fieldManager', in: 'query', schema: { type: 'string', uniqueItems: true } },
          { name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } },
        ],
        responses: { '200': { description: 'OK' } },
      },
    }
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.24.0' }, paths, components: { schemas: {} } }
}
