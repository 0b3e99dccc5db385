// `npm run bench:smoke`: the quick bench, run to its end, must still produce a number for every row.
// It keeps the bench from rotting (CI runs it after the tests); no figure is judged against its
// target here (a loaded machine must not fail it): timing is the bench's report, not a check.
import type { Results, Row } from './report.ts'

/** Every row the bench prints, by id. */
export const expectedRows = [
  'link.connections',
  'link.connections-many',
  'link.online-after-outage',
  'link.connections-after-outage',
  'link.get.relayed',
  'link.get.relayed-cpu',
  'link.idle-bytes',
  'get.throughput',
  'get.added-p99',
  'get.cached',
  'get.floor',
  'list.json.first',
  'list.json.relist',
  'list.json.pass-through',
  'list.protobuf.first',
  'list.protobuf.relist',
  'list.protobuf.pass-through',
  'watch.json.recorded',
  'watch.json.pass-through',
  'watch.protobuf.recorded',
  'watch.protobuf.pass-through',
  'watchers.p99',
  'rss.idle',
  'rss.idle-floor',
  'rss.loaded',
  'rss.list-over-cap',
  'rss.list-over-cap.first',
  'coldstart',
  'bundle.rss.idle',
  'bundle.rss.start-peak',
  'bundle.coldstart',
  'kill.lost',
  'kill.load-errors',
  'disk.compaction-kill.lost',
  'disk.compaction-kill.scope',
  'disk.damaged-coldstart',
  'fleet.watches',
  'fleet.relists',
  'fleet.relists-410',
  'fleet.client-relists',
  'fleet.bytes',
  'multiplexer.selectors.upstream-watches',
  'multiplexer.selectors.rss',
  'multiplexer.selectors.series',
  'multiplexer.get.node',
  'multiplexer.list.unfiltered.json',
  'multiplexer.list.unfiltered.protobuf',
  'multiplexer.list.kube-proxy.protobuf',
  'multiplexer.list.consistent.json',
  'attack.unread.rss',
  'attack.unread.stalled-fds',
  'attack.unread.get-p99',
  'attack.unread.event-delay',
  'attack.watches.kubelet.per-watch',
  'attack.watches.kubelet.get-p99',
  'attack.watches.kube-proxy.per-watch',
  'attack.watches.initial-events.per-watch',
  'attack.paged.rss',
  'attack.connections.rss',
  'attack.connections.fds',
  'pool.bytes-steady',
  'pool.bytes',
  'pool.watches',
  'pool.client-lists',
  'pool.resync',
  'reboot.status-to-event.json',
  'reboot.status-to-event.protobuf',
  'reboot.status-to-event-many-slices.json',
  'reboot.status-to-event-many-slices.protobuf',
]

/** The rows of each group whose ids do not start with the group's own (BENCH_ONLY names groups). */
const rowsOfGroup: Record<string, string[]> = { memory: ['rss.', 'coldstart'] }
const inGroups = (id: string, groups: string[]): boolean =>
  groups.some(g => (rowsOfGroup[g] ?? [`${g}.`]).some(prefix => id === prefix || id.startsWith(prefix)))

const measured = (row: Row): boolean => Number.isFinite(row.hub) && Number.isFinite(row.baseline)

/**
 * What keeps a run from counting as whole: rows missing or extra (a group that failed), rows without
 * a number. `only`: the groups run (BENCH_ONLY), whose rows alone are expected.
 */
export function smokeProblems(results: Results, only?: string[]): string[] {
  const problems: string[] = []
  const ids = new Set(results.rows.map(r => r.id))
  for (const id of expectedRows) if (!ids.has(id) && (only === undefined || inGroups(id, only))) problems.push(`${id}: no row`)
  // the real apiserver's rows (group 15) run only where its binary is given: present or not, both are whole
  for (const id of ids)
    if (!expectedRows.includes(id) && !id.startsWith('real.'))
      problems.push(`${id}: a row the smoke does not know (a group failed, or smoke.ts needs the new row)`)
  for (const row of results.rows) {
    // a protobuf row has no figure while the simulator speaks no protobuf, and says so
    if (row.na !== undefined && row.protobuf && !results.simulatorSpeaksProtobuf) continue
    if (!measured(row)) problems.push(`${row.id}: no number for the hub and its baseline${row.na ? ` (${row.na})` : ''}`)
  }
  if (results.inProcess.length === 0 && (only === undefined || only.includes('in-process'))) problems.push('no in-process filter rows')
  for (const row of results.inProcess) if (!measured(row)) problems.push(`${row.id}: no number for the in-process row${row.na ? ` (${row.na})` : ''}`)
  return problems
}
