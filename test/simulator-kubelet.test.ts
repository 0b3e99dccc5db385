// A real kubelet v1.24's first start, renewals and restart against the simulator alone, through the
// kubelet client (test/helpers/kubelet-client.ts) the hub's tests use too: the requests it sends are
// kubelet's (fixtures/apiserver-v1.24/kubelet-writes/), and the simulator answers them as
// kube-apiserver v1.24 does, for the kinds kubelet writes and lists (Lease, CSINode, CSIDriver,
// RuntimeClass), in protobuf and JSON, empty lists included.
import t, { type Test } from 'tap'
import * as k8s from '@kubernetes/client-node'
import { decodeBody, encodeBody } from '../lib/codec/typed.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { fixtureJson } from './helpers/fixtures.ts'
import { firstStart, kubeletAccept, kubeletUserAgent, protobufContentType, readAfterRestart, renewLease } from './helpers/kubelet-client.ts'
import { kubectl } from './helpers/kubectl.ts'
import { ApiServerSimulator } from './simulator/index.ts'
import { request } from './simulator/testclient.ts'

const node = 'edge-1'
const nodeUid = 'd99b1b1a-6284-46d7-b969-2ad12bafc486'
const uidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const timePattern = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/
const written = (name: string) => fixtureJson(`kubelet-writes/${name}`)
const conflictMessage =
  'Operation cannot be fulfilled on leases.coordination.k8s.io "edge-1": the object has been modified; please apply your changes to the latest version and try again'

async function simulator(t: Test): Promise<ApiServerSimulator> {
  const sim = await ApiServerSimulator.start({ bookmarkIntervalMs: 100 })
  t.teardown(() => sim.close())
  return sim
}

