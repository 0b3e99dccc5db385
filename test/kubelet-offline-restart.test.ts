// A real kubelet's first start through the hub, as recorded from kubelet v1.24 (its Lease and CSINode
// read 404, then created in protobuf; renewals by PUT from the previous answer; its CSIDriver and
// RuntimeClass informers), then the cloud goes away and both the hub and kubelet restart: what
// kubelet only ever wrote is there to read, every list (empty ones too) names its kind as the
// apiserver does, and a renewal is acknowledged from the last Lease the apiserver acknowledged.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { startHub } from '../lib/hub.ts'
import { startHarness, eventually, goDark, hubConfig, quietLogger } from './helpers/hub.ts'
import { firstStart, readAfterRestart, renewLease } from './helpers/kubelet-client.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { kubectl } from './helpers/kubectl.ts'

const node = 'edge-1'

t.test('kubelet restarted with the cloud away reads its Lease, its CSINode and its empty lists, and renews', async t => {
  const h = await startHarness({ config: { nodeName: node } })
  t.teardown(() => h.close())
  const start = await firstStart(h.url, node)
  t.teardown(() => start.informers.stop())
  t.same(
    [start.leaseGet.status, start.leaseCreate.status, start.csiNodeGet.status, start.csiNodeCreate.status],
    [404, 201, 404, 201],
    'first start: 404, then created',
  )
  t.same([start.informers.csiDrivers.status, start.informers.runtimeClasses.status], [200, 200], 'the informers listed')
  let lease = start.leaseCreate.body
  for (let i = 1; i <= 2; i++) {
    const renewed = await renewLease(h.url, lease, { renewTime: `2026-11-25T13:19:0${i}.000000Z` })
    t.equal(renewed.status, 200, `renewal ${i} online`)
    lease = renewed.body
  }
  // kubectl reads discovery online once, as an operator on the node would have
  t.equal((await kubectl(h.url, ['get', 'csidrivers'])).code, 0)

  start.informers.stop()
  await goDark(h)
  await h.hub.close()
  const hub = await startHub(hubConfig([h.simulator.url], { nodeName: node, cacheDir: h.cacheDir }), { logger: quietLogger() })
  t.teardown(() => hub.close())
  await eventually(() => hub.health.state === 'offline', 10_000, 'the restarted hub to find the cloud away')

  for (const format of ['protobuf', 'json'] as const) {
    const after = await readAfterRestart(hub.proxyUrl, node, format)
    t.same(
      { status: after.lease.status, kind: after.lease.kind, apiVersion: after.lease.apiVersion },
      { status: 200, kind: 'Lease', apiVersion: 'coordination.k8s.io/v1' },
      `${format}: the Lease kubelet created and renewed`,
    )
    t.equal(after.lease.body?.spec?.renewTime, lease.spec.renewTime, `${format}: at the last renewal the apiserver acknowledged`)
    t.equal(after.lease.body?.metadata?.resourceVersion, lease.metadata.resourceVersion)
    t.same(
      { status: after.csiNode.status, kind: after.csiNode.kind, apiVersion: after.csiNode.apiVersion },
      { status: 200, kind: 'CSINode', apiVersion: 'storage.k8s.io/v1' },
      `${format}: the CSINode kubelet created`,
    )
    t.same(
      [after.csiDrivers.status, after.csiDrivers.kind, after.csiDrivers.apiVersion, after.csiDrivers.body?.items?.length ?? -1],
      [200, 'CSIDriverList', 'storage.k8s.io/v1', 0],
      `${format}: the empty CSIDriver list names its kind`,
    )
    t.same(
      [after.runtimeClasses.status, after.runtimeClasses.kind, after.runtimeClasses.apiVersion, after.runtimeClasses.body?.items?.length ?? -1],
      [200, 'RuntimeClassList', 'node.k8s.io/v1', 0],
      `${format}: the empty RuntimeClass list names its kind`,
    )
    t.notOk(after.csiDrivers.decodeError ?? after.runtimeClasses.decodeError, `${format}: both lists decode`)
  }

  const fromCache = (await readAfterRestart(hub.proxyUrl, node, 'protobuf')).lease.body
  const renewed = await renewLease(hub.proxyUrl, fromCache, { renewTime: '2026-11-25T13:20:00.000000Z' })
  t.equal(renewed.status, 200, 'offline, a renewal built from the cached Lease is acknowledged')
  t.equal(renewed.body?.spec?.renewTime, '2026-11-25T13:20:00.000000Z')
  const stale = await renewLease(hub.proxyUrl, { ...fromCache, metadata: { ...fromCache.metadata, resourceVersion: '1' } })
  t.equal(stale.status, 409, "offline, a renewal built from another version is the apiserver's Conflict")

  // real clients decode what the cache answers
  const storage = kubeConfigFor(hub.proxyUrl, 'kubelet/v1.24.0').makeApiClient(k8s.StorageV1Api)
  t.same((await storage.listCSIDriver()).items, [], 'client-node lists the CSIDrivers offline')
  t.equal((await storage.readCSINode({ name: node })).metadata?.name, node, 'client-node reads the CSINode offline')
  const csidrivers = await kubectl(hub.proxyUrl, ['get', 'csidrivers'])
  t.equal(csidrivers.code, 0, `kubectl get csidrivers offline: ${csidrivers.stderr}`)
  t.match(csidrivers.stderr + csidrivers.stdout, /No resources found/)
})
