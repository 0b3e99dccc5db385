// What the OutpostAutonomy condition is decided from, read off the cache: whether it is on and
// durable, whether it is still loading, and whether this node's pods are held whole (a listed
// scope that answers for kubelet's `spec.nodeName=<node>` list, in any component's collection:
// offline, a node's client is answered from whichever holds it).
import type { CacheStore } from '../cache/store.ts'
import { parseScope } from '../cache/scope.ts'
import type { AutonomyFacts } from './condition.ts'

const nodeNameField = 'spec.nodeName'

export function autonomyFacts(store: Pick<CacheStore, 'durability' | 'loading' | 'all'>, nodeName: string, cacheOff?: string): AutonomyFacts {
  const { durable, why } = store.durability()
  const facts: AutonomyFacts = { nodeName, cacheOff, durable, notDurableWhy: why, loading: store.loading, podsSynced: false, nodePods: 0, collections: 0 }
  const nodeScope = parseScope({ namespace: '', labelSelector: '', fieldSelector: `${nodeNameField}=${nodeName}` })
  const pods = new Set<string>()
  for (const collection of store.all()) {
    if (collection.known) facts.collections++
    const { group, resource } = collection.key
    if (group !== '' || resource !== 'pods') continue
    const listed = collection.coveringScope(nodeScope)
    if (!listed) {
      facts.podsIncomplete ??= collection.whyIncomplete(nodeScope)
      continue
    }
    facts.podsSynced = true
    for (const [id, { meta }] of collection.entries) if (meta.fields?.[nodeNameField] === nodeName || meta.scopes?.includes(nodeScope.id)) pods.add(id)
  }
  facts.nodePods = pods.size
  if (facts.podsSynced) facts.podsIncomplete = undefined
  return facts
}
