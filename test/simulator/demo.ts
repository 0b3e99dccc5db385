// The demo cluster `npm start` runs against: four nodes in three node pools (beijing, hangzhou,
// shanghai), Services with topology annotations and their EndpointSlices, a few pods, the NodePool
// custom resource, and the `kubernetes` Service, as in test/fixtures/.

import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ApiServerSimulator, type SimulatorOptions } from './server.ts'

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url))

function read(name: string): string | undefined {
  const path = fixtures + name
  return existsSync(path) ? readFileSync(path, 'utf8') : undefined
}

/** NodePools matching the nodes' `apps.openyurt.io/nodepool` labels, unless the fixtures bring their own. */
function nodePools(sim: ApiServerSimulator): void {
  if (sim.list('apps.openyurt.io/v1beta1', 'NodePool').length > 0) return
  const pools = new Map<string, string[]>()
  for (const node of sim.list('v1', 'Node')) {
    const pool = node.metadata.labels?.['apps.openyurt.io/nodepool']
    if (pool) pools.set(pool, [...(pools.get(pool) ?? []), node.metadata.name])
  }
  for (const [name, nodes] of pools) {
    sim.create({
      apiVersion: 'apps.openyurt.io/v1beta1',
      kind: 'NodePool',
      metadata: { name },
      spec: { type: name === 'beijing' ? 'Cloud' : 'Edge' },
      status: { nodes, readyNodeNum: nodes.length, unreadyNodeNum: 0 },
    })
  }
}

export async function startDemoCluster(options: SimulatorOptions = {}): Promise<ApiServerSimulator> {
  const sim = await ApiServerSimulator.start(options)
  try {
    const crd = read('nodepool-crd.yaml')
    if (crd) sim.load(crd)
    else
      sim.registerResource({
        group: 'apps.openyurt.io',
        version: 'v1beta1',
        resource: 'nodepools',
        kind: 'NodePool',
        listKind: 'NodePoolList',
        namespaced: false,
        shortNames: ['np'],
        singular: 'nodepool',
      })
    sim.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kubernetes', namespace: 'default', labels: { component: 'apiserver', provider: 'kubernetes' } },
      spec: { clusterIP: '10.96.0.1', ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: sim.port }] },
    })
    sim.create({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'kubernetes', namespace: 'default', labels: { 'kubernetes.io/service-name': 'kubernetes' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
      ports: [{ name: 'https', port: sim.port, protocol: 'TCP' }],
    })
    for (const file of ['cluster-objects.yaml', 'extra-objects.yaml', 'nodepools.yaml']) {
      const text = read(file)
      if (text) sim.load(text)
    }
    nodePools(sim)
  } catch (err) {
    await sim.close()
    throw err
  }
  return sim
}
