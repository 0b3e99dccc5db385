// "did you mean --x?" for an unknown flag: a typo, a flag given with one dash or in capitals, or the
// start of a longer name.

/** Optimal string alignment distance: edits, a swap of neighbours counting as one (`--prot`). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
}

/**
 * The names (without dashes) a user most likely meant by `typed` (as given: `--prot`, `-port`),
 * best first, at most three; none when nothing is close. Close is: the same name but for case,
 * dashes or underscores; a start of names (`--admin-p`); or a few edits away, fewer for short names.
 */
export function suggest(typed: string, names: readonly string[]): string[] {
  const want = typed.replace(/^-+/, '').toLowerCase().replace(/_/g, '-')
  if (want === '') return []
  if (names.includes(want)) return [want]
  if (want.length >= 3) {
    const prefixed = names.filter(n => n.startsWith(want))
    if (prefixed.length > 0) return prefixed.slice(0, 3)
  }
  const limit = want.length <= 3 ? 1 : want.length <= 7 ? 2 : 3
  const scored = names.map(name => ({ name, d: editDistance(want, name) })).filter(s => s.d <= limit)
  const best = Math.min(...scored.map(s => s.d))
  return scored
    .filter(s => s.d === best)
    .map(s => s.name)
    .slice(0, 3)
}

/** `did you mean --a?`, `did you mean --a or --b?`, or nothing. */
export function didYouMean(typed: string, names: readonly string[]): string | undefined {
  const found = suggest(typed, names).map(n => `--${n}`)
  if (found.length === 0) return undefined
  const list = found.length === 1 ? found[0] : `${found.slice(0, -1).join(', ')} or ${found[found.length - 1]}`
  return `did you mean ${list}?`
}
