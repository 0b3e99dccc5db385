// The real kubectl through the hub, in front of the simulator's demo cluster.
import t from 'tap'
import { startHarness, eventually } from './helpers/hub.ts'
import { kubectl, kubectlStream } from './helpers/kubectl.ts'

t.test('kubectl get, get -o json and get -w through the hub', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())

  const table = await kubectl(h.url, ['get', 'endpointslices', '-A'])
  t.equal(table.code, 0, table.stderr)
  t.match(table.stdout, /NAMESPACE\s+NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE/)
  t.match(table.stdout, /svc-ud1-abcde/)
  t.match(table.stdout, /svc-host-/)

  const nodes = await kubectl(h.url, ['get', 'nodes', '-o', 'json'])
  t.equal(nodes.code, 0, nodes.stderr)
  const list = JSON.parse(nodes.stdout)
  t.same(list.items.map((n: any) => n.metadata.name).sort(), ['kind-control-plane', 'kind-worker', 'kind-worker2', 'kind-worker3'])
  t.equal(list.items.find((n: any) => n.metadata.name === 'kind-worker2').metadata.labels['apps.openyurt.io/nodepool'], 'shanghai')

  const missing = await kubectl(h.url, ['get', 'service', 'no-such-service'])
  t.not(missing.code, 0)
  t.match(missing.stderr, /NotFound|not found/)

  const watch = kubectlStream(h.url, ['get', 'configmaps', '-n', 'default', '-w'])
  t.teardown(() => watch.child.kill())
  await eventually(() => /NAME/.test(watch.output()) || /No resources/.test(watch.output()), 20_000, 'the initial listing')
  h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'seen-by-watch', namespace: 'default' }, data: {} })
  await eventually(() => watch.output().includes('seen-by-watch'), 20_000, 'kubectl get -w to print the new configmap')
  t.pass('kubectl get -w saw a change made in the simulator')
})

t.test('kubectl offline: what it read through the hub, it can read again with the cloud gone', async t => {
  const h = await startHarness({ demo: true, config: { cacheComponents: ['kubectl'] } })
  t.teardown(() => h.close())
  const online = await kubectl(h.url, ['get', 'configmaps', '-n', 'default', '-o', 'json'])
  t.equal(online.code, 0, online.stderr)
  const names = (out: string) =>
    JSON.parse(out)
      .items.map((i: any) => i.metadata.name)
      .sort()

  await h.simulator.setFault('refuse')
  await eventually(() => h.hub.health.state === 'offline', 10_000, 'offline')
  const offline = await kubectl(h.url, ['get', 'configmaps', '-n', 'default', '-o', 'json'])
  t.equal(offline.code, 0, offline.stderr)
  t.same(names(offline.stdout), names(online.stdout), 'the same configmaps, from the cache (discovery included)')
  const one = await kubectl(h.url, ['get', 'configmap', 'app-config', '-n', 'default', '-o', 'jsonpath={.metadata.name}'])
  t.equal(one.stdout, 'app-config', 'a get of a listed object')
  const table = await kubectl(h.url, ['get', 'configmaps', '-n', 'default'])
  t.equal(table.code, 0, table.stderr)
  t.match(table.stdout, /app-config/, 'the default table output works from the plain list the cache has')
  const write = await kubectl(h.url, ['delete', 'configmap', 'app-config', '-n', 'default'])
  t.not(write.code, 0, 'a write offline fails')
  t.match(write.stderr, /nothing was written|unreachable|ServiceUnavailable|503/i)
})
