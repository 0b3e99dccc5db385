// What the demo prints: the steps to try, each with the command to paste and what it shows, and a
// short line each time the cloud or the hub's view of it changes. test/demo.e2e.ts runs every
// command printed here, in this order, and checks what the text says they show.

export interface BannerInput {
  node: string
  proxyUrl: string
  adminUrl: string
  controlUrl: string
  /** the HTTPS port and the CA that verifies it, when it is on */
  https?: { url: string; ca: string }
  /** whether keys work here (stdin is a terminal) */
  keys: boolean
}

const rule = '─'.repeat(80)

export function banner(b: BannerInput): string {
  const kubectl = `kubectl --server ${b.proxyUrl}`
  const slice = `${b.proxyUrl}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde`
  const press = b.keys ? 'press c here, or ' : ''
  return [
    '',
    rule,
    `outpost demo: the hub serves node ${b.node} on ${b.proxyUrl}, in front of an apiserver simulator (the "cloud")`,
    "with a three-pool cluster. The demo read what this node's kubelet and kube-proxy read at start, as they do;",
    'the hub keeps it on disk. Try, in another terminal:',
    '',
    ' 1. Watch the EndpointSlices, and leave it running: the watch stays open while the cloud is away. (Columns of',
    "    its own: a watch of objects is served from the hub's cache; kubectl's default, a Table, comes from the cloud.)",
    `      ${kubectl} get endpointslices -A -w -o custom-columns='NAME:.metadata.name,ENDPOINTS:.endpoints[*].addresses[*]'`,
    ` 2. Take the cloud away (${press}run this): the simulator refuses every connection and cuts the hub's watches.`,
    `      curl -X POST ${b.controlUrl}/cloud/off`,
    '    The hub notices within seconds (it says so here), and its metrics say so too:',
    `      curl -s ${b.adminUrl}/metrics | grep ^outpost_cloud_online`,
    '        outpost_cloud_online 0',
    ' 3. Reads go on, answered from the cache:',
    `      ${kubectl} get endpointslices -A`,
    "    and kube-proxy keeps its view, filtered to this node's pool: 2 of svc-ud1-abcde's 4 endpoints.",
    `      curl -s -A kube-proxy ${slice} | grep -o '10\\.244\\.[0-9.]*'`,
    `      curl -s ${slice} | grep -o '10\\.244\\.[0-9.]*'`,
    ' 4. Writes are refused with a Status (503 ServiceUnavailable), and nothing is written:',
    `      ${kubectl} label endpointslice -n default svc-ud1-abcde demo=offline`,
    '        Error from server (ServiceUnavailable): no apiserver reachable: ... nothing was written',
    ` 5. Bring the cloud back (${press}run this): the hub resumes its watches where they stopped.`,
    `      curl -X POST ${b.controlUrl}/cloud/on`,
    '    The watch of step 1 prints svc-ud1-outage-1, which the cloud added while it was away; nothing relisted.',
    '',
    ...(b.https
      ? [
          'Also the HTTPS port, for pods and remote clients (its own CA here; the simulator takes any token):',
          `      curl -s --cacert ${b.https.ca} -H "Authorization: Bearer demo" ${b.https.url}/api/v1/namespaces`,
        ]
      : []),
    `The admin port: ${b.adminUrl}/v1/readyz, /debug/cache, /debug/filters, /metrics. Stop: ${b.keys ? 'q or ' : ''}Ctrl-C.`,
    rule,
    '',
  ].join('\n')
}

/** One line, set apart from the logs, when the cloud is switched or the hub's view of it changes. */
export function statusLine(text: string): string {
  return `\n>>> ${text}\n\n`
}

export function hubStateLine(state: 'online' | 'offline', controlUrl: string, keys: boolean): string {
  return state === 'offline'
    ? statusLine(
        `the hub sees the cloud offline: it answers reads from its cache, refuses writes (steps 3 and 4). Bring the cloud back: ${keys ? 'c, or ' : ''}curl -X POST ${controlUrl}/cloud/on`,
      )
    : statusLine(`the hub sees the cloud online again: its watches resume where they stopped.`)
}