t.test("kubelet's first start: Lease and CSINode 404 then created in protobuf, informer lists empty with their kinds", async t => {
  const sim = await simulator(t)
  const start = await firstStart(sim.url, node, { nodeUid, renewTime: '2026-11-25T13:18:50.856474Z' })
  t.teardown(() => start.informers.stop())

  t.match(start.leaseGet, { status: 404, contentType: protobufContentType, apiVersion: 'v1', kind: 'Status' })
  t.match(start.leaseGet.body, { status: 'Failure', reason: 'NotFound', code: 404, message: 'leases.coordination.k8s.io "edge-1" not found' })
  t.match(start.leaseCreate, { status: 201, contentType: protobufContentType, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' })
  const lease = start.leaseCreate.body
  t.match(lease.metadata, { name: node, namespace: 'kube-node-lease', uid: uidPattern, resourceVersion: /^\d+$/, creationTimestamp: timePattern })
  t.strictSame(lease.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: node, uid: nodeUid }])
  t.strictSame(lease.spec, { holderIdentity: node, leaseDurationSeconds: 40, renewTime: '2026-11-25T13:18:50.856474Z' }, 'renewTime keeps its microseconds')

  t.match(start.csiNodeGet, { status: 404, kind: 'Status', body: { reason: 'NotFound', message: 'csinodes.storage.k8s.io "edge-1" not found' } })
  t.match(start.csiNodeCreate, { status: 201, contentType: protobufContentType, apiVersion: 'storage.k8s.io/v1', kind: 'CSINode' })
  const csiNode = start.csiNodeCreate.body
  t.match(csiNode.metadata, { name: node, uid: uidPattern, resourceVersion: /^\d+$/, creationTimestamp: timePattern })
  t.notOk('namespace' in csiNode.metadata, 'cluster-scoped')
  t.equal(
    csiNode.metadata.annotations['storage.alpha.kubernetes.io/migrated-plugins'],
    written('02-create-csinodes.json').requestObject.metadata.annotations['storage.alpha.kubernetes.io/migrated-plugins'],
  )
  t.strictSame(csiNode.spec, { drivers: null })

  const empty = (apiVersion: string, kind: string) => ({
    status: 200,
    contentType: protobufContentType,
    apiVersion,
    kind,
    body: { kind, apiVersion, items: [] },
  })
  t.match(start.informers.csiDrivers, empty('storage.k8s.io/v1', 'CSIDriverList'))
  t.match(start.informers.runtimeClasses, empty('node.k8s.io/v1', 'RuntimeClassList'))
  t.strictSame(start.informers.csiDrivers.body.items, [])
  t.equal(start.informers.csiDrivers.body.metadata.resourceVersion, csiNode.metadata.resourceVersion, 'the list is at the current resourceVersion')

  const { csiDrivers: driversWatch, runtimeClasses: classesWatch } = start.informers.watches
  t.equal(driversWatch?.status, 200)
  t.equal(driversWatch?.contentType, 'application/vnd.kubernetes.protobuf;stream=watch')
  t.equal(classesWatch?.status, 200)
  sim.create({ apiVersion: 'storage.k8s.io/v1', kind: 'CSIDriver', metadata: { name: 'hostpath.csi.k8s.io' }, spec: { podInfoOnMount: true } })
  const added = await driversWatch!.waitFor(e => e.type === 'ADDED')
  t.strictSame(
    added.object.spec,
    {
      attachRequired: true,
      podInfoOnMount: true,
      volumeLifecycleModes: ['Persistent'],
      storageCapacity: false,
      fsGroupPolicy: 'ReadWriteOnceWithFSType',
      requiresRepublish: false,
    },
    "the informer's watch sees a new CSIDriver with v1.24's defaults",
  )
  const bookmark = await classesWatch!.waitFor(e => e.type === 'BOOKMARK')
  t.match(bookmark.object, { kind: 'RuntimeClass', apiVersion: 'node.k8s.io/v1', metadata: { resourceVersion: /^\d+$/ }, handler: '' })

  // what reached the apiserver is what kubelet sends
  const sent = sim.requests.filter(r => r.headers['user-agent'] === kubeletUserAgent)
  const rv = csiNode.metadata.resourceVersion
  t.strictSame(
    sent.map(r => `${r.method} ${r.url}`),
    [
      'GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/edge-1?timeout=10s',
      'POST /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?timeout=10s',
      'GET /apis/storage.k8s.io/v1/csinodes/edge-1',
      'POST /apis/storage.k8s.io/v1/csinodes',
      'GET /apis/storage.k8s.io/v1/csidrivers?limit=500&resourceVersion=0',
      'GET /apis/node.k8s.io/v1/runtimeclasses?limit=500&resourceVersion=0',
      `GET /apis/storage.k8s.io/v1/csidrivers?allowWatchBookmarks=true&resourceVersion=${rv}&timeout=7m30s&timeoutSeconds=450&watch=true`,
      `GET /apis/node.k8s.io/v1/runtimeclasses?allowWatchBookmarks=true&resourceVersion=${rv}&timeout=7m30s&timeoutSeconds=450&watch=true`,
    ],
  )
  t.ok(sent.every(r => r.headers.accept === kubeletAccept))
  t.strictSame(
    sent.filter(r => r.method === 'POST').map(r => r.headers['content-type']),
    [protobufContentType, protobufContentType],
  )
})

