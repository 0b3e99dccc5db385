// What a hostile or broken local process can do with pod status writes while the cloud is away:
// only kubelet's kind of write, for a pod the hub holds as bound to this node, acting as the node,
// teaches the overlay; everything else is refused with why, and learns nothing. A flood of writes
// leaves the hub answering, the overlay bounded by the node's own pods, and its last word the last
// write's.
import t from 'tap'
import { request } from 'undici'
import { startHarness, goDark, eventually } from './helpers/hub.ts'
import { processTempDir } from './helpers/temp-dirs.ts'
import { listOwnPods, loadCluster, namespace, sendStatusPatch, statusPatch, uidOf } from './helpers/reboot-cluster.ts'

const kubelet = 'kubelet/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc'

async function patch(url: string, name: string, body: string, headers: Record<string, string> = {}) {
  const res = await request(`${url}/api/v1/namespaces/${namespace}/pods/${name}/status`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/strategic-merge-patch+json', 'user-agent': kubelet, ...headers },
    body,
  })
  const status = (await res.body.json()) as { message?: string; kind?: string }
  return { code: res.statusCode, kind: status.kind, message: status.message ?? '' }
}

t.test('offline, only kubelet-shaped writes for pods of this node teach the overlay', async t => {
  const cacheDir = processTempDir('outpost-overlay-attack-')
  const h = await startHarness({ config: { cacheDir } })
  let closed = false
  t.teardown(() => (closed ? undefined : h.close()))
  loadCluster(h.simulator)
  t.equal(await listOwnPods(h.url), 200)
  await goDark(h)
  const overlay = h.hub.overlay
  const refusals: [string, () => Promise<{ code: number; kind?: string; message: string }>, RegExp][] = [
    [
      'a pod of another node',
      () => patch(h.url, 'db-1', JSON.stringify(statusPatch('db-1', ['10.244.2.7'], ['10.9.9.9']))),
      /not bound to this node|not in the hub's cache/,
    ],
    ['a pod the hub never saw', () => patch(h.url, 'ghost', JSON.stringify(statusPatch('ghost', [], ['10.9.9.9']))), /not in the hub's cache/],
    ['not JSON', () => patch(h.url, 'web-1', '{"status":'), /cannot be applied \(the body is not JSON/],
    [
      'another uid (a pod of the same name, recreated)',
      () => patch(h.url, 'web-1', JSON.stringify({ metadata: { uid: 'someone-else' }, status: { podIP: '10.9.9.9' } })),
      /cannot be applied \(the write is for uid/,
    ],
    ['an address that is not an IP', () => patch(h.url, 'web-1', JSON.stringify({ status: { podIP: 'evil', podIPs: [{ ip: 'evil' }] } })), /cannot be applied/],
    ['apply-patch+yaml', () => patch(h.url, 'web-1', 'status: {}', { 'content-type': 'application/apply-patch+yaml' }), /cannot be applied/],
    [
      'nested 10,000 deep',
      () => patch(h.url, 'web-1', `{"status":${'['.repeat(10_000)}${']'.repeat(10_000)}}`),
      /cannot be applied \(the body nests deeper than/,
    ],
    [
      'its own credentials',
      () => patch(h.url, 'web-1', JSON.stringify(statusPatch('web-1', ['10.244.1.5'], ['10.9.9.9'])), { authorization: 'Bearer a-pod-token' }),
      /carries its own credentials/,
    ],
  ]
  for (const [what, send, why] of refusals) {
    const answer = await send()
    t.equal(answer.code, 503, `${what}: 503`)
    t.equal(answer.kind, 'Status', `${what}: a Status`)
    t.match(answer.message, why, `${what}: says why`)
    t.equal(overlay.size, 0, `${what}: nothing learned`)
  }

  // a flood: 400 writes flipping two pods' readiness, and 400 for names the hub never saw, at once
  const writes: Promise<unknown>[] = []
  for (let i = 0; i < 400; i++) {
    const name = i % 2 === 0 ? 'web-1' : 'web-2'
    const ips = name === 'web-1' ? ['10.244.1.5'] : ['10.244.1.6', 'fd00::6']
    writes.push(sendStatusPatch(h.url, name, statusPatch(name, ips, name === 'web-1' ? ['10.244.1.9'] : ['10.244.1.10', 'fd00::10'], i % 4 < 2)))
    writes.push(patch(h.url, `ghost-${i}`, JSON.stringify({ metadata: { uid: uidOf('web-1') }, status: { podIP: '10.9.9.9' } })))
  }
  // the hub keeps answering the node meanwhile
  const started = Date.now()
  const get = await request(`${h.url}/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2`, { headers: { 'user-agent': kubelet } })
  await get.body.dump()
  t.equal(get.statusCode, 200, `kubelet's list answered during the flood (${Date.now() - started} ms)`)
  await Promise.all(writes)
  t.equal(overlay.size, 2, 'the overlay holds the two pods of this node written to, nothing of the 400 unknown names')
  // the flood's order over many connections is the hub's to see; kubelet's next write wins
  await sendStatusPatch(h.url, 'web-1', statusPatch('web-1', ['10.244.1.5'], ['10.244.1.9'], false))
  await sendStatusPatch(h.url, 'web-2', statusPatch('web-2', ['10.244.1.6', 'fd00::6'], ['10.244.1.10', 'fd00::10'], true))
  const last = (name: string) => overlay.input().pods.get(`${namespace}/${name}`)
  t.same([last('web-1')?.ips, last('web-1')?.ready], [['10.244.1.9'], false], "web-1 as kubelet's last write says")
  t.same([last('web-2')?.ips, last('web-2')?.ready], [['10.244.1.10', 'fd00::10'], true], "web-2 as kubelet's last write says")

  // on disk as well: a hub started again on the cache dir has the same
  closed = true
  await h.close()
  const again = await startHarness({ config: { cacheDir } })
  t.teardown(() => again.close())
  await eventually(() => again.hub.overlay.size === 2, 10_000, 'the overlay read back')
  t.same(again.hub.overlay.input().pods.get(`${namespace}/web-1`)?.ips, ['10.244.1.9'])
})

t.test('online, a status write goes to the apiserver and teaches the overlay nothing', async t => {
  const h = await startHarness()
  t.teardown(() => h.close())
  loadCluster(h.simulator)
  t.equal(await listOwnPods(h.url), 200)
  const answer = await sendStatusPatch(h.url, 'web-1', statusPatch('web-1', ['10.244.1.5'], ['10.244.1.9']))
  t.equal(answer.status, 200, 'the apiserver took it')
  t.equal(h.hub.overlay.size, 0)
  t.equal(h.simulator.get('v1', 'Pod', namespace, 'web-1').status.podIP, '10.244.1.9', 'and holds it')
})
