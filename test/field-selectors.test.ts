import t from 'tap'
import { fieldSelectorProblem, fieldsOf, matchesFieldSet, selectableFields, type CustomResourceFields } from '../lib/api/field-selectors.ts'
import { parseFieldSelector } from '../lib/api/selectors.ts'

const onlyMeta = (label: string) => `"${label}" is not a known field selector: only "metadata.name", "metadata.namespace"`
const notSupported = (label: string) => `field label not supported: ${label}`

t.test('which labels each resource accepts, and the apiserver 400 message for the rest', async t => {
  // [group, resource, selector, undefined when accepted | the exact message]
  const cases: [string, string, string, string | undefined][] = [
    // pods: pkg/apis/core/v1/conversion.go
    ['', 'pods', 'spec.nodeName=kind-worker2', undefined],
    ['', 'pods', 'spec.nodeName==kind-worker2', undefined],
    ['', 'pods', 'spec.nodeName!=kind-worker2', undefined],
    ['', 'pods', 'metadata.name=a,metadata.namespace=default', undefined],
    ['', 'pods', 'spec.host=n1', undefined],
    ['', 'pods', 'spec.restartPolicy=Always,spec.schedulerName=default-scheduler,spec.serviceAccountName=default', undefined],
    ['', 'pods', 'spec.hostNetwork=true', undefined],
    ['', 'pods', 'status.phase!=Running,status.podIP=10.0.0.1,status.podIPs=10.0.0.1,status.nominatedNodeName=', undefined],
    ['', 'pods', 'status.hostIP=10.0.0.1', notSupported('status.hostIP')],
    ['', 'pods', 'status.qosClass=BestEffort', notSupported('status.qosClass')],
    ['', 'pods', 'spec.nodeName=n1,metadata.labels=x', notSupported('metadata.labels')],
    // the apiserver sorts the terms before converting them: the first refused in that order is named
    ['', 'pods', 'zeta=1,alpha=2', notSupported('alpha')],
    ['', 'pods', 'b!=1,b=1', notSupported('b')],
    // nodes: metadata.name and spec.unschedulable only, not even metadata.namespace
    ['', 'nodes', 'metadata.name=kind-worker2', undefined],
    ['', 'nodes', 'spec.unschedulable=true', undefined],
    ['', 'nodes', 'spec.unschedulable!=false', undefined],
    ['', 'nodes', 'metadata.namespace=', notSupported('metadata.namespace')],
    ['', 'nodes', 'spec.Unschedulable=true', notSupported('spec.Unschedulable')],
    ['', 'nodes', 'status.phase=Running', notSupported('status.phase')],
    // namespaces
    ['', 'namespaces', 'status.phase=Active,metadata.name=default', undefined],
    ['', 'namespaces', 'metadata.namespace=default', notSupported('metadata.namespace')],
    ['', 'namespaces', 'name=default', notSupported('name')],
    // services
    ['', 'services', 'spec.clusterIP!=None', undefined],
    ['', 'services', 'spec.type=NodePort,metadata.namespace!=default', undefined],
    ['', 'services', 'spec.ports=80', notSupported('spec.ports')],
    ['', 'services', 'type=ClusterIP', notSupported('type')],
    // secrets
    ['', 'secrets', 'type=kubernetes.io/service-account-token', undefined],
    ['', 'secrets', 'type==Opaque,metadata.name=s', undefined],
    ['', 'secrets', 'data.token=x', notSupported('data.token')],
    // replication controllers
    ['', 'replicationcontrollers', 'status.replicas=0', undefined],
    ['', 'replicationcontrollers', 'spec.replicas=0', notSupported('spec.replicas')],
    // core events
    ['', 'events', 'involvedObject.kind=Pod,involvedObject.name=p,involvedObject.namespace=default', undefined],
    ['', 'events', 'involvedObject.uid=u,involvedObject.apiVersion=v1,involvedObject.resourceVersion=1,involvedObject.fieldPath=', undefined],
    ['', 'events', 'reason=Started,reportingComponent=kubelet,source=kubelet,type=Warning', undefined],
    ['', 'events', 'regarding.kind=Pod', notSupported('regarding.kind')],
    ['', 'events', 'reportingController=kubelet', notSupported('reportingController')],
    // events.k8s.io: its own names, mapped onto the core ones; the core names are refused
    ['events.k8s.io', 'events', 'regarding.kind=Pod,regarding.name=p,regarding.namespace=default', undefined],
    ['events.k8s.io', 'events', 'regarding.uid=u,regarding.apiVersion=v1,regarding.resourceVersion=1,regarding.fieldPath=x', undefined],
    ['events.k8s.io', 'events', 'reason=Started,reportingController=kubelet,source=kubelet,type=Normal,metadata.name=e', undefined],
    ['events.k8s.io', 'events', 'involvedObject.kind=Pod', notSupported('involvedObject.kind')],
    ['events.k8s.io', 'events', 'reportingComponent=kubelet', notSupported('reportingComponent')],
    // built-in kinds without a conversion function: DefaultMetaV1FieldSelectorConversion
    ['', 'configmaps', 'metadata.name=kube-root-ca.crt,metadata.namespace=default', undefined],
    ['', 'configmaps', 'data.x=y', onlyMeta('data.x')],
    ['', 'endpoints', 'metadata.name!=kubernetes', undefined],
    ['', 'endpoints', 'subsets=x', onlyMeta('subsets')],
    ['discovery.k8s.io', 'endpointslices', 'metadata.name=svc-ud1-abcde', undefined],
    ['discovery.k8s.io', 'endpointslices', 'metadata.namespace==default', undefined],
    ['discovery.k8s.io', 'endpointslices', 'addressType=IPv4', onlyMeta('addressType')],
    ['discovery.k8s.io', 'endpointslices', 'metadata.labels.kubernetes.io/service-name=svc', onlyMeta('metadata.labels.kubernetes.io/service-name')],
    ['coordination.k8s.io', 'leases', 'spec.holderIdentity=kind-worker2', onlyMeta('spec.holderIdentity')],
    ['', 'persistentvolumes', 'metadata.namespace=', undefined], // cluster-scoped, but the default conversion takes it
    ['apps', 'replicasets', 'status.replicas=0', onlyMeta('status.replicas')], // apps/v1 registers no conversion
    ['apps', 'deployments', 'metadata.name=x\\,y', undefined],
    ['', 'configmaps', 'we"ird=1', '"we\\"ird" is not a known field selector: only "metadata.name", "metadata.namespace"'],
    // batch jobs: their own message
    ['batch', 'jobs', 'status.successful=1', undefined],
    ['batch', 'jobs', 'status.succeeded=1', 'field label "status.succeeded" not supported for Job'],
    ['batch', 'jobs', 'status.active=1', 'field label "status.active" not supported for Job'],
    // certificate signing requests: cluster-scoped
    ['certificates.k8s.io', 'certificatesigningrequests', 'spec.signerName=kubernetes.io/kubelet-serving', undefined],
    ['certificates.k8s.io', 'certificatesigningrequests', 'metadata.namespace=', notSupported('metadata.namespace')],
    ['certificates.k8s.io', 'certificatesigningrequests', 'spec.username=x', notSupported('spec.username')],
    // the empty selector
    ['', 'configmaps', '', undefined],
  ]
  for (const [group, resource, selector, want] of cases) {
    t.equal(fieldSelectorProblem(group, resource, parseFieldSelector(selector)), want, `${group}/${resource} ${selector}`)
  }
})

