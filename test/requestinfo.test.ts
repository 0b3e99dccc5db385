// Table test of classify(): every row is a request a real client sends (or an edge of the path
// grammar), with the RequestInfo that k8s.io/apiserver's RequestInfoFactory would give it, except
// where this hub decides differently on purpose (exec/attach/portforward → connect, */proxy → proxy).

import t from 'tap'
import { classify, componentOf, isWatch, type RequestInfo } from '../lib/api/requestinfo.ts'

type Expected = Partial<Omit<RequestInfo, 'query' | 'path'>>

interface Row {
  method?: string
  url: string
  ua?: string
  want: Expected
}

const UA = {
  kubeProxy: 'kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc',
  kubelet: 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89',
  kubectl: 'kubectl/v1.24.0 (linux/amd64) kubernetes/4ce5a89',
  coredns: 'coredns/v0.0.0 (linux/amd64) kubernetes/$Format',
  curl: 'curl/7.81.0',
}

const nonResource = (verb = 'get'): Expected => ({ isResourceRequest: false, verb })
// what most rows are about; each row still lists what differs
const nginx = { resource: 'pods', namespace: 'default', name: 'nginx' }
const defaultPods = { resource: 'pods', namespace: 'default' }

const rows: Row[] = [
  // ---- non-resource and discovery paths --------------------------------------------------------
  { url: '/healthz', want: nonResource() },
  { url: '/livez?verbose', want: nonResource() },
  { url: '/version', ua: UA.kubectl, want: { ...nonResource(), component: 'kubectl' } },
  { url: '/metrics', want: nonResource() },
  { url: '/openapi/v2', want: nonResource() },
  { url: '/openapi/v3/apis/apps/v1', want: nonResource() },
  { url: '/api', want: nonResource() },
  { url: '/api/v1', want: nonResource() },
  { url: '/apis', want: nonResource() },
  { url: '/apis/apps', want: nonResource() },
  { url: '/apis/apps/v1', want: nonResource() },
  { url: '/apis/discovery.k8s.io/v1/', want: nonResource() },
  { url: '/', want: nonResource() },
  { method: 'POST', url: '/healthz', want: nonResource('post') },
  { url: '/api/v1/watch', want: { ...nonResource(), apiVersion: 'v1' } },
  { url: '/apis/apps/v1/watch', want: { ...nonResource(), apiGroup: 'apps', apiVersion: 'v1' } },
  { url: '/api/v1/namespaces/%E0%A4%A/pods', want: nonResource() }, // undecodable: forwarded as is

  // ---- core group, cluster-scoped --------------------------------------------------------------
  {
    url: '/api/v1/nodes/kind-worker2',
    ua: UA.kubeProxy,
    want: { isResourceRequest: true, verb: 'get', apiVersion: 'v1', resource: 'nodes', name: 'kind-worker2', component: 'kube-proxy' },
  },
  { url: '/api/v1/nodes', want: { verb: 'list', resource: 'nodes', name: '', namespace: '' } },
  { url: '/api/v1/nodes/', want: { verb: 'list', resource: 'nodes', name: '' } },
  { method: 'PATCH', url: '/api/v1/nodes/kind-worker2/status', ua: UA.kubelet, want: { verb: 'patch', resource: 'nodes', name: 'kind-worker2', subresource: 'status', component: 'kubelet' } },
  { url: '/api/v1/namespaces', want: { verb: 'list', resource: 'namespaces', namespace: '', name: '' } },
  { url: '/api/v1/namespaces/foo', want: { verb: 'get', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: '' } },
  { method: 'DELETE', url: '/api/v1/namespaces/foo', want: { verb: 'delete', resource: 'namespaces', namespace: 'foo', name: 'foo' } },
  { url: '/api/v1/namespaces/foo/status', want: { verb: 'get', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: 'status' } },
  { method: 'PUT', url: '/api/v1/namespaces/foo/status', want: { verb: 'update', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: 'status' } },
  { method: 'PUT', url: '/api/v1/namespaces/foo/finalize', want: { verb: 'update', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: 'finalize' } },
  { url: '/api/v1/persistentvolumes/pv-1', want: { verb: 'get', resource: 'persistentvolumes', name: 'pv-1', namespace: '' } },

  // ---- core group, namespaced ------------------------------------------------------------------
  { url: '/api/v1/pods', want: { verb: 'list', resource: 'pods', namespace: '' } },
  { url: '/api/v1/namespaces/default/pods', want: { verb: 'list', apiGroup: '', apiVersion: 'v1', resource: 'pods', namespace: 'default', name: '' } },
  { url: '/api/v1/namespaces/default/pods/nginx', want: { verb: 'get', resource: 'pods', namespace: 'default', name: 'nginx', subresource: '' } },
  { method: 'HEAD', url: '/api/v1/namespaces/default/pods/nginx', want: { verb: 'get', ...nginx } },
  { method: 'HEAD', url: '/api/v1/namespaces/default/pods', want: { verb: 'list', ...defaultPods } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods', want: { verb: 'create', resource: 'pods', namespace: 'default', name: '' } },
  { method: 'PUT', url: '/api/v1/namespaces/default/pods/nginx', want: { verb: 'update', ...nginx } },
  { method: 'PATCH', url: '/api/v1/namespaces/default/pods/nginx', want: { verb: 'patch', ...nginx } },
  { method: 'patch', url: '/api/v1/namespaces/default/pods/nginx', want: { verb: 'patch', ...nginx } }, // method case
  { method: 'DELETE', url: '/api/v1/namespaces/default/pods/nginx', want: { verb: 'delete', ...nginx } },
  { method: 'DELETE', url: '/api/v1/namespaces/default/pods', want: { verb: 'deletecollection', resource: 'pods', namespace: 'default', name: '' } },
  { method: 'DELETE', url: '/api/v1/namespaces/default/pods?labelSelector=app%3Dweb', want: { verb: 'deletecollection', ...defaultPods, labelSelector: 'app=web' } },
  { method: 'OPTIONS', url: '/api/v1/namespaces/default/pods', want: { isResourceRequest: true, verb: 'options', ...defaultPods } },
  { url: '/api/v1/namespaces/default/configmaps/a%3Ab', want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: 'a:b' } },
  { method: 'PUT', url: '/api/v1/namespaces/default/pods/nginx/status', want: { verb: 'update', ...nginx, subresource: 'status' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/eviction', want: { verb: 'create', ...nginx, subresource: 'eviction' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/binding', want: { verb: 'create', ...nginx, subresource: 'binding' } },
  { method: 'POST', url: '/api/v1/namespaces/kube-system/serviceaccounts/coredns/token', ua: UA.kubelet, want: { verb: 'create', resource: 'serviceaccounts', name: 'coredns', subresource: 'token', namespace: 'kube-system', component: 'kubelet' } },

  // ---- streaming subresources ------------------------------------------------------------------
  { url: '/api/v1/namespaces/default/pods/nginx/log?container=app&follow=true', ua: UA.kubectl, want: { verb: 'get', ...nginx, subresource: 'log', component: 'kubectl' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/exec?command=sh&stdin=true&tty=true', want: { verb: 'connect', ...nginx, subresource: 'exec' } },
  { method: 'GET', url: '/api/v1/namespaces/default/pods/nginx/exec?command=ls', want: { verb: 'connect', ...nginx, subresource: 'exec' } }, // websocket form
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/attach?stdout=true', want: { verb: 'connect', ...nginx, subresource: 'attach' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/portforward', want: { verb: 'connect', ...nginx, subresource: 'portforward' } },
  { method: 'GET', url: '/api/v1/namespaces/default/pods/nginx/portforward?ports=8080', want: { verb: 'connect', ...nginx, subresource: 'portforward' } },
  { url: '/api/v1/namespaces/default/pods/nginx/proxy', want: { verb: 'proxy', ...nginx, subresource: 'proxy' } },
  { url: '/api/v1/namespaces/default/pods/nginx/proxy/metrics', want: { verb: 'proxy', ...nginx, subresource: 'proxy' } },
  { method: 'POST', url: '/api/v1/namespaces/default/services/https:web:443/proxy/api', want: { verb: 'proxy', resource: 'services', namespace: 'default', name: 'https:web:443', subresource: 'proxy' } },
  { url: '/api/v1/nodes/kind-worker2/proxy/metrics/cadvisor', want: { verb: 'proxy', resource: 'nodes', name: 'kind-worker2', subresource: 'proxy', namespace: '' } },

  // the deprecated /api/v1/proxy/… form
  { url: '/api/v1/proxy/namespaces/default/pods/nginx', want: { verb: 'proxy', resource: 'pods', namespace: 'default', name: 'nginx', subresource: '' } },
  { method: 'POST', url: '/api/v1/proxy/namespaces/default/services/web', want: { verb: 'proxy', resource: 'services', namespace: 'default', name: 'web' } },
  { url: '/api/v1/proxy/nodes/kind-worker2', want: { verb: 'proxy', resource: 'nodes', name: 'kind-worker2', namespace: '' } },
  {
    url: '/api/v1/proxy/namespaces/default/services/web/healthz',
    want: { verb: 'proxy', resource: 'services', namespace: 'default', name: 'web', subresource: '' },
  },

  // ---- named groups ----------------------------------------------------------------------------
  { url: '/apis/discovery.k8s.io/v1/endpointslices', ua: UA.kubeProxy, want: { isResourceRequest: true, verb: 'list', apiGroup: 'discovery.k8s.io', apiVersion: 'v1', resource: 'endpointslices', namespace: '', component: 'kube-proxy' } },
  { url: '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde', want: { verb: 'get', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'default', name: 'svc-ud1-abcde' } },
  { url: '/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices', want: { verb: 'list', apiGroup: 'discovery.k8s.io', apiVersion: 'v1beta1', resource: 'endpointslices', namespace: 'default' } },
  { url: '/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale', want: { verb: 'get', apiGroup: 'apps', resource: 'deployments', name: 'coredns', subresource: 'scale', namespace: 'kube-system' } },
  { method: 'PUT', url: '/apis/apps/v1/namespaces/default/deployments/web/status', want: { verb: 'update', apiGroup: 'apps', resource: 'deployments', namespace: 'default', name: 'web', subresource: 'status' } },
  { method: 'PUT', url: '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kind-worker2', ua: UA.kubelet, want: { verb: 'update', apiGroup: 'coordination.k8s.io', resource: 'leases', namespace: 'kube-node-lease', name: 'kind-worker2', component: 'kubelet' } },
  { url: '/apis/rbac.authorization.k8s.io/v1/clusterroles/admin', want: { verb: 'get', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'admin', namespace: '' } },
  { url: '/apis/apps.openyurt.io/v1beta1/nodepools/beijing', want: { verb: 'get', apiGroup: 'apps.openyurt.io', apiVersion: 'v1beta1', resource: 'nodepools', name: 'beijing' } },
  { method: 'POST', url: '/apis/authorization.k8s.io/v1/subjectaccessreviews', want: { verb: 'create', apiGroup: 'authorization.k8s.io', resource: 'subjectaccessreviews' } },
  { method: 'POST', url: '/apis/certificates.k8s.io/v1/certificatesigningrequests', want: { verb: 'create', apiGroup: 'certificates.k8s.io', resource: 'certificatesigningrequests' } },
  { method: 'DELETE', url: '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', want: { verb: 'deletecollection', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'default' } },

  // ---- watch -----------------------------------------------------------------------------------
  {
    url: '/apis/discovery.k8s.io/v1/endpointslices?allowWatchBookmarks=true&resourceVersion=1234&timeout=7m51s&timeoutSeconds=471&watch=true',
    ua: UA.kubeProxy,
    want: { verb: 'watch', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', resourceVersion: '1234', component: 'kube-proxy' },
  },
  { url: '/api/v1/namespaces/default/pods?watch=1', want: { verb: 'watch', resource: 'pods', namespace: 'default' } },
  { url: '/api/v1/namespaces/default/pods?watch=false', want: { verb: 'list', ...defaultPods } },
  { url: '/api/v1/namespaces/default/pods?watch=0', want: { verb: 'list', ...defaultPods } },
  { url: '/api/v1/namespaces/default/pods/nginx?watch=true', want: { verb: 'get', ...nginx } }, // a name makes it a get, as in the apiserver
  { url: '/api/v1/watch/namespaces/default/pods', want: { verb: 'watch', resource: 'pods', namespace: 'default', name: '' } },
  { url: '/api/v1/watch/namespaces/default/pods/nginx', want: { verb: 'watch', resource: 'pods', namespace: 'default', name: 'nginx' } },
  { url: '/api/v1/watch/pods', want: { verb: 'watch', resource: 'pods', namespace: '' } },
  { url: '/api/v1/watch/nodes/kind-worker2', want: { verb: 'watch', resource: 'nodes', name: 'kind-worker2' } },
  { url: '/api/v1/watch/namespaces', want: { verb: 'watch', resource: 'namespaces', namespace: '', name: '' } },
  { url: '/api/v1/watch/namespaces/foo', want: { verb: 'watch', resource: 'namespaces', namespace: 'foo', name: 'foo' } },
  { url: '/apis/discovery.k8s.io/v1/watch/endpointslices', want: { verb: 'watch', apiGroup: 'discovery.k8s.io', apiVersion: 'v1', resource: 'endpointslices', namespace: '' } },
  { url: '/apis/discovery.k8s.io/v1/watch/namespaces/default/endpointslices?resourceVersion=99', want: { verb: 'watch', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'default', resourceVersion: '99' } },
  // the apiserver reads `watch` like every boolean query parameter: only absent, "0" and "false"
  // (any case) are false — anything else, the empty value included, is true
  { url: '/api/v1/pods?watch=True', want: { verb: 'watch', resource: 'pods' } },
  { url: '/api/v1/pods?watch', want: { verb: 'watch', resource: 'pods' } },
  { url: '/api/v1/pods?watch=yes', want: { verb: 'watch', resource: 'pods' } },
  { url: '/api/v1/pods?watch=FALSE', want: { verb: 'list', resource: 'pods' } },

  // ---- selectors and resourceVersion from the query ---------------------------------------------
  {
    url: '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2&limit=500&resourceVersion=0',
    ua: UA.kubelet,
    want: { verb: 'list', resource: 'pods', fieldSelector: 'spec.nodeName=kind-worker2', resourceVersion: '0', component: 'kubelet' },
  },
  {
    url: '/api/v1/nodes?labelSelector=apps.openyurt.io%2Fnodepool%3Dshanghai',
    want: { verb: 'list', resource: 'nodes', labelSelector: 'apps.openyurt.io/nodepool=shanghai' },
  },
  {
    url: '/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name',
    ua: UA.kubeProxy,
    want: { verb: 'list', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', component: 'kube-proxy', labelSelector: '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name' },
  },
  { url: '/api/v1/pods?labelSelector=tier+in+%28web%2Capi%29,app!%3Dx', want: { verb: 'list', resource: 'pods', labelSelector: 'tier in (web,api),app!=x' } },
  { url: '/api/v1/pods?labelSelector=app%3Dweb&fieldSelector=status.phase%21%3DRunning', want: { verb: 'list', resource: 'pods', labelSelector: 'app=web', fieldSelector: 'status.phase!=Running' } },
  { url: '/api/v1/namespaces/default/pods/nginx?resourceVersion=12', want: { verb: 'get', ...nginx, resourceVersion: '12' } },
  { url: '/api/v1/pods?', want: { verb: 'list', resource: 'pods' } },
  {
    url: '/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker2',
    ua: UA.kubelet,
    want: { verb: 'list', resource: 'nodes', name: 'kind-worker2', fieldSelector: 'metadata.name=kind-worker2', component: 'kubelet' },
  },

  // ---- component from the User-Agent -----------------------------------------------------------
  { url: '/api/v1/services', ua: UA.coredns, want: { verb: 'list', resource: 'services', component: 'coredns' } },
  { url: '/api/v1/services', ua: UA.curl, want: { verb: 'list', resource: 'services', component: 'curl' } },
  { url: '/api/v1/services', ua: '', want: { verb: 'list', resource: 'services' } },
  { url: '/api/v1/services', want: { verb: 'list', resource: 'services' } },
]

/** What a row does not say is empty: every field is compared, not only those a row names. */
const blankResource: Expected = {
  isResourceRequest: true,
  apiGroup: '',
  apiVersion: 'v1',
  namespace: '',
  resource: '',
  subresource: '',
  name: '',
  labelSelector: '',
  fieldSelector: '',
  resourceVersion: '',
  component: '',
}
const blankNonResource: Expected = { ...blankResource, isResourceRequest: false, apiVersion: '' }

for (const row of rows) {
  const method = row.method ?? 'GET'
  const title = `${method} ${row.url}${row.ua !== undefined ? ` (${row.ua || 'empty UA'})` : ''}`
  t.test(title, async t => {
    const info = classify(method, row.url, row.ua)
    const want: Record<string, unknown> = {
      ...(row.want.isResourceRequest === false ? blankNonResource : blankResource),
      ...row.want,
    }
    const got: Record<string, unknown> = {}
    for (const k of Object.keys(want)) got[k] = info[k as keyof RequestInfo]
    t.strictSame(got, want)
    t.equal(info.path, row.url.split('?')[0], 'path is the URL without its query')
  })
}

t.test('query is the parsed URL query', async t => {
  const info = classify('GET', '/api/v1/pods?limit=500&continue=abc%3D%3D&labelSelector=a%3Db')
  t.equal(info.query.get('limit'), '500')
  t.equal(info.query.get('continue'), 'abc==')
  t.equal(info.query.get('labelSelector'), 'a=b')
  t.equal(classify('GET', '/healthz?verbose=1').query.get('verbose'), '1')
})

t.test('isWatch', async t => {
  t.equal(isWatch(classify('GET', '/api/v1/pods?watch=true')), true)
  t.equal(isWatch(classify('GET', '/api/v1/watch/pods')), true)
  t.equal(isWatch(classify('GET', '/api/v1/pods')), false)
  t.equal(isWatch(classify('GET', '/healthz?watch=true')), false)
})

t.test('componentOf', async t => {
  const cases: [string | undefined, string][] = [
    ['kube-proxy/v1.24.0+0 (linux/amd64) kubernetes/2cc6ddc', 'kube-proxy'],
    ['kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89', 'kubelet'],
    ['kubectl/v1.24.0 (linux/amd64) kubernetes/4ce5a89', 'kubectl'],
    ['coredns/v0.0.0 (linux/amd64) kubernetes/$Format', 'coredns'],
    ['CoreDNS/1.8.6', 'coredns'],
    ['nginx-ingress-controller/v1.2.0 (linux/amd64) ingress-nginx/abc', 'nginx-ingress-controller'],
    ['curl/7.81.0', 'curl'],
    ['Go-http-client/1.1', 'go-http-client'],
    ['flanneld', 'flanneld'],
    ['', ''],
    [undefined, ''],
  ]
  for (const [ua, want] of cases) t.equal(componentOf(ua), want, JSON.stringify(ua))
})
