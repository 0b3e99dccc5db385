// The runtime environment the static pod gives the hub (manifests/outpost-static-pod.yaml): V8's
// heap limits in NODE_OPTIONS and glibc's malloc tuning. The bench runs the build with it, so its
// memory rows are production's; test/manifests.test.ts checks Node starts with it.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'

const manifest = fileURLToPath(new URL('../../manifests/outpost-static-pod.yaml', import.meta.url))

export function productionRuntimeEnv(): Record<string, string> {
  const pod = parse(readFileSync(path.resolve(manifest), 'utf8'))
  const env: { name: string; value?: string }[] = pod.spec.containers.find((c: { name: string }) => c.name === 'outpost').env ?? []
  return Object.fromEntries(env.filter(e => e.value !== undefined && (e.name === 'NODE_OPTIONS' || e.name.startsWith('MALLOC_'))).map(e => [e.name, e.value!]))
}
