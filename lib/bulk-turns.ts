// Bulk writes (a list from the cache, a watch's initial state) share one budget per turn of the
// event loop, whoever they are for. Twenty watches each taking a 30 MB initial state would otherwise
// each write a batch in every turn, and a kubelet GET, which needs a few turns to be answered,
// would wait behind all of them at each one. Past the budget a bulk writer waits for the next turn;
// short requests go between.

/** Bytes of bulk writes in one turn, across all of them: a few milliseconds of work. */
const bytesPerTurn = 128 * 1024

let left = bytesPerTurn
let turnQueued = false
let waiting: (() => void)[] = []

function nextTurn(): void {
  turnQueued = false
  left = bytesPerTurn
  const woken = waiting
  waiting = []
  for (const wake of woken) wake()
}

function queueTurn(): void {
  if (turnQueued) return
  turnQueued = true
  setImmediate(nextTurn)
}

/** Resolves when `bytes` of bulk writing may go in this turn (at once when the turn has room). */
export async function bulkTurn(bytes: number): Promise<void> {
  queueTurn()
  while (left <= 0) {
    await new Promise<void>(resolve => waiting.push(resolve))
    queueTurn()
  }
  left -= bytes
}