t.test('custom resources: metadata.name, metadata.namespace when namespaced, the version’s selectableFields', async t => {
  const nodepools: CustomResourceFields = { namespaced: false }
  const widgets: CustomResourceFields = { namespaced: true, selectableFields: ['.spec.color', '.spec.size'] }
  const cases: [CustomResourceFields, string, string | undefined][] = [
    [nodepools, 'metadata.name=shanghai', undefined],
    [nodepools, 'metadata.namespace=', notSupported('metadata.namespace')],
    [nodepools, 'spec.type=Edge', notSupported('spec.type')],
    [widgets, 'metadata.namespace=default,spec.color=red,spec.size!=3', undefined],
    [widgets, 'spec.shape=round', notSupported('spec.shape')],
  ]
  for (const [custom, selector, want] of cases) {
    t.equal(fieldSelectorProblem('apps.openyurt.io', 'nodepools', parseFieldSelector(selector), custom), want, selector)
  }
  t.same(selectableFields('apps.openyurt.io', 'nodepools', nodepools), ['metadata.name'])
  t.same(selectableFields('example.com', 'widgets', widgets), ['metadata.name', 'metadata.namespace', 'spec.color', 'spec.size'])
  t.same(fieldsOf('example.com', 'widgets', { spec: { color: 'red', size: 3 } }, widgets), { 'spec.color': 'red', 'spec.size': '3' })
  t.same(fieldsOf('example.com', 'widgets', { spec: { size: true } }, widgets), { 'spec.color': '', 'spec.size': 'true' })
})

