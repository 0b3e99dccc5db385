// The import graph, checked: every import runs from a higher layer to a lower one (or within a
// folder), no file imports itself back through others, and only lib/front/ speaks HTTP to clients.
// The layers, lowest first, are the map docs/architecture.md draws.
import t from 'tap'
import { readFileSync, readdirSync, statSync } from 'node:fs'
import path from 'node:path'

const root = path.resolve(import.meta.dirname, '..')

/** Lowest first: a module may import from its own layer's folder or from any lower layer. */
const layers: string[][] = [
  ['package.json', 'lib/config.ts', 'lib/durable-dirs.ts', 'lib/net', 'lib/log-limit.ts', 'lib/bulk-turns.ts'],
  ['certs', 'lib/codec'],
  ['lib/api'],
  ['filters'],
  ['lib/cache'],
  ['lib/upstream', 'lib/overlay'],
  ['lib/certificates', 'lib/watch', 'lib/pool', 'lib/autonomy'],
  ['lib/topology'],
  ['lib/observe'],
  ['lib/front'],
  ['lib/hub-pool.ts', 'lib/wiring'],
  ['lib/hub.ts'],
  ['cmd'],
]

function layerOf(file: string): { layer: number; unit: string } {
  for (const [layer, units] of layers.entries()) {
    for (const unit of units) if (file === unit || file.startsWith(`${unit}/`)) return { layer, unit }
  }
  throw new Error(`${file} is in no layer: add it to test/layers.test.ts and docs/architecture.md`)
}

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir)).flatMap(name => {
    const rel = `${dir}/${name}`
    if (statSync(path.join(root, rel)).isDirectory()) return sources(rel)
    return name.endsWith('.ts') ? [rel] : []
  })
}

const files = ['lib', 'filters', 'cmd', 'certs'].flatMap(sources)
const importPattern = /^(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gms

function importsOf(file: string): string[] {
  const text = readFileSync(path.join(root, file), 'utf8')
  return [...text.matchAll(importPattern)].map(m => path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1])))
}

const graph = new Map(files.map(file => [file, importsOf(file)]))

t.test('every import runs downward', async t => {
  const upward: string[] = []
  for (const [file, imports] of graph) {
    const from = layerOf(file)
    for (const target of imports) {
      const to = layerOf(target)
      if (to.layer > from.layer || (to.layer === from.layer && to.unit !== from.unit)) upward.push(`${file} -> ${target}`)
    }
  }
  t.same(upward, [], 'imports from a higher layer, or across folders of one layer')
  t.ok(graph.size > 100, `the graph was read (${graph.size} files)`)
})

t.test('no import cycle', async t => {
  const cycles: string[] = []
  const state = new Map<string, 'open' | 'done'>()
  const visit = (file: string, trail: string[]) => {
    if (state.get(file) === 'done') return
    if (state.get(file) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '))
      return
    }
    state.set(file, 'open')
    for (const next of graph.get(file) ?? []) visit(next, [...trail, file])
    state.set(file, 'done')
  }
  for (const file of graph.keys()) visit(file, [])
  t.same(cycles, [])
})

t.test('only lib/front/ writes responses to clients', async t => {
  const writers = files.filter(file => file.startsWith('lib/') && /\bServerResponse\b/.test(readFileSync(path.join(root, file), 'utf8')))
  t.same(
    writers.filter(file => !file.startsWith('lib/front/')),
    [],
  )
  t.ok(writers.includes('lib/front/respond.ts'), 'the check sees the files that do')
})