t.test('Lease renewals: a PUT built from the previous answer is 200, one from a stale answer 409 Conflict', async t => {
  const sim = await simulator(t)
  const start = await firstStart(sim.url, node, { nodeUid, renewTime: '2026-11-25T13:18:50.856474Z' })
  t.teardown(() => start.informers.stop())
  const created = start.leaseCreate.body

  const first = await renewLease(sim.url, created, { renewTime: '2026-11-25T13:19:00.944151Z' })
  t.match(first, { status: 200, contentType: protobufContentType, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' })
  t.equal(first.body.spec.renewTime, '2026-11-25T13:19:00.944151Z')
  t.equal(first.body.spec.holderIdentity, node)
  t.equal(first.body.metadata.uid, created.metadata.uid)
  t.equal(first.body.metadata.creationTimestamp, created.metadata.creationTimestamp)
  t.ok(BigInt(first.body.metadata.resourceVersion) > BigInt(created.metadata.resourceVersion), 'a new resourceVersion')

  const second = await renewLease(sim.url, first.body, { renewTime: '2026-11-25T13:19:11.043257Z' })
  t.equal(second.status, 200)
  t.equal(second.body.spec.renewTime, '2026-11-25T13:19:11.043257Z')

  const stale = await renewLease(sim.url, first.body, { renewTime: '2026-11-25T13:19:21.000001Z' })
  t.match(stale, { status: 409, contentType: protobufContentType, apiVersion: 'v1', kind: 'Status' })
  t.match(stale.body, {
    status: 'Failure',
    reason: 'Conflict',
    code: 409,
    message: conflictMessage,
    details: { name: node, group: 'coordination.k8s.io', kind: 'leases' },
  })
  t.equal(sim.get('coordination.k8s.io/v1', 'Lease', 'kube-node-lease', node).spec.renewTime, '2026-11-25T13:19:11.043257Z', 'the conflict changed nothing')
})

t.test('after a restart kubelet reads its Lease, its CSINode and the empty lists: protobuf and JSON', async t => {
  const sim = await simulator(t)
  const start = await firstStart(sim.url, node, { nodeUid, renewTime: '2026-11-25T13:18:50.856474Z' })
  start.informers.stop()
  const renewed = await renewLease(sim.url, start.leaseCreate.body, { renewTime: '2026-11-25T13:19:00.944151Z' })
  t.equal(renewed.status, 200)

  for (const format of ['protobuf', 'json'] as const) {
    const contentType = format === 'protobuf' ? protobufContentType : 'application/json'
    const read = await readAfterRestart(sim.url, node, format)
    t.match(read.lease, { status: 200, contentType, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' }, `${format}: Lease`)
    t.strictSame(
      read.lease.body.spec,
      { holderIdentity: node, leaseDurationSeconds: 40, renewTime: '2026-11-25T13:19:00.944151Z' },
      `${format}: the last renewal`,
    )
    t.equal(read.lease.body.metadata.resourceVersion, renewed.body.metadata.resourceVersion)
    t.match(read.csiNode, { status: 200, contentType, apiVersion: 'storage.k8s.io/v1', kind: 'CSINode' }, `${format}: CSINode`)
    t.strictSame(read.csiNode.body.spec, { drivers: null })
    t.match(read.csiDrivers, { status: 200, contentType, apiVersion: 'storage.k8s.io/v1', kind: 'CSIDriverList' }, `${format}: CSIDriverList`)
    t.strictSame(read.csiDrivers.body.items, [], `${format}: empty`)
    t.match(read.runtimeClasses, { status: 200, contentType, apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClassList' }, `${format}: RuntimeClassList`)
    t.strictSame(read.runtimeClasses.body.items, [])
    t.equal(read.runtimeClasses.body.metadata.resourceVersion, renewed.body.metadata.resourceVersion)
  }
  const again = await renewLease(sim.url, (await readAfterRestart(sim.url, node, 'protobuf')).lease.body, { renewTime: '2026-11-25T13:19:30.000001Z' })
  t.equal(again.status, 200, 'a renewal from what was read after the restart')
})

t.test('the recorded requestObjects, protobuf-encoded as kubelet sends them, are accepted; the recorded resourceVersion is stale', async t => {
  const sim = await simulator(t)
  const post = (path: string, object: unknown) =>
    request(`${sim.url}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': protobufContentType, Accept: kubeletAccept, 'User-Agent': kubeletUserAgent },
      body: encodeBody(object),
    })
  const leaseReply = await post('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?timeout=10s', written('03-create-leases.json').requestObject)
  t.equal(leaseReply.status, 201)
  t.equal(leaseReply.headers['content-type'], protobufContentType)
  const lease: any = decodeBody(leaseReply.raw)
  t.match(lease.metadata, { uid: uidPattern, resourceVersion: /^\d+$/, creationTimestamp: timePattern })
  t.equal(lease.spec.renewTime, '2026-11-25T13:18:50.856474Z')
  const csiNodeReply = await post('/apis/storage.k8s.io/v1/csinodes', written('02-create-csinodes.json').requestObject)
  t.equal(csiNodeReply.status, 201)
  t.match(decodeBody(csiNodeReply.raw), { kind: 'CSINode', metadata: { name: node, uid: uidPattern }, spec: { drivers: null } })

  const put = (object: unknown) =>
    request(`${sim.url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/edge-1?timeout=10s`, {
      method: 'PUT',
      headers: { 'Content-Type': protobufContentType, Accept: kubeletAccept },
      body: encodeBody(object),
    })
  const renewal = written('05-update-leases.json').requestObject
  const stale = await put(renewal) // resourceVersion "216" and another uid, as recorded
  t.equal(stale.status, 409)
  t.match(decodeBody(stale.raw), { kind: 'Status', reason: 'Conflict', message: conflictMessage })
  const current = await put({ ...renewal, metadata: { ...renewal.metadata, uid: lease.metadata.uid, resourceVersion: lease.metadata.resourceVersion } })
  t.equal(current.status, 200)
  t.match(decodeBody(current.raw), { spec: { renewTime: '2026-11-25T13:19:00.944151Z' }, metadata: { managedFields: renewal.metadata.managedFields } })
})

t.test('CSINode, CSIDriver and RuntimeClass are served as the apiserver serves them', async t => {
  const sim = await simulator(t)
  const json = { 'Content-Type': 'application/json', Accept: 'application/json' }

  const apis = await request(`${sim.url}/apis`)
  for (const name of ['storage.k8s.io', 'node.k8s.io']) {
    t.strictSame(apis.json.groups.find((g: any) => g.name === name)?.preferredVersion, { groupVersion: `${name}/v1`, version: 'v1' }, `${name} in /apis`)
  }
  const storage = await request(`${sim.url}/apis/storage.k8s.io/v1`)
  const verbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']
  t.match(storage.json, { kind: 'APIResourceList', groupVersion: 'storage.k8s.io/v1' })
  t.match(storage.json.resources, [
    { name: 'csidrivers', namespaced: false, kind: 'CSIDriver', verbs },
    { name: 'csinodes', namespaced: false, kind: 'CSINode', verbs },
  ])
  const nodeApi = await request(`${sim.url}/apis/node.k8s.io/v1`)
  t.match(nodeApi.json.resources, [{ name: 'runtimeclasses', namespaced: false, kind: 'RuntimeClass', verbs }])

  // names as the apiserver validates them (a CSINode's is a node name: a DNS subdomain)
  const bad = await request(`${sim.url}/apis/storage.k8s.io/v1/csinodes`, { method: 'POST', headers: json, body: { metadata: { name: 'Edge_1' }, spec: {} } })
  t.equal(bad.status, 422)
  t.match(bad.json, {
    reason: 'Invalid',
    message: /^CSINode\.storage\.k8s\.io "Edge_1" is invalid: metadata\.name: Invalid value: "Edge_1": a lowercase RFC 1123 subdomain/,
    details: { group: 'storage.k8s.io', kind: 'CSINode' },
  })
  const handler = await request(`${sim.url}/apis/node.k8s.io/v1/runtimeclasses`, {
    method: 'POST',
    headers: json,
    body: { metadata: { name: 'gvisor' }, handler: 'run.sc' },
  })
  t.equal(handler.status, 422)
  t.match(handler.json.message, /^RuntimeClass\.node\.k8s\.io "gvisor" is invalid: handler: Invalid value: "run\.sc": a lowercase RFC 1123 label/)
  const namespaced = await request(`${sim.url}/apis/storage.k8s.io/v1/namespaces/default/csinodes`)
  t.equal(namespaced.status, 404, 'cluster-scoped: no namespaced path')

  // create (defaults), get, update, patch, delete, in JSON and protobuf
  const created = await request(`${sim.url}/apis/storage.k8s.io/v1/csidrivers`, {
    method: 'POST',
    headers: json,
    body: { metadata: { name: 'ebs.csi.aws.com' }, spec: { attachRequired: false } },
  })
  t.equal(created.status, 201)
  t.equal(
    JSON.stringify(created.json.spec),
    '{"attachRequired":false,"podInfoOnMount":false,"volumeLifecycleModes":["Persistent"],"storageCapacity":false,"fsGroupPolicy":"ReadWriteOnceWithFSType","requiresRepublish":false}',
    "v1.24's defaults, in the apiserver's key order",
  )
  const patched = await request(`${sim.url}/apis/storage.k8s.io/v1/csidrivers/ebs.csi.aws.com`, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/merge-patch+json', Accept: kubeletAccept },
    body: { metadata: { labels: { team: 'storage' } } },
  })
  t.equal(patched.status, 200)
  t.match(decodeBody(patched.raw), { kind: 'CSIDriver', metadata: { labels: { team: 'storage' } }, spec: { attachRequired: false } })

  const runtimeClass = {
    apiVersion: 'node.k8s.io/v1',
    kind: 'RuntimeClass',
    metadata: { name: 'gvisor' },
    handler: 'runsc',
    overhead: { podFixed: { cpu: '250m', memory: '64Mi' } },
    scheduling: { nodeSelector: { 'runtime/gvisor': 'true' }, tolerations: [{ key: 'runtime', operator: 'Equal', value: 'gvisor', effect: 'NoSchedule' }] },
  }
  const pbCreate = await request(`${sim.url}/apis/node.k8s.io/v1/runtimeclasses`, {
    method: 'POST',
    headers: { 'Content-Type': protobufContentType, Accept: kubeletAccept },
    body: encodeBody(runtimeClass),
  })
  t.equal(pbCreate.status, 201)
  const stored: any = decodeBody(pbCreate.raw)
  t.strictSame(
    { handler: stored.handler, overhead: stored.overhead, scheduling: stored.scheduling },
    { handler: 'runsc', overhead: runtimeClass.overhead, scheduling: runtimeClass.scheduling },
  )
  const put = await request(`${sim.url}/apis/node.k8s.io/v1/runtimeclasses/gvisor`, {
    method: 'PUT',
    headers: json,
    body: { ...stored, metadata: { ...stored.metadata, labels: { a: 'b' } } },
  })
  t.equal(put.status, 200)
  t.equal(put.json.metadata.labels.a, 'b')
  const deleted = await request(`${sim.url}/apis/node.k8s.io/v1/runtimeclasses/gvisor`, { method: 'DELETE', headers: { Accept: kubeletAccept } })
  t.equal(deleted.status, 200)
  t.match(decodeBody(deleted.raw), { kind: 'RuntimeClass', metadata: { name: 'gvisor' } })
  t.equal((await request(`${sim.url}/apis/node.k8s.io/v1/runtimeclasses/gvisor`)).status, 404)

  const list = await request(`${sim.url}/apis/storage.k8s.io/v1/csidrivers`, { headers: { Accept: protobufContentType } })
  t.match(decodeBody(list.raw), { kind: 'CSIDriverList', apiVersion: 'storage.k8s.io/v1', items: [{ metadata: { name: 'ebs.csi.aws.com' } }] })
})

t.test('client-node and kubectl find and decode them', async t => {
  const sim = await simulator(t)
  const start = await firstStart(sim.url, node, { nodeUid })
  start.informers.stop()
  const kc = kubeConfigFor(sim.url, kubeletUserAgent)
  const csiNode = await kc.makeApiClient(k8s.StorageV1Api).readCSINode({ name: node })
  t.equal(csiNode.metadata?.name, node)
  t.equal(csiNode.metadata?.ownerReferences?.[0]?.uid, nodeUid)
  t.strictSame((await kc.makeApiClient(k8s.StorageV1Api).listCSIDriver()).items, [])
  t.strictSame((await kc.makeApiClient(k8s.NodeV1Api).listRuntimeClass()).items, [])

  const got = await kubectl(sim.url, ['get', 'csinodes,csidrivers,runtimeclasses', '-o', 'json'])
  t.equal(got.code, 0, got.stderr)
  t.strictSame(
    JSON.parse(got.stdout).items.map((o: any) => `${o.apiVersion} ${o.kind} ${o.metadata.name}`),
    ['storage.k8s.io/v1 CSINode edge-1'],
  )
  const table = await kubectl(sim.url, ['get', 'csinode', node])
  t.equal(table.code, 0, table.stderr)
  t.match(table.stdout, /^NAME\s+.*\nedge-1\s/)
})
