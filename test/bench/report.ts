// Rows of the bench: each a hub figure against a baseline from the same run, the ratio hub/baseline
// with which way is better, the row's target and whether it is met; printed and written as JSON.
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

/** 12,345: counts in rows' names and notes */
export const thousands = (n: number): string => n.toLocaleString('en-US')

export interface Row {
  /** stable key, e.g. "list.json.first" */
  id: string
  name: string
  unit: string
  /** what the baseline is: direct, pass-through, uncached, target, … */
  baselineLabel: string
  baseline: number | null
  hub: number | null
  /** hub / baseline */
  ratio: number | null
  better: 'higher' | 'lower'
  /** e.g. "≥ 0.8x", "added ≤ 1 ms", "≤ 60 MiB"; "—" for a figure given for reference */
  target: string
  met: boolean | null
  /** what the row adds beyond the two figures (the added latency, counts, bytes) */
  note?: string
  /** why there is no figure */
  na?: string
  /** a protobuf row: n/a while the simulator does not speak protobuf */
  protobuf?: boolean
}

type Base = Pick<Row, 'id' | 'name' | 'unit' | 'baselineLabel'> & { note?: string; protobuf?: boolean }

const isNumber = (n: number | null): n is number => n !== null && Number.isFinite(n)

/** A row whose target is on the ratio hub / baseline (e.g. ≥ 0.8x). */
export function ratioRow(base: Base, baseline: number, hub: number, better: Row['better'], limit?: number): Row {
  const ratio = baseline === 0 ? null : hub / baseline
  const met = limit === undefined || ratio === null ? null : better === 'higher' ? ratio >= limit : ratio <= limit
  return { ...base, baseline, hub, ratio, better, target: limit === undefined ? '—' : `${better === 'higher' ? '≥' : '≤'} ${limit}x`, met }
}

/** A row whose target is on a figure (the hub's, or hub − baseline): `check` says whether it is met. */
export function figureRow(base: Base, baseline: number, hub: number, better: Row['better'], target: string, met: boolean): Row {
  return { ...base, baseline, hub, ratio: baseline === 0 ? null : hub / baseline, better, target, met }
}

/** A row with no figure, and why. */
export function naRow(base: Base, better: Row['better'], target: string, why: string): Row {
  return { ...base, baseline: null, hub: null, ratio: null, better, target, met: null, na: why }
}

/** Runs `measure`; a failure becomes an n/a row saying what went wrong, so one broken row does not sink the run. */
export async function guarded(rows: Row[], bases: { base: Base; better: Row['better']; target: string }[], measure: () => Promise<Row[]>): Promise<void> {
  try {
    rows.push(...(await measure()))
  } catch (error) {
    const why = `failed: ${(error as Error).message.split('\n')[0]}`
    console.error(`bench: ${bases.map(b => b.base.id).join(', ')}: ${(error as Error).stack}`)
    for (const b of bases) rows.push(naRow(b.base, b.better, b.target, why))
  }
}

function fmt(n: number | null): string {
  if (!isNumber(n)) return 'n/a'
  const abs = Math.abs(n)
  if (abs >= 1000) return Math.round(n).toLocaleString('en-US')
  if (abs >= 100) return n.toFixed(0)
  if (abs >= 10) return n.toFixed(1)
  return n.toFixed(2)
}

export function formatTable(title: string, rows: Row[]): string {
  const header = ['measure', 'baseline', 'hub', 'unit', 'hub / baseline', 'target', 'met']
  const cells = rows.map(r => [
    r.name,
    r.na ? 'n/a' : `${fmt(r.baseline)} ${r.baselineLabel}`,
    r.na ? 'n/a' : fmt(r.hub),
    r.unit,
    r.na || r.ratio === null ? 'n/a' : `${r.ratio.toFixed(2)}x, ${r.better} is better`,
    r.target,
    r.met === null ? '—' : r.met ? 'yes' : 'NO',
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map(c => c[i].length)))
  const line = (c: string[]) =>
    c
      .map((v, i) => (i === 1 || i === 2 ? v.padStart(widths[i]) : v.padEnd(widths[i])))
      .join('  ')
      .trimEnd()
  const out = [title, '', line(header), line(widths.map(w => '-'.repeat(w)))]
  for (const [i, c] of cells.entries()) {
    out.push(line(c))
    const r = rows[i]
    if (r.na) out.push(`    n/a: ${r.na}`)
    else if (r.note) out.push(`    ${r.note}`)
  }
  return out.join('\n')
}

export interface Results {
  quick: boolean
  /** the commit the hub was built from, and whether the work tree had changes */
  commit: string
  dirty: boolean
  /** flags given to every hub besides the bench's own (BENCH_HUB_ARGS) */
  hubArgs: string[]
  startedAt: string
  seconds: number
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string; loadAverage: number[] }
  counts: Record<string, number>
  simulatorSpeaksProtobuf: boolean
  /** the real kube-apiserver binary group 15 measured against, or why it did not run */
  realApiserver: string
  rows: Row[]
  inProcess: Row[]
}

export function machine(): Results['machine'] {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    loadAverage: os.loadavg().map(l => Math.round(l * 100) / 100),
  }
}

export function writeResults(file: string, results: Results): void {
  mkdirSync(path.dirname(file), { recursive: true })
  writeFileSync(file, JSON.stringify(results, null, 2) + '\n')
}