t.test('selectableFields lists what the apiserver accepts', async t => {
  t.same(selectableFields('', 'nodes'), ['metadata.name', 'spec.unschedulable'])
  t.same(selectableFields('', 'namespaces'), ['metadata.name', 'status.phase'])
  t.same(selectableFields('', 'configmaps'), ['metadata.name', 'metadata.namespace'])
  t.same(selectableFields('discovery.k8s.io', 'endpointslices'), ['metadata.name', 'metadata.namespace'])
  t.same(selectableFields('', 'services'), ['metadata.name', 'metadata.namespace', 'spec.clusterIP', 'spec.type'])
  t.same([...selectableFields('', 'pods')].sort(), [
    'metadata.name',
    'metadata.namespace',
    'spec.host',
    'spec.hostNetwork',
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'status.nominatedNodeName',
    'status.phase',
    'status.podIP',
    'status.podIPs',
  ])
  // every accepted label other than metadata.* has a value in fieldsOf, and nothing else does
  for (const [group, resource] of [
    ['', 'pods'],
    ['', 'nodes'],
    ['', 'events'],
    ['events.k8s.io', 'events'],
    ['batch', 'jobs'],
    ['', 'configmaps'],
  ]) {
    const labels = selectableFields(group, resource).filter(l => !l.startsWith('metadata.'))
    t.same(Object.keys(fieldsOf(group, resource, {})).sort(), [...labels].sort(), `${group}/${resource}`)
  }
})

t.test('fieldsOf: the values the apiserver compares, as its fields.Set has them', async t => {
  const cases: [string, string, unknown, Record<string, string>][] = [
    [
      '',
      'pods',
      {
        metadata: { name: 'p', namespace: 'default' },
        spec: { nodeName: 'kind-worker2', restartPolicy: 'Always', schedulerName: 'default-scheduler', serviceAccountName: 'sa', hostNetwork: true },
        status: { phase: 'Running', podIP: '10.244.1.5', podIPs: [{ ip: '10.244.1.5' }, { ip: 'fd00::5' }], nominatedNodeName: 'n9' },
      },
      {
        'spec.nodeName': 'kind-worker2',
        'spec.host': 'kind-worker2',
        'spec.restartPolicy': 'Always',
        'spec.schedulerName': 'default-scheduler',
        'spec.serviceAccountName': 'sa',
        'spec.hostNetwork': 'true',
        'status.phase': 'Running',
        'status.podIP': '10.244.1.5',
        'status.podIPs': '', // accepted, never in the fields.Set
        'status.nominatedNodeName': 'n9',
      },
    ],
    [
      // a pending pod: missing strings are "", a missing hostNetwork is "false"
      '',
      'pods',
      { metadata: { name: 'p' }, spec: { serviceAccount: 'legacy' }, status: { podIPs: [{ ip: '10.0.0.9' }] } },
      {
        'spec.nodeName': '',
        'spec.host': '',
        'spec.restartPolicy': '',
        'spec.schedulerName': '',
        'spec.serviceAccountName': 'legacy', // v1 serviceAccount is DeprecatedServiceAccount
        'spec.hostNetwork': 'false',
        'status.phase': '',
        'status.podIP': '10.0.0.9', // PodIPs[0]
        'status.podIPs': '',
        'status.nominatedNodeName': '',
      },
    ],
    ['', 'nodes', { metadata: { name: 'n' }, spec: {} }, { 'spec.unschedulable': 'false' }],
    ['', 'nodes', { metadata: { name: 'n' }, spec: { unschedulable: true } }, { 'spec.unschedulable': 'true' }],
    ['', 'namespaces', { metadata: { name: 'default' }, status: { phase: 'Active' } }, { 'status.phase': 'Active' }],
    ['', 'services', { spec: { clusterIP: 'None', type: 'ClusterIP' } }, { 'spec.clusterIP': 'None', 'spec.type': 'ClusterIP' }],
    ['', 'services', { spec: { type: 'ExternalName', externalName: 'x.example' } }, { 'spec.clusterIP': '', 'spec.type': 'ExternalName' }],
    ['', 'secrets', { type: 'kubernetes.io/tls', data: {} }, { type: 'kubernetes.io/tls' }],
    ['', 'replicationcontrollers', { status: { replicas: 3 } }, { 'status.replicas': '3' }],
    ['', 'replicationcontrollers', { spec: { replicas: 3 } }, { 'status.replicas': '0' }],
    ['batch', 'jobs', { status: { succeeded: 2 } }, { 'status.successful': '2' }],
    ['batch', 'jobs', { status: {} }, { 'status.successful': '0' }],
    [
      'certificates.k8s.io',
      'certificatesigningrequests',
      { spec: { signerName: 'kubernetes.io/kubelet-serving' } },
      { 'spec.signerName': 'kubernetes.io/kubelet-serving' },
    ],
    ['', 'configmaps', { metadata: { name: 'c' }, data: { a: 'b' } }, {}],
    ['discovery.k8s.io', 'endpointslices', { metadata: { name: 's' }, addressType: 'IPv4' }, {}],
    ['', 'endpoints', { metadata: { name: 'e' }, subsets: [] }, {}],
  ]
  for (const [group, resource, obj, want] of cases) {
    t.same(fieldsOf(group, resource, obj), want, `${group}/${resource} ${JSON.stringify(obj)}`)
  }

  const coreEvent = {
    involvedObject: { kind: 'Pod', namespace: 'default', name: 'p', uid: 'u1', apiVersion: 'v1', resourceVersion: '7', fieldPath: 'spec.containers{c}' },
    reason: 'Pulled',
    type: 'Normal',
    source: { component: 'kubelet', host: 'kind-worker2' },
    reportingComponent: 'kubelet-rc',
  }
  t.same(fieldsOf('', 'events', coreEvent), {
    'involvedObject.kind': 'Pod',
    'involvedObject.namespace': 'default',
    'involvedObject.name': 'p',
    'involvedObject.uid': 'u1',
    'involvedObject.apiVersion': 'v1',
    'involvedObject.resourceVersion': '7',
    'involvedObject.fieldPath': 'spec.containers{c}',
    reason: 'Pulled',
    reportingComponent: 'kubelet-rc',
    source: 'kubelet',
    type: 'Normal',
  })
  t.equal(fieldsOf('', 'events', { reportingComponent: 'ctrl' }).source, 'ctrl', 'source falls back to the reporting controller')

  const newEvent = {
    regarding: { kind: 'Node', name: 'kind-worker2', apiVersion: 'v1', uid: 'u2' },
    reason: 'NodeReady',
    type: 'Normal',
    reportingController: 'kubelet',
    deprecatedSource: {},
  }
  t.same(fieldsOf('events.k8s.io', 'events', newEvent), {
    'regarding.kind': 'Node',
    'regarding.namespace': '',
    'regarding.name': 'kind-worker2',
    'regarding.uid': 'u2',
    'regarding.apiVersion': 'v1',
    'regarding.resourceVersion': '',
    'regarding.fieldPath': '',
    reason: 'NodeReady',
    reportingController: 'kubelet',
    source: 'kubelet',
    type: 'Normal',
  })
})

