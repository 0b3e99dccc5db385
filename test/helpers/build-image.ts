// What the build tests read of the image's recipe and of emitted JavaScript: the Dockerfile as
// instructions grouped by stage, and a tree's files and module specifiers.
import { readdirSync, statSync } from 'node:fs'
import path from 'node:path'

export interface Instruction {
  op: string
  args: string
}
export interface Stage {
  from: string
  name?: string
  instructions: Instruction[]
}

export function dockerfileStages(text: string): Stage[] {
  const logical = text
    .replace(/\\\r?\n/g, ' ') // line continuations
    .split(/\r?\n/)
    .map(l => l.trim())
    .filter(l => l !== '' && !l.startsWith('#'))
  const stages: Stage[] = []
  for (const line of logical) {
    const [, op, args] = /^(\S+)\s*(.*)$/.exec(line) as RegExpExecArray
    const upper = op.toUpperCase()
    if (upper === 'FROM') {
      const words = args.split(/\s+/).filter(w => !w.startsWith('--'))
      const as = words.findIndex(w => w.toUpperCase() === 'AS')
      stages.push({ from: words[0], name: as === -1 ? undefined : words[as + 1], instructions: [] })
    } else {
      if (stages.length === 0) throw new Error(`Dockerfile: ${upper} before FROM`)
      stages[stages.length - 1].instructions.push({ op: upper, args })
    }
  }
  return stages
}

export const ops = (stage: Stage, op: string) => stage.instructions.filter(i => i.op === op).map(i => i.args)

/** The exec form's array (`["a", "b"]`), or the shell form split on blanks. */
export function execForm(args: string): string[] {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/)
}

export function jsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const full = path.join(dir, name)
    return statSync(full).isDirectory() ? jsFiles(full) : full.endsWith('.js') ? [full] : []
  })
}

/** Module specifiers of static imports/exports and of dynamic imports with a literal, with which kind. */
export function specifiers(source: string): { spec: string; dynamic: boolean }[] {
  const found: { spec: string; dynamic: boolean }[] = []
  for (const m of source.matchAll(/(?:^|[\s;])(?:import|export)\s[^'"]*?\sfrom\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]/gm)) {
    found.push({ spec: m[1] ?? m[2], dynamic: false })
  }
  for (const m of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ spec: m[1], dynamic: true })
  return found
}

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
export function packageName(spec: string): string {
  const parts = spec.split('/')
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}
