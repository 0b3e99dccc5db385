// The recorded real-apiserver bytes (test/fixtures/apiserver-v1.24) and what tests derive from them.
import { readFileSync } from 'node:fs'
import { nodePoolLabel, topologyAnnotation } from '../../filters/topology.ts'
import type { TopologyContext } from '../../filters/topology.ts'

const dir = new URL('../fixtures/apiserver-v1.24/', import.meta.url)

export const fixtureBytes = (name: string): Buffer => readFileSync(new URL(name, dir))
export const fixtureJson = (name: string): any => JSON.parse(readFileSync(new URL(name, dir), 'utf8'))

/** A protobuf watch stream cut into its frames (4-byte big-endian length + WatchEvent each). */
export function watchFrames(stream: Buffer): Buffer[] {
  const out: Buffer[] = []
  for (let pos = 0; pos < stream.length;) {
    const end = pos + 4 + stream.readUInt32BE(pos)
    out.push(stream.subarray(pos, end))
    pos = end
  }
  return out
}

/** The recorded cluster (pools beijing, hangzhou, shanghai) seen from one node; extra labels per node on top. */
export function recordedContext(nodeName: string, extraLabels: Record<string, Record<string, string>> = {}): TopologyContext {
  const nodes: { metadata: { name: string; labels?: Record<string, string> } }[] = fixtureJson('list-nodes.json').items
  const labelsOf = new Map(nodes.map(n => [n.metadata.name, { ...n.metadata.labels, ...extraLabels[n.metadata.name] }]))
  const mine = labelsOf.get(nodeName) ?? {}
  const pool = mine[nodePoolLabel]
  return {
    nodeName,
    nodeLabels: mine,
    poolNodes: new Set(pool === undefined ? [] : [...labelsOf].filter(([, l]) => l[nodePoolLabel] === pool).map(([n]) => n)),
    nodeLabelsByName: labelsOf,
  }
}

/** The Services' topology annotations as recorded: namespace/name → value. */
export function recordedAnnotations(): Map<string, string> {
  const annotations = new Map<string, string>()
  for (const s of fixtureJson('list-services.json').items) {
    const value = s.metadata.annotations?.[topologyAnnotation]
    if (value !== undefined) annotations.set(`${s.metadata.namespace}/${s.metadata.name}`, value)
  }
  return annotations
}
