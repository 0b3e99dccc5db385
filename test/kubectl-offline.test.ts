// The operator on a disconnected node: kubectl (a component the hub does not cache) reads what the
// node's components cached, in the format it asks for and as Tables, before and after a SIGKILL
// of the hub.
import t from 'tap'
import { once } from 'node:events'
import { request } from 'undici'
import { startDemoCluster } from './simulator/demo.ts'
import { startHubProcess } from './helpers/hub-process.ts'
import { eventually } from './helpers/hub.ts'
import { kubectl } from './helpers/kubectl.ts'
import { fixtureBytes } from './helpers/fixtures.ts'
import { tempDir } from './helpers/temp-dirs.ts'

const kubelet = { 'user-agent': 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89' }
const kubeProxy = { 'user-agent': 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc', accept: 'application/vnd.kubernetes.protobuf, */*' }

async function dump(url: string, headers: Record<string, string>): Promise<number> {
  const res = await request(url, { headers })
  await res.body.dump()
  return res.statusCode
}

t.test('kubectl offline from what kube-proxy and kubelet cached, before and after a SIGKILL restart', async t => {
  const simulator = await startDemoCluster()
  t.teardown(() => simulator.close())
  const cacheDir = tempDir(t, 'outpost-kubectl-offline-')
  const first = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => first.kill())

  // what the node's components read: kube-proxy its Services and slices, kubelet its pods and Node
  t.equal(await dump(`${first.url}/api/v1/services`, kubeProxy), 200)
  t.equal(await dump(`${first.url}/apis/discovery.k8s.io/v1/endpointslices`, kubeProxy), 200)
  t.equal(await dump(`${first.url}/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2`, kubelet), 200)
  t.equal(await dump(`${first.url}/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker2`, kubelet), 200)
  // the operator ran kubectl once while the cloud was there (its discovery reads are kept)
  t.equal((await kubectl(first.url, ['get', 'namespaces'])).code, 0)

  await simulator.setFault('refuse')
  await eventually(async () => (await kubectl(first.url, ['get', 'namespaces'])).code !== 0, 20_000, 'the hub to go offline')

  const check = async (url: string, when: string) => {
    const slices = await kubectl(url, ['get', 'endpointslices', '-A'])
    t.equal(slices.code, 0, `${when}: kubectl get endpointslices -A: ${slices.stderr}`)
    t.match(slices.stdout, /NAMESPACE\s+NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE/, `${when}: the apiserver's columns`)
    t.match(slices.stdout, /default\s+svc-ud1-abcde\s+IPv4\s+\S+\s+10\.244\./, `${when}: kube-proxy's slices, unfiltered for kubectl`)

    const one = await kubectl(url, ['get', 'endpointslice', '-n', 'default', 'svc-ud1-abcde', '-o', 'json'])
    t.equal(one.code, 0, `${when}: get -o json: ${one.stderr}`)
    t.equal(JSON.parse(one.stdout).endpoints.length, 4, `${when}: the whole slice`)

    const pods = await kubectl(url, ['get', 'pods', '-A', '-o', 'wide', '--field-selector', 'spec.nodeName=kind-worker2'])
    t.equal(pods.code, 0, `${when}: get pods -o wide: ${pods.stderr}`)
    t.match(pods.stdout, /NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE/)
    t.match(pods.stdout, /united-deployment1-shanghai-hr6xt.*kind-worker2/)

    const all = await kubectl(url, ['get', 'pods', '-A'])
    t.not(all.code, 0, `${when}: all pods were never listed on this node: no answer rather than a short one`)
    t.match(all.stderr, /only as .*\(spec\.nodeName=kind-worker2\); this request asks for pods in all namespaces/)

    const node = await kubectl(url, ['get', 'node', 'kind-worker2', '-o', 'jsonpath={.metadata.labels.apps\\.openyurt\\.io/nodepool}'])
    t.equal(node.stdout, 'shanghai', `${when}: kubelet's Node`)

    const plain = await request(`${url}/api/v1/services`, { headers: { accept: '*/*' } })
    t.equal(plain.headers['content-type'], 'application/json', `${when}: */* gets JSON, as from the apiserver`)
    t.match(plain.headers['x-outpost-cache-source'], /^shared-(json|protobuf)$/, `${when}: and says whose cache answered (the watch cache kube-proxy shares)`)
    t.ok(((await plain.body.json()) as any).items.length > 0)
  }
  await check(first.url, 'offline')

  await first.kill()
  const second = await startHubProcess(simulator.url, cacheDir)
  t.teardown(() => second.kill())
  await check(second.url, 'after a SIGKILL and an offline restart')
})

t.test("kubectl offline from slices kube-proxy cached only as protobuf (the recorded apiserver's bytes)", async t => {
  const cacheDir = tempDir(t, 'outpost-kubectl-pb-')
  // a protobuf list as kube-proxy got it from a real kube-apiserver, replayed through the hub
  const replay = await startRecordedApiserver()
  t.teardown(() => replay.close())
  const viaReplay = await startHubProcess(replay.url, cacheDir)
  t.teardown(() => viaReplay.kill())
  t.equal(await dump(`${viaReplay.url}/apis/discovery.k8s.io/v1/endpointslices`, kubeProxy), 200)
  t.equal((await kubectl(viaReplay.url, ['get', 'namespaces'])).code, 0, 'discovery read once online')
  replay.dark = true
  await eventually(async () => (await kubectl(viaReplay.url, ['get', 'namespaces'])).code !== 0, 20_000, 'offline')
  const table = await kubectl(viaReplay.url, ['get', 'endpointslices', '-A'])
  t.equal(table.code, 0, table.stderr)
  t.match(table.stdout, /svc-ud1-abcde/)
  const json = await kubectl(viaReplay.url, ['get', 'endpointslice', '-n', 'default', 'svc-ud1-abcde', '-o', 'json'])
  t.equal(json.code, 0, json.stderr)
  t.equal(JSON.parse(json.stdout).metadata.name, 'svc-ud1-abcde', 'JSON made from the protobuf kube-proxy cached')
})

/**
 * A stand-in that answers kube-proxy's slice list with the recorded protobuf bytes, proxies
 * everything else to a demo simulator, and can go dark.
 */
async function startRecordedApiserver(): Promise<{ url: string; dark: boolean; close(): Promise<void> }> {
  const demo = await startDemoCluster()
  const http = await import('node:http')
  const state = { dark: false }
  const server = http.createServer(async (req, res) => {
    if (state.dark) return req.socket.destroy()
    if (req.url === '/apis/discovery.k8s.io/v1/endpointslices' && String(req.headers.accept).startsWith('application/vnd.kubernetes.protobuf')) {
      res.writeHead(200, { 'content-type': 'application/vnd.kubernetes.protobuf' })
      return res.end(fixtureBytes('list-endpointslices.pb'))
    }
    const upstream = await request(`${demo.url}${req.url}`, { method: req.method as 'GET', headers: req.headers as Record<string, string> })
    res.writeHead(upstream.statusCode, upstream.headers as Record<string, string>)
    upstream.body.pipe(res)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    get dark() {
      return state.dark
    },
    set dark(value: boolean) {
      state.dark = value
      if (value) server.closeAllConnections()
    },
    async close() {
      server.closeAllConnections()
      server.close()
      await demo.close()
    },
  }
}
