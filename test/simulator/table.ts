// The simulator's Tables are the hub's (lib/api/tables.ts): one set of printers, checked against the
// recorded apiserver Table in test/simulator-fixtures.test.ts.
import { toTable as tableOf } from '../../lib/api/tables.ts'
import type { IncludeObject } from '../../lib/api/tables.ts'
import type { ResourceEntry } from './resources.ts'

export type { IncludeObject } from '../../lib/api/tables.ts'

export function toTable(entry: ResourceEntry, objects: any[], listMeta: Record<string, unknown>, include: IncludeObject): any {
  const [group, resource] = entry.storageKey.split('/')
  return tableOf(group, resource, objects, listMeta, include)
}