t.test('matchesFieldSet: =, == and != over fieldsOf, metadata from the object', async t => {
  const pod = { metadata: { name: 'p', namespace: 'default' }, spec: { nodeName: 'kind-worker2' }, status: { phase: 'Running' } }
  const fields = fieldsOf('', 'pods', pod)
  const meta = { name: 'p', namespace: 'default' }
  const cases: [string, boolean][] = [
    ['', true],
    ['spec.nodeName=kind-worker2', true],
    ['spec.nodeName==kind-worker2', true],
    ['spec.nodeName!=kind-worker2', false],
    ['spec.nodeName=kind-worker', false],
    ['spec.nodeName!=kind-worker', true],
    ['spec.host=kind-worker2', true],
    ['spec.hostNetwork=false', true], // absent reads as "false", never ""
    ['spec.hostNetwork!=true', true],
    ['spec.hostNetwork=', false],
    ['status.podIPs=', true], // never set: always ""
    ['status.podIPs!=', false],
    ['status.phase=Running,metadata.namespace=default', true],
    ['status.phase=Running,metadata.namespace!=default', false],
    ['metadata.name=p', true],
    ['metadata.name!=p', false],
    ['status.nominatedNodeName=', true],
    ['constructor=', true], // not a key of the set: "" (and not Object.prototype's)
  ]
  for (const [selector, want] of cases) {
    t.equal(matchesFieldSet(parseFieldSelector(selector), fields, meta), want, selector)
  }
  const node = fieldsOf('', 'nodes', { metadata: { name: 'n' } })
  t.equal(matchesFieldSet(parseFieldSelector('spec.unschedulable=false,metadata.name=n'), node, { name: 'n', namespace: '' }), true)
  t.equal(matchesFieldSet(parseFieldSelector('spec.unschedulable!=false'), node, { name: 'n', namespace: '' }), false)
  const job = fieldsOf('batch', 'jobs', { status: {} })
  t.equal(matchesFieldSet(parseFieldSelector('status.successful=0'), job, { name: 'j', namespace: 'default' }), true)
})
