// statusAfterWrite / localPodOf: kubelet's pod status writes applied as kube-apiserver applies them,
// and what the pod's endpoints show after. Tables of cases, then the real kubelet v1.24 patches.
import t from 'tap'
import { encodeBody } from '../lib/codec/typed.ts'
import { localPodOf, maxWriteBytes, statusAfterWrite } from '../lib/overlay/pod-status.ts'
import type { PodJson, StatusWrite } from '../lib/overlay/pod-status.ts'
import type { LocalPod } from '../filters/local-pod.ts'
import { fixtureJson } from './helpers/fixtures.ts'

const uid = '0d8778a0-579e-4471-93ef-0173861c1e41'
const cond = (type: string, status = 'True') => ({ type, status, lastTransitionTime: '2026-11-25T13:00:00Z' })
const allConditions = (ready = 'True') => [cond('Initialized'), cond('Ready', ready), cond('ContainersReady', ready), cond('PodScheduled')]
const order = (...types: string[]) => types.map(type => ({ type }))

/** A pod of edge-1 as the cloud last said it: running at 10.244.1.5, ready. */
function pod(status: Record<string, unknown> = {}, metadata: PodJson['metadata'] = {}): PodJson {
  return {
    metadata: { namespace: 'kl-edge', name: 'edge-pod', uid, ...metadata },
    spec: { nodeName: 'edge-1' },
    status: { phase: 'Running', conditions: allConditions(), podIP: '10.244.1.5', podIPs: [{ ip: '10.244.1.5' }], ...status },
  }
}
const dualStack = pod({ podIPs: [{ ip: '10.244.1.5' }, { ip: 'fd00:10:244:1::5' }] })

const json = (v: unknown) => Buffer.from(JSON.stringify(v))
const smp = (body: unknown): StatusWrite => ({ verb: 'patch', contentType: 'application/strategic-merge-patch+json', body: json(body) })
const mergePatch = (body: unknown): StatusWrite => ({ verb: 'patch', contentType: 'application/merge-patch+json', body: json(body) })
const jsonPatch = (body: unknown): StatusWrite => ({ verb: 'patch', contentType: 'application/json-patch+json', body: json(body) })
const put = (body: unknown, contentType: string | undefined = 'application/json'): StatusWrite => ({ verb: 'update', contentType, body: json(body) })

/** What kubelet sends after an offline reboot: a two-way strategic merge of the old status and the new one. */
const rebootPatch = {
  metadata: { uid },
  status: {
    '$setElementOrder/conditions': order('Initialized', 'Ready', 'ContainersReady', 'PodScheduled'),
    '$setElementOrder/podIPs': [{ ip: '10.244.1.9' }],
    conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-11-25T14:00:00Z' }],
    podIP: '10.244.1.9',
    podIPs: [{ ip: '10.244.1.9' }, { $patch: 'delete', ip: '10.244.1.5' }],
  },
}

const local = (fields: Partial<LocalPod>): LocalPod => ({
  namespace: 'kl-edge',
  name: 'edge-pod',
  uid,
  ips: ['10.244.1.5'],
  ready: true,
  serving: true,
  gone: false,
  terminating: false,
  ...fields,
})

const bad = (reason: string) => ({ invalid: reason })
const kubeletOrder = ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled']
const notReady = { ready: false, serving: false }
const deep = (n: number): unknown => (n === 0 ? 1 : { a: deep(n - 1) })
const dualStackReboot = {
  metadata: { uid },
  status: {
    '$setElementOrder/podIPs': [{ ip: '10.244.1.9' }, { ip: 'fd00:10:244:1::9' }],
    podIP: '10.244.1.9',
    podIPs: [{ ip: '10.244.1.9' }, { ip: 'fd00:10:244:1::9' }, { $patch: 'delete', ip: '10.244.1.5' }, { $patch: 'delete', ip: 'fd00:10:244:1::5' }],
  },
}
const jsonPatchOfAll = [
  { op: 'test', path: '/metadata/uid', value: uid },
  { op: 'replace', path: '/status/podIP', value: '10.244.1.9' },
  { op: 'replace', path: '/status/podIPs/0/ip', value: '10.244.1.9' },
  { op: 'add', path: '/status/podIPs/-', value: { ip: 'fd00::9' } },
  { op: 'move', from: '/status/conditions/1', path: '/status/conditions/0' },
  { op: 'copy', from: '/status/phase', path: '/status/reason' },
  { op: 'remove', path: '/status/reason' },
]
const protobufPut = (p: PodJson): StatusWrite => ({
  verb: 'update',
  contentType: 'application/vnd.kubernetes.protobuf',
  body: encodeBody({ kind: 'Pod', apiVersion: 'v1', ...p }),
})

