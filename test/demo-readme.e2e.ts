// The README's commands, run as written against the demo (`npm start`) and checked for what they
// give, in README order: the quick start takes the cloud away and brings it back on the way.
import t from 'tap'
import type { Test } from 'tap'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { commandsIn, startDemo } from './helpers/demo.ts'

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }

// What every curl command in the README must give against the demo (node kind-worker2, pool
// shanghai; the cluster of test/fixtures/cluster-objects.yaml): its HTTP status and its content.
interface Ran {
  command: string
  /** curl's exit code */
  code: number
  /** the HTTP status curl saw (000: none) */
  status: string
  stdout: string
}

const addresses = (slice: any): string[] => (slice?.endpoints ?? []).flatMap((e: any) => e.addresses).sort()
const named = (items: any[] | undefined, name: string) => items?.find(i => i.metadata?.name === name)
// svc-ud1-abcde has endpoints on kind-worker (hangzhou, two), kind-worker2 and kind-worker3 (shanghai)
const ud1All = ['10.244.1.3', '10.244.2.2', '10.244.2.3', '10.244.3.2']
const ud1Shanghai = ['10.244.1.3', '10.244.3.2']

const readmeChecks: { what: string; matches(command: string): boolean; exitCode?: number; check(t: Test, ran: Ran): void }[] = [
  {
    what: 'the cloud taken away: the answer comes once the hub has noticed',
    matches: c => c.endsWith(':10270/cloud/off'),
    check: (t, ran) => t.match(ran.stdout, /^cloud off; the hub noticed in [\d.]+ s/),
  },
  {
    what: 'the cloud offline, by the metric',
    matches: c => c.endsWith('/metrics | grep ^outpost_cloud_online'),
    check: (t, ran) => t.equal(ran.stdout, 'outpost_cloud_online 0\n'),
  },
  {
    what: "kube-proxy's endpoints of svc-ud1-abcde, offline",
    matches: c => c.includes('-A kube-proxy ') && c.endsWith("/endpointslices/svc-ud1-abcde | grep -o '10\\.244\\.[0-9.]*'"),
    check: (t, ran) => t.same(ran.stdout.trim().split('\n'), ud1Shanghai, 'the 2 in this pool'),
  },
  {
    what: 'every endpoint of svc-ud1-abcde, offline',
    matches: c => !c.includes(' -A ') && c.endsWith("/endpointslices/svc-ud1-abcde | grep -o '10\\.244\\.[0-9.]*'"),
    check: (t, ran) => t.same(ran.stdout.trim().split('\n').sort(), ud1All, 'all 4: curl is not a filtered component'),
  },
  {
    what: 'the cloud back: the answer comes once the hub is online again',
    matches: c => c.endsWith(':10270/cloud/on'),
    check: (t, ran) => t.match(ran.stdout, /^cloud on; the hub is online again after [\d.]+ s/),
  },
  {
    what: 'svc-ud1-abcde as kube-proxy sees it',
    matches: c => c.includes('-A kube-proxy ') && c.endsWith('/endpointslices/svc-ud1-abcde'),
    check(t, ran) {
      const slice = JSON.parse(ran.stdout)
      t.match(slice, { kind: 'EndpointSlice', metadata: { name: 'svc-ud1-abcde' } })
      t.same(addresses(slice), ud1Shanghai, 'only the shanghai endpoints')
    },
  },
  {
    what: 'svc-ud1-abcde as the cluster holds it',
    matches: c => !c.includes(' -A ') && c.endsWith(':10261/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde'),
    check(t, ran) {
      const slice = JSON.parse(ran.stdout)
      t.match(slice, { kind: 'EndpointSlice', metadata: { name: 'svc-ud1-abcde' } })
      t.same(addresses(slice), ud1All, 'every endpoint')
    },
  },
  { what: 'liveness', matches: c => c.endsWith('/v1/healthz'), check: (t, ran) => t.equal(ran.stdout, 'ok\n') },
  { what: 'readiness', matches: c => c.endsWith('/v1/readyz'), check: (t, ran) => t.match(ran.stdout, /^ok\n/) },
  {
    what: 'every slice as kube-proxy sees it',
    matches: c => c.includes('-A kube-proxy/') && c.endsWith('/apis/discovery.k8s.io/v1/endpointslices'),
    check(t, ran) {
      const list = JSON.parse(ran.stdout)
      t.equal(list.kind, 'EndpointSliceList')
      t.same(addresses(named(list.items, 'svc-ud1-abcde')), ud1Shanghai, 'svc-ud1 (openyurt.io/nodepool): this pool only')
      t.same(addresses(named(list.items, 'svc-host-klmno')), ['10.244.1.3'], 'svc-host (kubernetes.io/hostname): this node only')
      t.same(addresses(named(list.items, 'svc-ud1-without-topology-fghij')), ['10.244.1.3', '10.244.2.3'], 'no annotation: untouched')
    },
  },
  {
    what: "kubelet's pods, with the response headers",
    matches: c => c.includes('-A kubelet/') && c.includes('/api/v1/pods?fieldSelector=spec.nodeName=kind-worker2'),
    check(t, ran) {
      const split = ran.stdout.indexOf('\r\n\r\n')
      const head = ran.stdout.slice(0, split)
      t.match(head, /^HTTP\/1\.1 200 OK\r\n/, 'the status line')
      t.match(head, /^content-type: application\/json/im, 'and the headers')
      const pods = JSON.parse(ran.stdout.slice(split + 4))
      t.equal(pods.kind, 'PodList')
      t.same(pods.items.map((p: any) => p.metadata.name).sort(), ['nginx-shanghai-9jvjb', 'united-deployment1-shanghai-hr6xt'], "this node's pods")
      t.ok(
        pods.items.every((p: any) => p.spec.nodeName === 'kind-worker2'),
        'and only those',
      )
    },
  },
  {
    what: 'a watch, cut by --max-time',
    matches: c => c.includes('watch=true'),
    // curl --max-time ends the watch (exit 28): it was still open
    exitCode: 28,
    check(t, ran) {
      const events = ran.stdout
        .trim()
        .split('\n')
        .map(line => JSON.parse(line))
      t.ok(
        events.every(e => e.type === 'ADDED' || e.type === 'BOOKMARK'),
        'whole events: the state as ADDED (and BOOKMARKs)',
      )
      const added = events.filter(e => e.type === 'ADDED').map(e => e.object)
      t.same(addresses(named(added, 'svc-ud1-abcde')), ud1All, 'svc-ud1-abcde among them')
    },
  },
  {
    what: "kubelet's Node at resourceVersion=0, from the nodes watch cache",
    matches: c => c.includes('/api/v1/nodes/kind-worker2?resourceVersion=0'),
    check(t, ran) {
      t.match(JSON.parse(ran.stdout), { kind: 'Node', apiVersion: 'v1', metadata: { name: 'kind-worker2' } })
    },
  },
  {
    what: 'the Services a field selector picks, answered from the one services cache',
    matches: c => c.includes('/api/v1/services?resourceVersion=0&fieldSelector=spec.clusterIP%3D10.96.0.1'),
    check(t, ran) {
      const list = JSON.parse(ran.stdout)
      t.equal(list.kind, 'ServiceList')
      t.same(
        list.items.map((s: any) => `${s.metadata.namespace}/${s.metadata.name}`),
        ['default/kubernetes'],
        'only the Service with that clusterIP',
      )
    },
  },
  {
    what: 'the cache overview',
    matches: c => c.endsWith(':10267/debug/cache'),
    check(t, ran) {
      const cache = JSON.parse(ran.stdout)
      t.equal(cache.cloud, 'online')
      const collection = (component: string, resource: string) => cache.collections?.find((c: any) => c.component === component && c.resource === resource)
      // what node components list and watch all day is kept once, in the shared watch caches' collection
      t.match(
        collection('shared-json', 'endpointslices.v1.discovery.k8s.io'),
        { listed: true, scopes: ['all'], origin: 'cloud' },
        "kube-proxy's slices, listed whole",
      )
      t.ok(collection('shared-json', 'endpointslices.v1.discovery.k8s.io')?.objects >= 4, 'with their objects')
      t.match(
        collection('shared-json', 'pods.v1.core'),
        { objects: 2, scopes: ['fieldSelector=spec.nodeName=kind-worker2'] },
        "kubelet's pods, in kubelet's scope",
      )
      const slices = cache.watchCaches?.find((w: any) => w.resource === 'endpointslices.discovery.k8s.io' && w.scope === 'all')
      t.ok(slices?.synced && slices.components.includes('kube-proxy'), 'one watch cache for the slices, serving kube-proxy (and curl)')
    },
  },
  {
    what: "kube-proxy's cached slices",
    matches: c => c.endsWith(':10267/debug/cache/kube-proxy/endpointslices.v1.discovery.k8s.io'),
    check(t, ran) {
      const cached = JSON.parse(ran.stdout)
      t.match(cached, { component: 'kube-proxy', resource: 'endpointslices.v1.discovery.k8s.io', filtered: false })
      t.same(addresses(named(cached.items, 'svc-ud1-abcde')), ud1All, 'stored unfiltered')
    },
  },
  {
    what: 'one cached slice',
    matches: c => c.endsWith(':10267/debug/cache/kube-proxy/endpointslices.v1.discovery.k8s.io/default/svc-ud1-abcde'),
    check(t, ran) {
      const slice = JSON.parse(ran.stdout)
      t.match(slice, { kind: 'EndpointSlice', metadata: { name: 'svc-ud1-abcde', namespace: 'default' } })
      t.same(addresses(slice), ud1All, 'as the apiserver sent it')
    },
  },
  {
    what: 'one cached slice after the filters',
    matches: c => c.includes('/default/svc-ud1-abcde?filtered=true'),
    check(t, ran) {
      const slice = JSON.parse(ran.stdout)
      t.match(slice, { kind: 'EndpointSlice', metadata: { name: 'svc-ud1-abcde' } })
      t.same(addresses(slice), ud1Shanghai, 'what kube-proxy receives: this pool only')
    },
  },
  {
    what: 'the topology context',
    matches: c => c.endsWith(':10267/debug/topology'),
    check(t, ran) {
      const topology = JSON.parse(ran.stdout)
      t.match(topology, { node: 'kind-worker2', known: true, pool: 'shanghai', poolNodes: ['kind-worker2', 'kind-worker3'] })
      t.same(topology.services['default/svc-host']?.keys, [{ key: 'kubernetes.io/hostname', keeps: ['kind-worker2'] }], 'svc-host keeps this node')
      const ud1 = topology.services['default/svc-ud1']?.keys?.[0]
      t.equal(ud1?.key, 'openyurt.io/nodepool')
      t.ok(
        ud1?.keeps.length > 0 && ud1.keeps.every((n: string) => n === 'kind-worker2' || n === 'kind-worker3'),
        `svc-ud1 keeps the pool's endpoints: ${ud1?.keeps}`,
      )
    },
  },
  {
    what: 'leader hubs, off in the demo',
    matches: c => c.endsWith(':10267/debug/pool'),
    check(t, ran) {
      t.match(JSON.parse(ran.stdout), { enabled: false, why: /--pool-sharing=off/ })
    },
  },
  {
    what: 'the filters',
    matches: c => c.endsWith(':10267/debug/filters'),
    check(t, ran) {
      const filters = Object.fromEntries((JSON.parse(ran.stdout).filters as any[]).map(f => [f.name, f]))
      t.same(Object.keys(filters).sort(), [
        'discardcloudservice',
        'forwardkubesvctraffic',
        'inclusterconfig',
        'localendpoints',
        'masterservice',
        'nodeportisolation',
        'serviceenvupdater',
        'servicetopology',
      ])
      t.match(filters.servicetopology, { enabled: true, components: ['kube-proxy', 'coredns', 'nginx-ingress-controller'] })
      t.ok(filters.servicetopology.changed > 0, 'it changed what kube-proxy was sent above')
      t.match(filters.masterservice, { enabled: false, off: /--advertise-address/ }, 'off in the demo, and says why')
    },
  },
  {
    what: 'the metrics',
    matches: c => c.endsWith(':10267/metrics | grep ^outpost_'),
    check(t, ran) {
      const lines = ran.stdout.trim().split('\n')
      t.ok(lines.length > 10 && lines.every(l => l.startsWith('outpost_')), `${lines.length} lines, all outpost_`)
      t.match(
        ran.stdout,
        /^outpost_requests_total\{component="kube-proxy",verb="list",resource="endpointslices\.discovery\.k8s\.io",code="200",source="cache"\} [1-9]/m,
      )
      t.match(ran.stdout, /^outpost_cloud_online 1$/m)
      t.match(
        ran.stdout,
        new RegExp(`^outpost_build_info\\{version="${pkg.version.replaceAll('.', '\\.')}",node_version="v\\d+\\.\\d+\\.\\d+"\\} 1$`, 'm'),
        'the version',
      )
      // counters as a Prometheus user expects them: *_total (rate() and increase() work on them)
      t.match(ran.stdout, /^outpost_watch_cache_replayed_events_total\{resource="endpointslices\.discovery\.k8s\.io",scope="all",format="json"\} \d+$/m)
      t.match(ran.stdout, /^outpost_watch_cache_expired_total\{resource="endpointslices\.discovery\.k8s\.io",scope="all",format="json"\} \d+$/m)
    },
  },
]

