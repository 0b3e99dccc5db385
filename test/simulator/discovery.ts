// Legacy discovery (/api, /apis, /api/v1, /apis/<group>[/<version>]) and /version, enough for
// kubectl and client-go. Aggregated discovery is not served: the plain JSON answer makes clients
// fall back to these documents.

import type { ResourceEntry, ResourceRegistry } from './resources.ts'

export const versionInfo = {
  major: '1',
  minor: '24',
  gitVersion: 'v1.24.0',
  gitCommit: '4ce5a8954017644c5420bae81d72b09b735c21f0',
  gitTreeState: 'clean',
  buildDate: '2022-05-03T13:38:19Z',
  goVersion: 'go1.18.1',
  compiler: 'gc',
  platform: 'linux/amd64',
}

const allVerbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']

function apiResources(entries: ResourceEntry[]): any[] {
  const out: any[] = []
  for (const e of [...entries].sort((a, b) => a.resource.localeCompare(b.resource))) {
    const r: any = {
      name: e.resource,
      singularName: e.singular,
      namespaced: e.namespaced,
      kind: e.kind,
      verbs: e.resource === 'namespaces' ? allVerbs.filter(v => v !== 'deletecollection') : allVerbs,
    }
    if (e.shortNames.length > 0) r.shortNames = e.shortNames
    if (e.categories.length > 0) r.categories = e.categories
    out.push(r)
    for (const sub of [...e.writableSubresources, ...(e.status ? ['status'] : [])]) {
      out.push({ name: `${e.resource}/${sub}`, singularName: '', namespaced: e.namespaced, kind: e.kind, verbs: ['get', 'patch', 'update'] })
    }
    for (const sub of e.connect) {
      const kind = { attach: 'PodAttachOptions', exec: 'PodExecOptions', portforward: 'PodPortForwardOptions' }[sub] ?? e.kind
      out.push({ name: `${e.resource}/${sub}`, singularName: '', namespaced: e.namespaced, kind, verbs: ['create', 'get'] })
    }
  }
  return out
}

function groupDoc(group: string, versions: string[]): any {
  const gv = (v: string) => ({ groupVersion: `${group}/${v}`, version: v })
  return { name: group, versions: versions.map(gv), preferredVersion: gv(versions[0]) }
}

/** The discovery document for a non-resource path, or undefined when it is not a discovery path. */
export function discovery(registry: ResourceRegistry, path: string, serverAddress: string): any | undefined {
  const parts = path.split('/').filter(Boolean)
  if (parts[0] === 'api') {
    if (parts.length === 1) {
      return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] }
    }
    if (parts.length === 2 && parts[1] === 'v1') {
      return { kind: 'APIResourceList', groupVersion: 'v1', resources: apiResources(registry.resourcesOf('', 'v1')) }
    }
    return undefined
  }
  if (parts[0] !== 'apis') return undefined
  const groups = registry.groups().filter(g => g.group !== '')
  if (parts.length === 1) {
    return { kind: 'APIGroupList', apiVersion: 'v1', groups: groups.map(g => groupDoc(g.group, g.versions)) }
  }
  const g = groups.find(x => x.group === parts[1])
  if (!g) return undefined
  if (parts.length === 2) return { kind: 'APIGroup', apiVersion: 'v1', ...groupDoc(g.group, g.versions) }
  if (parts.length === 3 && g.versions.includes(parts[2])) {
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: `${g.group}/${parts[2]}`,
      resources: apiResources(registry.resourcesOf(g.group, parts[2])),
    }
  }
  return undefined
}
