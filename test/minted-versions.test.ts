// Versions the pod overlay minted offline never meet real ones: back online, a watch that was sent a
// minted version ends with the apiserver's 410 Expired before it could be sent a lower real one, and
// a client-node informer holding minted versions relists from the hub and holds real versions only.
// (What a request carrying a minted version gets is pod-overlay.test.ts's table; a real one going to
// the apiserver as sent is offline-reboot.test.ts's.)
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { request } from 'undici'
import { comeBack, eventually, goDark, startHarness } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'
import { endpointsSeen, listOwnPods, loadCluster, namespace, sendStatusPatch, statusPatch } from './helpers/reboot-cluster.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const kubeProxy = 'kube-proxy/v1.24.0 (linux/amd64) kubernetes/2cc6ddc'
const allSlices = '/apis/discovery.k8s.io/v1/endpointslices'

/** A raw JSON watch as kube-proxy opens it: every event's type and version, in order. */
async function rawWatch(hub: string, resourceVersion: string) {
  const res = await request(`${hub}${allSlices}?watch=1&allowWatchBookmarks=true&resourceVersion=${resourceVersion}`, { headers: { 'user-agent': kubeProxy } })
  const events: { type: string; rv: string; code?: number }[] = []
  let ended = false
  let rest = ''
  res.body.setEncoding('utf8')
  res.body.on('data', (chunk: string) => {
    rest += chunk
    let nl
    while ((nl = rest.indexOf('\n')) >= 0) {
      const event = JSON.parse(rest.slice(0, nl))
      rest = rest.slice(nl + 1)
      events.push({ type: event.type, rv: event.object?.metadata?.resourceVersion ?? '', code: event.object?.code })
    }
  })
  res.body.on('end', () => (ended = true))
  res.body.on('error', () => (ended = true))
  return { events, ended: () => ended, close: () => res.body.destroy() }
}

t.test('back online, watches sent a minted version end with 410; the informer relists and holds real versions only', async t => {
  const cacheDir = tempDir(t, 'outpost-minted-')
  const h = await startHarness({ config: { cacheDir } })
  t.teardown(() => h.close({ keepCacheDir: true }))
  loadCluster(h.simulator)
  t.equal(await listOwnPods(h.url), 200)
  const kc = kubeConfigFor(h.url, kubeProxy)
  const api = kc.makeApiClient(k8s.DiscoveryV1Api)
  let lists = 0
  const informer = k8s.makeInformer(kc, allSlices, () => {
    lists++
    return api.listEndpointSliceForAllNamespaces()
  })
  const versions: bigint[] = []
  const seen = (o: any) => versions.push(BigInt(o.metadata.resourceVersion))
  informer.on('add', seen)
  informer.on('update', seen)
  informer.on('error', () => {})
  await informer.start()
  t.teardown(() => informer.stop())
  const listed = (await (await request(`${h.url}${allSlices}`, { headers: { 'user-agent': kubeProxy } })).body.json()) as any
  const watch = await rawWatch(h.url, listed.metadata.resourceVersion)
  t.teardown(() => watch.close())

  await goDark(h)
  t.equal((await sendStatusPatch(h.url, 'web-1', statusPatch('web-1', ['10.244.1.5'], ['10.244.1.9']))).status, 503)
  await eventually(() => endpointsSeen(informer.list(namespace)).includes('web-v4: web-1=10.244.1.9 ready'), 10_000, 'the informer to see the overlay')
  const range = h.hub.overlay.mintedRange()!
  t.ok(range, 'a version was minted')
  const isMinted = (v: bigint) => v > range.over && v <= range.top
  t.ok(versions.some(isMinted), 'offline, the informer took the change at a minted version')
  await eventually(() => watch.events.some(e => isMinted(BigInt(e.rv || '0'))), 10_000, 'the raw watch to move to the minted version')

  // the cloud moves on meanwhile; then it is back
  const v4 = h.simulator.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, 'web-v4')
  h.simulator.update({ ...v4, metadata: { ...v4.metadata, labels: { ...v4.metadata.labels, touched: 'yes' } } })
  const listsBefore = lists
  const mark = versions.length
  await comeBack(h)
  await eventually(() => watch.ended(), 10_000, 'the watch sent a minted version to end')
  t.match(watch.events.at(-1), { type: 'ERROR', code: 410 }, 'with the apiserver’s 410 Expired')
  const rvs = watch.events.filter(e => e.rv !== '' && e.type !== 'ERROR').map(e => BigInt(e.rv))
  t.ok(
    rvs.every((v, i) => i === 0 || v >= rvs[i - 1]!),
    `no version the watch carried went back: ${rvs.join(' ')}`,
  )
  await eventually(() => lists > listsBefore, 10_000, 'the informer to relist')
  await eventually(
    () => informer.list(namespace).every(o => !isMinted(BigInt(o.metadata!.resourceVersion!))),
    10_000,
    'the informer to hold real versions only',
  )
  // the relist is read from the hub's memory, which may not have caught up with the cloud yet: the watch brings the rest
  const atApiserver = () =>
    informer
      .list(namespace)
      .every(
        o => o.metadata!.resourceVersion === h.simulator.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, o.metadata!.name!).metadata.resourceVersion,
      )
  await eventually(atApiserver, 10_000, "every slice at the apiserver's version")
  t.ok(atApiserver(), "every slice at the apiserver's version")
  t.ok(
    versions.slice(mark).every(v => !isMinted(v)),
    'after the return, no minted version reached a handler',
  )
})
