// What every row of the bench is given: the simulator process, the built hub, the sizes of the run.
import type { SimProcess } from './processes.ts'

export interface Counts {
  slices: number
  pods: number
  /** bulk ConfigMaps, so that the cold start has slices + pods + these objects on disk */
  configMaps: number
  /** row 1: seconds per closed-loop measure, rounds, and requests sent one at a time */
  getSeconds: number
  getRounds: number
  latencyRequests: number
  /** row 2: rounds (a fresh hub each) per format */
  listRounds: number
  /** row 3: events per watch measure, rounds */
  watchEvents: number
  watchRounds: number
  /** row 4: watchers, stamped writes and the gap between them */
  watchers: number
  stampedWrites: number
  stampIntervalMs: number
  /** row 5: how long the hub is left alone before its RSS is read */
  settleMs: number
  /** row 5: how long an idle hub is left before its settled RSS is read (V8 shrinks an idle heap some 8 s or more after its last full GC) */
  idleSettledMs: number
  /** row 7: objects in the burst */
  burst: number
  /** row 8: hubs in the fleet, and how long each outage lasts */
  fleetHubs: number
  fleetOutageMs: number
  /** bundle rows: rounds of each measure, the bundle and dist/ alternating which goes first */
  bundleRounds: number
}

export const fullCounts: Counts = {
  slices: 10_000,
  pods: 5_000,
  configMaps: 5_000,
  getSeconds: 3,
  getRounds: 3,
  latencyRequests: 3_000,
  listRounds: 5,
  watchEvents: 20_000,
  watchRounds: 2,
  watchers: 100,
  stampedWrites: 200,
  stampIntervalMs: 25,
  settleMs: 3_000,
  idleSettledMs: 20_000,
  burst: 5_000,
  fleetHubs: 50,
  fleetOutageMs: 30_000,
  bundleRounds: 3,
}

export const quickCounts: Counts = {
  slices: 1_000,
  pods: 500,
  configMaps: 500,
  getSeconds: 0.4,
  getRounds: 1,
  latencyRequests: 200,
  listRounds: 1,
  watchEvents: 2_000,
  watchRounds: 1,
  watchers: 20,
  stampedWrites: 20,
  stampIntervalMs: 25,
  settleMs: 500,
  idleSettledMs: 1_000,
  burst: 1_000,
  fleetHubs: 3,
  fleetOutageMs: 1_000,
  bundleRounds: 1,
}

export interface Context {
  sim: SimProcess
  /** <build>/cmd/outpost.js */
  hubEntry: string
  /** the image's build: npm run bundle's outpost.mjs, alone in a temp dir (when the bundle group runs) */
  bundleEntry?: string
  counts: Counts
  /** undefined when the simulator speaks protobuf; else why the protobuf rows have no figure */
  noProtobuf?: string
}