// Not runnable as written against the demo: a placeholder path (the demo prints the real command,
// checked above) and a node's own CA and token.
const notRunnable = [/outpost-demo-pki-XXXXXX/, /\$TOKEN/]

t.test('every curl command in the README runs as written against the demo and answers what it should', async t => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  const all = readme.split('\n').filter(line => line.startsWith('curl '))
  const commands = all.filter(c => !notRunnable.some(r => r.test(c)))
  t.equal(all.length - commands.length, notRunnable.length, 'only the known placeholders are left out')
  const section = readme.slice(readme.indexOf('## Debugging with curl'), readme.indexOf('\n## ', readme.indexOf('## Debugging with curl') + 1))
  t.ok(section.split('\n').filter(line => line.startsWith('curl ')).length >= 10, 'the "Debugging with curl" section among them')
  const checks = commands.map(c => readmeChecks.filter(check => check.matches(c)))
  t.same(
    commands.filter((_, i) => checks[i].length !== 1),
    [],
    'every command has exactly one check',
  )
  t.same(
    readmeChecks.filter(check => !commands.some(c => check.matches(c))).map(c => c.what),
    [],
    'and every check a command',
  )

  const demo = await startDemo(t)
  const { port, adminPort, controlPort } = demo
  // the quick start shows the banner's commands, at the default ports and with a placeholder CA path
  const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1))
  const banner = demo.output().slice(demo.output().lastIndexOf('outpost demo:'))
  t.same(
    commandsIn(quickStart),
    commandsIn(banner).map(c =>
      c
        .replaceAll(`:${port}/`, ':10261/')
        .replaceAll(`:${port} `, ':10261 ')
        .replaceAll(`:${adminPort}/`, ':10267/')
        .replaceAll(`:${controlPort}/`, ':10270/')
        .replace(/https:\/\/127\.0\.0\.1:\d+\//, 'https://127.0.0.1:10268/')
        .replace(/--cacert \S+\/ca\.crt/, '--cacert /tmp/outpost-demo-pki-XXXXXX/ca.crt'),
    ),
    "the quick start's commands are the banner's",
  )

  // In README order (the cache views show what the commands before them read). Only the ports
  // differ from the README, the tests run side by side on free ones; and curl also reports the
  // HTTP status, on stderr, so a pipe does not see it.
  for (const [i, command] of commands.entries()) {
    const line = command
      .replaceAll(':10261/', `:${port}/`)
      .replaceAll(':10267/', `:${adminPort}/`)
      .replaceAll(':10270/', `:${controlPort}/`)
      .replace(/^curl /, "curl -w '%{stderr}outpost-test-status=%{http_code}\\n' ")
    const ran = await new Promise<Ran>(resolve =>
      execFile('sh', ['-c', line], (error, stdout, stderr) =>
        resolve({ command, code: error ? Number((error as any).code) : 0, status: /outpost-test-status=(\d+)/.exec(stderr)?.[1] ?? 'none', stdout }),
      ),
    )
    const check = checks[i][0]
    await t.test(`${command}: ${check.what}`, async t => {
      t.equal(ran.status, '200', 'HTTP 200')
      t.equal(ran.code, check.exitCode ?? 0, `curl exits ${check.exitCode ?? 0}`)
      check.check(t, ran)
    })
  }
})