/**
 * [name, write, the pod's endpoints after it (fields that differ from the cloud's running, ready pod at
 * 10.244.1.5) or part of the reason it is refused, { base (default pod()), condition types in order after }]
 */
type Case = [string, StatusWrite, Partial<LocalPod> | { invalid: string }, { base?: PodJson; conditions?: string[] }?]

const cases: Case[] = [
  // kubelet's strategic merge patches
  ['reboot: new address, old one deleted', smp(rebootPatch), { ips: ['10.244.1.9'] }, { conditions: kubeletOrder }],
  ['reboot, dual-stack: both families move', smp(dualStackReboot), { ips: ['10.244.1.9', 'fd00:10:244:1::9'] }, { base: dualStack }],
  [
    'reboot while still starting: new address, not ready',
    smp({ ...rebootPatch, status: { ...rebootPatch.status, conditions: [cond('Ready', 'False'), cond('ContainersReady', 'False')] } }),
    { ips: ['10.244.1.9'], ...notReady },
    { conditions: kubeletOrder },
  ],
  ['pod turns unready', smp({ status: { '$setElementOrder/conditions': order(...kubeletOrder), conditions: [cond('Ready', 'False')] } }), notReady],
  [
    'a terminating pod serves, is not ready',
    smp(rebootPatch),
    { ips: ['10.244.1.9'], ready: false, terminating: true },
    { base: pod({}, { deletionTimestamp: '2026-11-25T14:00:00Z' }) },
  ],
  ['a failed pod is gone', smp({ status: { phase: 'Failed', conditions: [cond('Ready', 'False')] } }), { ...notReady, gone: true }],
  ['a succeeded pod is gone', smp({ status: { phase: 'Succeeded' } }), { gone: true }],
  ['null deletes: no address any more', smp({ status: { podIP: null, podIPs: null } }), { ips: [] }],
  ['only podIP set (older kubelet): podIP wins over podIPs', smp({ status: { podIP: '10.244.1.9' } }), { ips: ['10.244.1.9'] }],
  ['a base without podIPs takes the patch’s list', smp(rebootPatch), { ips: ['10.244.1.9'] }, { base: pod({ podIP: undefined, podIPs: undefined }) }],
  [
    'an order alone reorders',
    smp({ status: { '$setElementOrder/conditions': order('PodScheduled', 'Initialized', 'Ready', 'ContainersReady') } }),
    {},
    { conditions: ['PodScheduled', 'Initialized', 'Ready', 'ContainersReady'] },
  ],
  // strategicpatch's mergeSortedSlice puts an entry the original lacks before the original's
  [
    'a new condition without an order goes first, as the apiserver puts it',
    smp({ status: { conditions: [cond('DisruptionTarget')] } }),
    {},
    { conditions: ['DisruptionTarget', ...kubeletOrder] },
  ],
  [
    'server-only conditions keep their places around the ordered ones',
    smp({ status: { '$setElementOrder/conditions': order('ContainersReady', 'Ready'), conditions: [cond('Ready', 'False')] } }),
    notReady,
    { conditions: ['Initialized', 'ContainersReady', 'Ready', 'PodScheduled'] },
  ],
  [
    '$patch: delete removes the Ready condition',
    smp({ status: { conditions: [{ $patch: 'delete', type: 'Ready' }] } }),
    notReady,
    { conditions: ['Initialized', 'ContainersReady', 'PodScheduled'] },
  ],
  ['$patch: replace replaces the list', smp({ status: { conditions: [{ $patch: 'replace' }, cond('Ready', 'False')] } }), notReady, { conditions: ['Ready'] }],
  ['$patch: replace on the status', smp({ status: { $patch: 'replace', phase: 'Pending' } }), { ips: [], ...notReady }],
  ['$retainKeys clears what it does not list', smp({ status: { $retainKeys: ['phase', 'conditions'], phase: 'Running' } }), { ips: [] }],
  ['unknown directives are ignored', smp({ status: { '$deleteFromPrimitiveList/podIPs': ['x'], $future: 1, phase: 'Running' } }), {}],
  ['a status key __proto__ stays data', smp({ status: JSON.parse('{"__proto__":{"phase":"Failed"}}') }), {}],
  ['metadata other than the uid is ignored', smp({ metadata: { uid, deletionTimestamp: '2026-11-25T14:00:00Z' }, status: { phase: 'Running' } }), {}],
  [
    'content type parameters are ignored',
    { ...smp(rebootPatch), contentType: 'Application/Strategic-Merge-Patch+JSON; charset=utf-8' },
    { ips: ['10.244.1.9'] },
  ],
  // merge and JSON patches, updates
  ['merge patch: lists replace', mergePatch({ status: { podIP: '10.244.1.9', podIPs: [{ ip: '10.244.1.9' }] } }), { ips: ['10.244.1.9'] }, { base: dualStack }],
  ['merge patch: status null empties it', mergePatch({ status: null }), { ips: [], ...notReady }],
  ['merge patch without status changes nothing', mergePatch({ metadata: { uid } }), {}],
  [
    'JSON patch on the whole pod',
    jsonPatch(jsonPatchOfAll),
    { ips: ['10.244.1.9', 'fd00::9'] },
    { conditions: ['Ready', 'Initialized', 'ContainersReady', 'PodScheduled'] },
  ],
  [
    'PUT of the whole pod as JSON',
    put({ ...pod({ podIP: '10.244.1.9', podIPs: [{ ip: '10.244.1.9' }] }), kind: 'Pod', apiVersion: 'v1' }),
    { ips: ['10.244.1.9'] },
  ],
  ['PUT without a content type is JSON', put(pod({ phase: 'Failed' }), undefined), { gone: true }],
  ['PUT of the whole pod as protobuf', protobufPut(pod({ podIP: 'fd00::9', podIPs: [{ ip: 'fd00::9' }] })), { ips: ['fd00::9'] }],
  ['PUT without a status empties it', put({ metadata: { name: 'edge-pod', uid } }), { ips: [], ...notReady }],
  // refused
  ['server-side apply', { ...smp(rebootPatch), contentType: 'application/apply-patch+yaml' }, bad('application/apply-patch+yaml')],
  ['a patch without a content type', { ...smp(rebootPatch), contentType: undefined }, bad('patch of type ""')],
  ['malformed JSON', { ...smp({}), body: Buffer.from('{"status":') }, bad('not JSON')],
  ['a patch that is not an object', smp([rebootPatch]), bad('not a JSON object')],
  ['a merge patch that is not an object', mergePatch('x'), bad('not a JSON object')],
  ['a status that is not an object', smp({ status: 'Running' }), bad('status is not an object')],
  ['another pod of that name (uid precondition)', smp({ ...rebootPatch, metadata: { uid: 'other' } }), bad('uid "other"')],
  ['JSON patch changing the uid', jsonPatch([{ op: 'replace', path: '/metadata/uid', value: 'other' }]), bad('uid "other"')],
  ['PUT for another uid', put(pod({}, { uid: 'other' })), bad('uid "other"')],
  ['PUT naming another pod', put(pod({}, { name: 'other' })), bad('names pod "other"')],
  ['PUT of another kind', put({ ...pod(), kind: 'PodList' }), bad('not a v1 Pod')],
  ['PUT as YAML', put(pod(), 'application/yaml'), bad('application/yaml')],
  ['protobuf that is not', { ...protobufPut(pod()), body: Buffer.from('k8s\0garbage') }, bad('protobuf body cannot be read')],
  ['nesting deeper than 64', smp({ status: { x: deep(64) } }), bad('deeper than 64')],
  ['a body over 3 MiB', { ...smp({}), body: Buffer.alloc(maxWriteBytes + 1, 0x20) }, bad('more than the apiserver takes')],
  ['three addresses', mergePatch({ status: { podIPs: [{ ip: '10.0.0.1' }, { ip: 'fd00::1' }, { ip: '10.0.0.2' }] } }), bad('more than one per family')],
  ['two IPv4 addresses', mergePatch({ status: { podIP: '10.0.0.1', podIPs: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2' }] } }), bad('two IPv4')],
  [
    'an address that is not an IP',
    smp({ status: { podIP: 'evil', podIPs: [{ ip: 'evil' }, { $patch: 'delete', ip: '10.244.1.5' }] } }),
    bad('"evil" is not an IP'),
  ],
  ['more than 64 conditions', smp({ status: { conditions: Array.from({ length: 65 }, (_, i) => cond(`C${i}`)) } }), bad('more than 64')],
  [
    'a merged list longer than 1024',
    smp({ status: { podIPs: Array.from({ length: 1025 }, (_, i) => ({ ip: `10.1.${i >> 8}.${i & 255}` })) } }),
    bad('more than 1024 entries'),
  ],
  ['a merged entry without its key', smp({ status: { podIPs: [{ address: '10.0.0.1' }] } }), bad('no scalar ip')],
  ['a merge key that is an object', smp({ status: { conditions: [{ type: { a: 1 } }] } }), bad('no scalar type')],
  [
    'a list not following its $setElementOrder',
    smp({ status: { '$setElementOrder/conditions': order('Ready'), conditions: [cond('PodScheduled')] } }),
    bad('does not follow'),
  ],
  ['an unknown $patch', smp({ status: { $patch: 'merge-harder' } }), bad('unknown $patch')],
  ['a JSON patch test that fails', jsonPatch([{ op: 'test', path: '/status/phase', value: 'Pending' }]), bad('test of "/status/phase"')],
  ['a JSON patch to a missing path', jsonPatch([{ op: 'replace', path: '/status/nope', value: 1 }]), bad('no "nope" on the path')],
  ['a JSON patch moving a value into itself', jsonPatch([{ op: 'move', from: '/status', path: '/status/x' }]), bad('into itself')],
  ['a JSON patch removing the pod', jsonPatch([{ op: 'remove', path: '' }]), bad('whole pod')],
  ['a JSON patch op that is not one', jsonPatch([{ op: 'constructor', path: '/status' }]), bad('is not add, remove')],
  [
    'a JSON patch doubling a value until memory runs out',
    jsonPatch([
      { op: 'add', path: '/status/x', value: [1, 2, 3, 4] },
      ...Array.from({ length: 40 }, () => ({ op: 'copy', from: '/status/x', path: '/status/x/0' })),
    ]),
    bad('copies more than'),
  ],
  [
    'a JSON patch nesting a value deeper than 64',
    jsonPatch([
      { op: 'add', path: '/status/x', value: deep(40) },
      { op: 'copy', from: '/status/x', path: `/status/x${'/a'.repeat(30)}/b` },
    ]),
    bad('deeper than 64'),
  ],
]

t.test('statusAfterWrite, then localPodOf', async t => {
  for (const [name, write, want, { base = pod(), conditions } = {}] of cases) {
    const after = statusAfterWrite(base, write)
    if ('invalid' in want) {
      t.ok('invalid' in after && after.invalid.includes(want.invalid), name, { found: after, wanted: want.invalid })
      continue
    }
    if (!t.ok('status' in after, name, { found: after })) continue
    const { status } = after as { status: Record<string, unknown> }
    t.same(localPodOf({ ...base, status }), local(want), name)
    if (conditions)
      t.same(
        (status.conditions as { type: string }[]).map(x => x.type),
        conditions,
        `${name}: condition order`,
      )
  }
  t.equal(({} as Record<string, unknown>).phase, undefined, 'no prototype was touched')
})

t.test('the base pod is never changed', async t => {
  const base = pod()
  const before = JSON.stringify(base)
  for (const [, write] of cases) statusAfterWrite(base, write)
  t.equal(JSON.stringify(base), before)
})

t.test('localPodOf: addresses, readiness, deletion', async t => {
  const table: { name: string; pod: PodJson; want: Partial<LocalPod> }[] = [
    { name: 'podIPs absent: podIP', pod: pod({ podIPs: undefined }), want: { ips: ['10.244.1.5'] } },
    { name: 'no address yet', pod: pod({ podIP: undefined, podIPs: undefined }), want: { ips: [] } },
    {
      name: 'dual-stack, in kubelet’s order',
      pod: pod({ podIP: 'fd00::5', podIPs: [{ ip: 'fd00::5' }, { ip: '10.244.1.5' }] }),
      want: { ips: ['fd00::5', '10.244.1.5'] },
    },
    { name: 'one address per family', pod: pod({ podIPs: [{ ip: '10.244.1.5' }, { ip: '10.244.1.6' }] }), want: { ips: ['10.244.1.5'] } },
    { name: 'not an IP: dropped', pod: pod({ podIP: undefined, podIPs: [{ ip: 'evil' }, { ip: 'fd00::5' }] }), want: { ips: ['fd00::5'] } },
    {
      name: 'only the first two podIPs count',
      pod: pod({ podIPs: [{ ip: '10.244.1.5' }, { ip: '10.244.1.6' }, { ip: 'fd00::5' }] }),
      want: { ips: ['10.244.1.5'] },
    },
    { name: 'no Ready condition: not serving', pod: pod({ conditions: [cond('PodScheduled')] }), want: { ready: false, serving: false } },
    { name: 'Ready Unknown: not serving', pod: pod({ conditions: [cond('Ready', 'Unknown')] }), want: { ready: false, serving: false } },
    {
      name: 'a Ready past the 64th condition is not read',
      pod: pod({ conditions: [...Array.from({ length: 64 }, (_, i) => cond(`C${i}`)), cond('Ready')] }),
      want: { ready: false, serving: false },
    },
    { name: 'deletionTimestamp null: not terminating', pod: pod({}, { deletionTimestamp: null }), want: {} },
    { name: 'terminating', pod: pod({}, { deletionTimestamp: '2026-11-25T14:00:00Z' }), want: { ready: false, terminating: true } },
    { name: 'Pending is not gone', pod: pod({ phase: 'Pending' }), want: {} },
    { name: 'an empty object', pod: {}, want: { namespace: '', name: '', uid: '', ips: [], ready: false, serving: false } },
    {
      name: 'garbage fields',
      pod: { metadata: { name: 7 }, status: { podIPs: 'x', podIP: 1, conditions: {} } } as unknown as PodJson,
      want: { namespace: '', name: '', uid: '', ips: [], ready: false, serving: false },
    },
  ]
  for (const c of table) t.same(localPodOf(c.pod), local(c.want), c.name)
})

t.test("a real kubelet's patches (v1.24): 06 then 07 on the pod the scheduler bound", async t => {
  const written = (name: string) => fixtureJson(`kubelet-writes/${name}`)
  const first = written('06-patch-pods-status.json')
  const second = written('07-patch-pods-status.json')
  const bound: PodJson = {
    metadata: { namespace: 'kl-edge', name: 'edge-pod', uid: first.requestObject.metadata.uid },
    spec: { nodeName: 'edge-1' },
    status: { phase: 'Pending', conditions: [cond('PodScheduled')], qosClass: 'BestEffort' },
  }
  const patch = (body: unknown): StatusWrite => ({ verb: 'patch', contentType: 'application/strategic-merge-patch+json', body: json(body) })
  t.match(first.requestURI, /\/pods\/edge-pod\/status$/)

  const afterFirst = statusAfterWrite(bound, patch(first.requestObject))
  if (!t.ok('status' in afterFirst, 'the first status applies', { found: afterFirst })) return
  const starting = { ...bound, status: (afterFirst as { status: Record<string, unknown> }).status }
  t.same(localPodOf(starting), local({ ips: ['192.0.2.2'], ready: false, serving: false }), 'addressed, not ready yet')
  t.same(
    (starting.status.conditions as { type: string }[]).map(c => c.type),
    ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'],
  )
  t.equal(starting.status.qosClass, 'BestEffort', 'what the patch leaves alone stays')

  const afterSecond = statusAfterWrite(starting, patch(second.requestObject))
  if (!t.ok('status' in afterSecond, 'the second status applies', { found: afterSecond })) return
  const running = (afterSecond as { status: Record<string, unknown> }).status
  t.same(localPodOf({ ...bound, status: running }), local({ ips: ['192.0.2.2'] }), 'ready at the same address')
  const ready = (running.conditions as Record<string, unknown>[]).find(c => c.type === 'Ready')!
  t.same(ready, { type: 'Ready', status: 'True', lastTransitionTime: '2026-11-25T13:19:09Z' }, 'null deleted message and reason')
  t.same(
    (running.conditions as { type: string }[]).map(c => c.type),
    ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'],
  )
  t.equal(running.phase, 'Running')
  t.equal((running.containerStatuses as { ready: boolean }[])[0].ready, true, 'containerStatuses replaced whole')

  const wrongPod = statusAfterWrite({ ...bound, metadata: { ...bound.metadata, uid: 'recreated' } }, patch(second.requestObject))
  t.match(wrongPod, { invalid: /uid/ }, 'a pod recreated under the same name does not take the old one’s status')
})
