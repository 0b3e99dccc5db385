// manifests/outpost.service and its environment file, read as systemd reads them (the parts the
// shipped files use): test/manifests.test.ts holds them to the static pod, test/deploy-guide.e2e.ts
// starts the hub from them as systemd would.

/** A unit file: per section, every value of each key in order (a key may repeat). */
export type Unit = Map<string, Map<string, string[]>>

export function parseUnit(text: string): Unit {
  const unit: Unit = new Map()
  let section: Map<string, string[]> | undefined
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const header = /^\[([A-Za-z]+)\]$/.exec(line)
    if (header) {
      section = unit.get(header[1]) ?? new Map()
      unit.set(header[1], section)
      continue
    }
    const eq = line.indexOf('=')
    if (!section || eq === -1) throw new Error(`not a unit file line: ${raw}`)
    const key = line.slice(0, eq).trim()
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()])
  }
  return unit
}

/** The one value of a key (the last, as systemd takes it), or undefined. */
export function unitValue(unit: Unit, section: string, key: string): string | undefined {
  return unit.get(section)?.get(key)?.at(-1)
}

/** An EnvironmentFile: VARIABLE=value lines; comments and blank lines skipped, one pair of quotes taken off. */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line)
    if (!m) throw new Error(`not an environment file line: ${raw}`)
    env[m[1]] = m[2].replace(/^"(.*)"$|^'(.*)'$/, '$1$2')
  }
  return env
}

/** Variables shown commented out (`# NAME=…`), offered to the operator. */
export function commentedVariables(text: string): string[] {
  return [...text.matchAll(/^#\s*([A-Z][A-Z0-9_]*)=/gm)].map(m => m[1])
}
