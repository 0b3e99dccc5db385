// When the OutpostAutonomy condition is read from or written to the Node: a pure decision over the
// writer's state, so the anti-flap rules are one table of cases.
//
// The rules: nothing while the cloud is away (a change made offline is written once it is back);
// the Node is read before the first write and after each reconnect (it may have been re-registered
// meanwhile); a value is written only when it differs from what the Node holds, and only once it
// has held for `settleMs` (facts that flap faster than that never reach the apiserver); writes are
// at least `minIntervalMs` apart, whatever the value (values that each hold longer than the settle
// time but flip often cost one write per interval, the latest value winning); a failed read or
// write waits for its backoff.
import { sameCondition } from './condition.ts'
import type { AutonomyCondition } from './condition.ts'

export interface ScheduleState {
  /** the condition the facts say now, and since when they have said it */
  desired: AutonomyCondition
  desiredSince: number
  /** what the Node holds: undefined until read, null when it has no such condition */
  onNode: AutonomyCondition | null | undefined
  lastWriteAt?: number
  /** after a failure: no request before then */
  retryAt?: number
}

export interface ScheduleLimits {
  online: boolean
  now: number
  settleMs: number
  minIntervalMs: number
}

export type Step = { do: 'read' } | { do: 'write' } | { do: 'wait'; why: string }

export function nextStep(state: ScheduleState, limits: ScheduleLimits): Step {
  const { online, now, settleMs, minIntervalMs } = limits
  if (!online) return { do: 'wait', why: 'offline' }
  if (state.retryAt !== undefined && now < state.retryAt) return { do: 'wait', why: 'backoff' }
  if (state.onNode === undefined) return { do: 'read' }
  if (sameCondition(state.desired, state.onNode)) return { do: 'wait', why: 'written' }
  if (now - state.desiredSince < settleMs) return { do: 'wait', why: 'settling' }
  if (state.lastWriteAt !== undefined && now - state.lastWriteAt < minIntervalMs) return { do: 'wait', why: 'interval' }
  return { do: 'write' }
}
