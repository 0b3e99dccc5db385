// Table test of classify(): every row is a request a real client sends (or an edge of the path
// grammar), with the RequestInfo that k8s.io/apiserver's RequestInfoFactory would give it, except
// where this hub decides differently on purpose (exec/attach/portforward → connect, */proxy → proxy,
// and resource paths it does not take for resources: `malformed`). Then the path as Go's net/url
// reads it, and what the hub writes upstream for it (upstreamPath).

import t from 'tap'
import { apiserverRequestInfo, classify, componentOf, isWatch, queryFlag, type RequestInfo } from '../lib/api/requestinfo.ts'
import { decodeTarget, encodeQuery, escapePath, parseQuery, resourcePath, upstreamPath } from '../lib/api/paths.ts'

type Expected = Partial<Omit<RequestInfo, 'query' | 'path' | 'rawQuery' | 'problem' | 'malformed'>>

interface Row {
  method?: string
  url: string
  ua?: string
  want: Expected
  /** the decoded path, when the URL's path has escapes */
  path?: string
  /** why the hub does not take it for a resource (a part of the reason) */
  malformed?: string
  /** the answer the hub gives itself: code and message */
  problem?: [number, string]
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
  // a special verb and nothing after it: the apiserver's RequestInfo resolver fails, and it answers 500
  {
    url: '/api/v1/watch',
    want: { ...nonResource(), apiVersion: 'v1' },
    problem: [500, 'Internal Server Error: "/api/v1/watch": failed to create RequestInfo: unable to determine kind and namespace from url, /api/v1/watch'],
  },
  {
    url: '/apis/apps/v1/watch',
    want: { ...nonResource(), apiGroup: 'apps', apiVersion: 'v1' },
    problem: [
      500,
      'Internal Server Error: "/apis/apps/v1/watch": failed to create RequestInfo: unable to determine kind and namespace from url, /apis/apps/v1/watch',
    ],
  },
  {
    url: '/api/v1/proxy?a=1&b=<2>',
    want: { ...nonResource(), apiVersion: 'v1' },
    problem: [
      500,
      'Internal Server Error: "/api/v1/proxy?a=1&amp;b=&lt;2&gt;": failed to create RequestInfo: unable to determine kind and namespace from url, /api/v1/proxy?a=1&amp;b=&lt;2&gt;',
    ],
  },
  // an invalid escape: Go's url parse fails, net/http answers 400 before any handler
  { url: '/api/v1/namespaces/%E0%A4%A/pods', want: nonResource(), problem: [400, 'invalid URL escape "%A/"'] },
  { url: '/api/v1/namespaces/default/configmaps/a%zz', want: nonResource(), problem: [400, 'invalid URL escape "%zz"'] },
  { url: '/api/v1/namespaces/default/configmaps/a%4', want: nonResource(), problem: [400, 'invalid URL escape "%4"'] },
  { url: '/healthz%', want: nonResource(), problem: [400, 'invalid URL escape "%"'] },
  { url: '*', want: nonResource(), problem: [404, 'the server could not find the requested resource'] },

  // ---- core group, cluster-scoped --------------------------------------------------------------
  {
    url: '/api/v1/nodes/kind-worker2',
    ua: UA.kubeProxy,
    want: { isResourceRequest: true, verb: 'get', apiVersion: 'v1', resource: 'nodes', name: 'kind-worker2', component: 'kube-proxy' },
  },
  { url: '/api/v1/nodes', want: { verb: 'list', resource: 'nodes', name: '', namespace: '' } },
  { url: '/api/v1/nodes/', want: { verb: 'list', resource: 'nodes', name: '' } },
  {
    method: 'PATCH',
    url: '/api/v1/nodes/kind-worker2/status',
    ua: UA.kubelet,
    want: { verb: 'patch', resource: 'nodes', name: 'kind-worker2', subresource: 'status', component: 'kubelet' },
  },
  { url: '/api/v1/namespaces', want: { verb: 'list', resource: 'namespaces', namespace: '', name: '' } },
  { url: '/api/v1/namespaces/foo', want: { verb: 'get', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: '' } },
  { method: 'DELETE', url: '/api/v1/namespaces/foo', want: { verb: 'delete', resource: 'namespaces', namespace: 'foo', name: 'foo' } },
  { url: '/api/v1/namespaces/foo/status', want: { verb: 'get', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: 'status' } },
  {
    method: 'PUT',
    url: '/api/v1/namespaces/foo/status',
    want: { verb: 'update', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: 'status' },
  },
  {
    method: 'PUT',
    url: '/api/v1/namespaces/foo/finalize',
    want: { verb: 'update', resource: 'namespaces', namespace: 'foo', name: 'foo', subresource: 'finalize' },
  },
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
  {
    method: 'DELETE',
    url: '/api/v1/namespaces/default/pods?labelSelector=app%3Dweb',
    want: { verb: 'deletecollection', ...defaultPods, labelSelector: 'app=web' },
  },
  { method: 'OPTIONS', url: '/api/v1/namespaces/default/pods', want: { isResourceRequest: true, verb: 'options', ...defaultPods } },
  {
    url: '/api/v1/namespaces/default/configmaps/a%3Ab',
    path: '/api/v1/namespaces/default/configmaps/a:b',
    want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: 'a:b' },
  },
  { method: 'PUT', url: '/api/v1/namespaces/default/pods/nginx/status', want: { verb: 'update', ...nginx, subresource: 'status' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/eviction', want: { verb: 'create', ...nginx, subresource: 'eviction' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/binding', want: { verb: 'create', ...nginx, subresource: 'binding' } },
  {
    method: 'POST',
    url: '/api/v1/namespaces/kube-system/serviceaccounts/coredns/token',
    ua: UA.kubelet,
    want: { verb: 'create', resource: 'serviceaccounts', name: 'coredns', subresource: 'token', namespace: 'kube-system', component: 'kubelet' },
  },

  // ---- streaming subresources ------------------------------------------------------------------
  {
    url: '/api/v1/namespaces/default/pods/nginx/log?container=app&follow=true',
    ua: UA.kubectl,
    want: { verb: 'get', ...nginx, subresource: 'log', component: 'kubectl' },
  },
  {
    method: 'POST',
    url: '/api/v1/namespaces/default/pods/nginx/exec?command=sh&stdin=true&tty=true',
    want: { verb: 'connect', ...nginx, subresource: 'exec' },
  },
  { method: 'GET', url: '/api/v1/namespaces/default/pods/nginx/exec?command=ls', want: { verb: 'connect', ...nginx, subresource: 'exec' } }, // websocket form
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/attach?stdout=true', want: { verb: 'connect', ...nginx, subresource: 'attach' } },
  { method: 'POST', url: '/api/v1/namespaces/default/pods/nginx/portforward', want: { verb: 'connect', ...nginx, subresource: 'portforward' } },
  { method: 'GET', url: '/api/v1/namespaces/default/pods/nginx/portforward?ports=8080', want: { verb: 'connect', ...nginx, subresource: 'portforward' } },
  { url: '/api/v1/namespaces/default/pods/nginx/proxy', want: { verb: 'proxy', ...nginx, subresource: 'proxy' } },
  { url: '/api/v1/namespaces/default/pods/nginx/proxy/metrics', want: { verb: 'proxy', ...nginx, subresource: 'proxy' } },
  {
    method: 'POST',
    url: '/api/v1/namespaces/default/services/https:web:443/proxy/api',
    want: { verb: 'proxy', resource: 'services', namespace: 'default', name: 'https:web:443', subresource: 'proxy' },
  },
  {
    url: '/api/v1/nodes/kind-worker2/proxy/metrics/cadvisor',
    want: { verb: 'proxy', resource: 'nodes', name: 'kind-worker2', subresource: 'proxy', namespace: '' },
  },

  // the deprecated /api/v1/proxy/… form
  { url: '/api/v1/proxy/namespaces/default/pods/nginx', want: { verb: 'proxy', resource: 'pods', namespace: 'default', name: 'nginx', subresource: '' } },
  { method: 'POST', url: '/api/v1/proxy/namespaces/default/services/web', want: { verb: 'proxy', resource: 'services', namespace: 'default', name: 'web' } },
  { url: '/api/v1/proxy/nodes/kind-worker2', want: { verb: 'proxy', resource: 'nodes', name: 'kind-worker2', namespace: '' } },
  {
    url: '/api/v1/proxy/namespaces/default/services/web/healthz',
    want: { verb: 'proxy', resource: 'services', namespace: 'default', name: 'web', subresource: '' },
  },

  // ---- named groups ----------------------------------------------------------------------------
  {
    url: '/apis/discovery.k8s.io/v1/endpointslices',
    ua: UA.kubeProxy,
    want: {
      isResourceRequest: true,
      verb: 'list',
      apiGroup: 'discovery.k8s.io',
      apiVersion: 'v1',
      resource: 'endpointslices',
      namespace: '',
      component: 'kube-proxy',
    },
  },
  {
    url: '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-ud1-abcde',
    want: { verb: 'get', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'default', name: 'svc-ud1-abcde' },
  },
  {
    url: '/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices',
    want: { verb: 'list', apiGroup: 'discovery.k8s.io', apiVersion: 'v1beta1', resource: 'endpointslices', namespace: 'default' },
  },
  {
    url: '/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale',
    want: { verb: 'get', apiGroup: 'apps', resource: 'deployments', name: 'coredns', subresource: 'scale', namespace: 'kube-system' },
  },
  {
    method: 'PUT',
    url: '/apis/apps/v1/namespaces/default/deployments/web/status',
    want: { verb: 'update', apiGroup: 'apps', resource: 'deployments', namespace: 'default', name: 'web', subresource: 'status' },
  },
  {
    method: 'PUT',
    url: '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kind-worker2',
    ua: UA.kubelet,
    want: { verb: 'update', apiGroup: 'coordination.k8s.io', resource: 'leases', namespace: 'kube-node-lease', name: 'kind-worker2', component: 'kubelet' },
  },
  {
    url: '/apis/rbac.authorization.k8s.io/v1/clusterroles/admin',
    want: { verb: 'get', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'admin', namespace: '' },
  },
  {
    url: '/apis/apps.openyurt.io/v1beta1/nodepools/beijing',
    want: { verb: 'get', apiGroup: 'apps.openyurt.io', apiVersion: 'v1beta1', resource: 'nodepools', name: 'beijing' },
  },
  {
    method: 'POST',
    url: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    want: { verb: 'create', apiGroup: 'authorization.k8s.io', resource: 'subjectaccessreviews' },
  },
  {
    method: 'POST',
    url: '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    want: { verb: 'create', apiGroup: 'certificates.k8s.io', resource: 'certificatesigningrequests' },
  },
  {
    method: 'DELETE',
    url: '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
    want: { verb: 'deletecollection', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'default' },
  },

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
  {
    url: '/apis/discovery.k8s.io/v1/watch/endpointslices',
    want: { verb: 'watch', apiGroup: 'discovery.k8s.io', apiVersion: 'v1', resource: 'endpointslices', namespace: '' },
  },
  {
    url: '/apis/discovery.k8s.io/v1/watch/namespaces/default/endpointslices?resourceVersion=99',
    want: { verb: 'watch', apiGroup: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'default', resourceVersion: '99' },
  },
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
    want: {
      verb: 'list',
      apiGroup: 'discovery.k8s.io',
      resource: 'endpointslices',
      component: 'kube-proxy',
      labelSelector: '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name',
    },
  },
  { url: '/api/v1/pods?labelSelector=tier+in+%28web%2Capi%29,app!%3Dx', want: { verb: 'list', resource: 'pods', labelSelector: 'tier in (web,api),app!=x' } },
  {
    url: '/api/v1/pods?labelSelector=app%3Dweb&fieldSelector=status.phase%21%3DRunning',
    want: { verb: 'list', resource: 'pods', labelSelector: 'app=web', fieldSelector: 'status.phase!=Running' },
  },
  { url: '/api/v1/namespaces/default/pods/nginx?resourceVersion=12', want: { verb: 'get', ...nginx, resourceVersion: '12' } },
  { url: '/api/v1/pods?', want: { verb: 'list', resource: 'pods' } },
  {
    url: '/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker2',
    ua: UA.kubelet,
    want: { verb: 'list', resource: 'nodes', name: 'kind-worker2', fieldSelector: 'metadata.name=kind-worker2', component: 'kubelet' },
  },

  // a name from the field selector only if the apiserver would take it as a path segment
  { url: '/api/v1/nodes?fieldSelector=metadata.name%3D..', want: { verb: 'list', resource: 'nodes', name: '', fieldSelector: 'metadata.name=..' } },
  {
    url: '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Da%25b',
    want: { verb: 'list', resource: 'configmaps', namespace: 'default', name: '', fieldSelector: 'metadata.name=a%b' },
  },
  // the query as Go reads it: a pair with ';' is dropped, as is one with an invalid escape; '+' is a space
  { url: '/api/v1/pods?labelSelector=app%3Dweb;x&watch=1', want: { verb: 'watch', resource: 'pods', labelSelector: '' } },
  { url: '/api/v1/pods?watch=%zz&labelSelector=a+in+(x)', want: { verb: 'list', resource: 'pods', labelSelector: 'a in (x)' } },
  {
    url: '/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&fieldSelector=spec.nodeName%3Dn2',
    want: { verb: 'list', resource: 'pods', fieldSelector: 'spec.nodeName=n1' },
  },

  // ---- the path as the apiserver reads it: decoded whole, then split on '/' ---------------------
  // the issue's path: %2F separates, so the resource is "configmaps?x=", which nothing serves
  {
    url: '/api/v1/namespaces/atk19%2Fconfigmaps%3Fx%3D/services',
    path: '/api/v1/namespaces/atk19/configmaps?x=/services',
    ua: UA.kubeProxy,
    want: { ...nonResource(), component: 'kube-proxy' },
    malformed: 'resource "configmaps?x="',
  },
  { url: '/api/v1/namespaces%2Fdefault%2Fpods', path: '/api/v1/namespaces/default/pods', want: { verb: 'list', ...defaultPods } },
  {
    url: '/apis/discovery.k8s.io%2Fv1/endpointslices',
    path: '/apis/discovery.k8s.io/v1/endpointslices',
    want: { verb: 'list', apiGroup: 'discovery.k8s.io', resource: 'endpointslices' },
  },
  {
    url: '/api/v1/namespaces/default/pods/nginx%2Fstatus',
    path: '/api/v1/namespaces/default/pods/nginx/status',
    want: { verb: 'get', ...nginx, subresource: 'status' },
  },
  { url: '/api/v1/namespaces/default/pods/nginx/', want: { verb: 'get', ...nginx } }, // trailing slashes are trimmed, by RequestInfo and go-restful alike
  { url: '/api/v1/namespaces/default/pods//', want: { verb: 'list', ...defaultPods } },
  {
    url: '/api/v1/namespaces/default/configmaps/app-config%00',
    path: '/api/v1/namespaces/default/configmaps/app-config\0',
    want: nonResource(),
    malformed: 'name "app-config\\u0000"',
  },
  {
    url: '/api/v1/namespaces/default/configmaps/caf%C3%A9',
    path: '/api/v1/namespaces/default/configmaps/café',
    want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: 'café' },
  },
  {
    url: '/api/v1/namespaces/default/configmaps/%FF',
    path: '/api/v1/namespaces/default/configmaps/\ufffd',
    want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: '\ufffd' },
  },
  { url: '/api/v1/namespaces/default/configmaps/a+b', want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: 'a+b' } }, // '+' is no space in a path
  { url: '/api/v1/namespaces/default/configmaps/a#b?watch=1', want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: 'a#b' } }, // nor is '#' a fragment in a request
  { url: 'http://127.0.0.1:8080/api/v1/namespaces/default/pods?watch=1', path: '/api/v1/namespaces/default/pods', want: { verb: 'watch', ...defaultPods } }, // absolute-form

  // ---- resource paths the hub does not take for resources: relayed, never cached ----------------
  { url: '/api/v1/namespaces/default/configmaps/%2E%2E', path: '/api/v1/namespaces/default/configmaps/..', want: nonResource(), malformed: 'name ".."' },
  { url: '/api/v1/namespaces/default/configmaps/.', want: nonResource(), malformed: 'name "."' },
  {
    url: '/api/v1/namespaces/default/configmaps%2F..%2Fsecrets',
    path: '/api/v1/namespaces/default/configmaps/../secrets',
    want: nonResource(),
    malformed: 'name ".."',
  },
  { url: '/api/v1/namespaces/default/configmaps/a%25b', path: '/api/v1/namespaces/default/configmaps/a%b', want: nonResource(), malformed: 'name "a%b"' },
  { url: `/api/v1/namespaces/default/configmaps/${'c'.repeat(254)}`, want: nonResource(), malformed: 'name "ccc' },
  {
    url: `/api/v1/namespaces/default/configmaps/${'c'.repeat(253)}`,
    want: { verb: 'get', resource: 'configmaps', namespace: 'default', name: 'c'.repeat(253) },
  },
  { url: '/api/v1/namespaces/Default/configmaps', want: nonResource(), malformed: 'namespace "Default"' },
  { url: `/api/v1/namespaces/${'n'.repeat(64)}/configmaps`, want: nonResource(), malformed: 'namespace "nnn' },
  {
    url: '/api/v1/namespaces/kube%00system/configmaps',
    path: '/api/v1/namespaces/kube\0system/configmaps',
    want: nonResource(),
    malformed: 'namespace "kube\\u0000system"',
  },
  { url: '/api/v1/namespaces/a%252Fb/services', path: '/api/v1/namespaces/a%2Fb/services', want: nonResource(), malformed: 'namespace "a%2Fb"' },
  { url: '/api/v1/namespaces/-x/configmaps', want: nonResource(), malformed: 'namespace "-x"' },
  { url: '/api/v1/namespaces//configmaps', want: nonResource(), malformed: 'an empty path segment' },
  { url: '/api/v1/namespaces/default//configmaps', want: nonResource(), malformed: 'an empty path segment' },
  { url: '/api/v1/namespaces/default/pods//status', want: nonResource(), malformed: 'an empty path segment' },
  { url: '//api/v1/pods', want: nonResource(), malformed: 'more than one /' },
  { url: '/api/v1/Pods', want: nonResource(), malformed: 'resource "Pods"' },
  { url: '/api/V1/pods', want: nonResource(), malformed: 'version "V1"' },
  { url: '/apis/Apps/v1/deployments', want: nonResource(), malformed: 'group "Apps"' },
  { url: '/apis/apps./v1/deployments', want: nonResource(), malformed: 'group "apps."' },
  { url: '/api/v1/namespaces/default/pods/nginx/Status', want: nonResource(), malformed: 'subresource "Status"' },
  { url: '/api/v1/namespaces/default/pods/nginx/status/x', want: nonResource(), malformed: 'after the subresource' },
  { url: '/api/v1/watch/namespaces/default/pods/nginx/status', want: nonResource(), malformed: '/watch/ form' },
  {
    url: '/api/v1/watch/namespaces/atk19%2Fconfigmaps%3Fx%3D/services',
    path: '/api/v1/watch/namespaces/atk19/configmaps?x=/services',
    want: nonResource(),
    malformed: 'resource "configmaps?x="',
  },
  {
    method: 'PUT',
    url: '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/%2E',
    path: '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/.',
    want: nonResource('put'),
    malformed: 'name "."',
  },
  { method: 'DELETE', url: '/api/v1/namespaces/Default/pods', want: nonResource('delete'), malformed: 'namespace "Default"' },

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
    if (!row.url.startsWith('http:')) t.equal(info.path, row.path ?? row.url.split('?')[0], 'path: the URL path, decoded')
    if (row.malformed) t.match(info.malformed, row.malformed, 'why the hub does not take it for a resource')
    else t.equal(info.malformed, undefined, 'a resource or non-resource request as the apiserver reads it')
    if (row.problem) t.match(info.problem, { kind: 'Status', code: row.problem[0], message: row.problem[1] }, 'the apiserver’s own answer')
    else t.equal(info.problem, undefined, 'the apiserver is asked')
  })
}

t.test('apiserverRequestInfo: what kube-apiserver reads where the hub sees no resource (the simulator reads requests with it)', async t => {
  const cases: [string, string, Partial<RequestInfo>][] = [
    [
      'GET',
      '/api/v1/namespaces/atk19%2Fconfigmaps%3Fx%3D/services',
      { isResourceRequest: true, verb: 'get', namespace: 'atk19', resource: 'configmaps?x=', name: 'services', subresource: '' },
    ],
    ['GET', '/api/v1/namespaces//configmaps', { isResourceRequest: true, verb: 'list', namespace: '', resource: 'configmaps', name: '' }],
    ['GET', '/api/v1/namespaces/Default/configmaps', { isResourceRequest: true, verb: 'list', namespace: 'Default', resource: 'configmaps' }],
    ['GET', '/api/v1/namespaces/default/configmaps/%2E%2E', { isResourceRequest: true, verb: 'get', namespace: 'default', resource: 'configmaps', name: '..' }],
    ['GET', '//api/v1/pods', { isResourceRequest: true, verb: 'list', resource: 'pods' }],
    [
      'GET',
      '/api/v1/nodes?fieldSelector=metadata.name%3D' + 'n'.repeat(300),
      { isResourceRequest: true, verb: 'list', resource: 'nodes', name: 'n'.repeat(300) },
    ],
  ]
  for (const [method, url, want] of cases) {
    const info = apiserverRequestInfo(method, url)
    t.match(info, { ...want, malformed: undefined, problem: undefined }, `${method} ${url}`)
  }
  t.match(apiserverRequestInfo('GET', '/api/v1/watch').problem, { code: 500 }, 'its problems are the same')
})

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
    // client-chosen bytes never reach a directory name or a metric label
    ['my agent/1.0', 'my-agent'],
    ['  Spaced  Out  /2', 'spaced-out'],
    ['../../etc/passwd', ''],
    ['..', ''],
    ['über-client/1', 'ber-client'],
    ['a\u0000b\r\nc/1', 'a-b-c'],
    ['x'.repeat(500), 'x'.repeat(63)],
    [`${'y'.repeat(62)}-z`, `${'y'.repeat(62)}`],
  ]
  for (const [ua, want] of cases) t.equal(componentOf(ua), want, JSON.stringify(ua))
})

t.test('decodeTarget reads a request target as Go’s url.ParseRequestURI', async t => {
  const cases: [string, { path: string; rawQuery: string; problem?: string }][] = [
    ['/api/v1/pods?watch=1', { path: '/api/v1/pods', rawQuery: 'watch=1' }],
    ['/api/v1/namespaces/a%2Fb%3Fc/pods?x=%2F', { path: '/api/v1/namespaces/a/b?c/pods', rawQuery: 'x=%2F' }],
    ['/a+b/%2B', { path: '/a+b/+', rawQuery: '' }],
    ['/a#b?c#d', { path: '/a#b', rawQuery: 'c#d' }],
    ['/x?', { path: '/x', rawQuery: '' }],
    ['/x??y', { path: '/x', rawQuery: '?y' }],
    ['https://apiserver:6443/api/v1/nodes?limit=1', { path: '/api/v1/nodes', rawQuery: 'limit=1' }],
    ['http://apiserver?x', { path: 'http://apiserver?x', rawQuery: '', problem: 'the server could not find the requested resource' }],
    ['/%C3%A9/%e2%82%ac', { path: '/é/€', rawQuery: '' }],
    ['/%C3', { path: '/\ufffd', rawQuery: '' }],
    ['/a%2', { path: '/a%2', rawQuery: '', problem: 'invalid URL escape "%2"' }],
  ]
  for (const [url, want] of cases) {
    const got = decodeTarget(url)
    t.same({ path: got.path, rawQuery: got.rawQuery, problem: got.problem?.message }, want, url)
  }
})

t.test('parseQuery reads a query as Go’s url.ParseQuery, encodeQuery writes it back', async t => {
  const cases: [string, [string, string][], string][] = [
    [
      'a=1&a=2&b',
      [
        ['a', '1'],
        ['a', '2'],
        ['b', ''],
      ],
      'a=1&a=2&b=',
    ],
    ['&&x=1&', [['x', '1']], 'x=1'],
    [
      '=v&k=',
      [
        ['', 'v'],
        ['k', ''],
      ],
      '=v&k=',
    ],
    ['a=1;b=2&c=3', [['c', '3']], 'c=3'],
    ['a=%zz&b=%41', [['b', 'A']], 'b=A'],
    ['s=a+b%20c%2Bd', [['s', 'a b c+d']], 's=a+b+c%2Bd'],
    ['l=!a,b%3Dc,x+in+(y,z)', [['l', '!a,b=c,x in (y,z)']], 'l=%21a%2Cb%3Dc%2Cx+in+%28y%2Cz%29'],
    ['u=%C3%A9~*', [['u', 'é~*']], 'u=%C3%A9~%2A'],
  ]
  for (const [raw, entries, encoded] of cases) {
    const query = parseQuery(raw)
    t.same([...query], entries, `parse ${raw}`)
    t.equal(encodeQuery(query), encoded, `encode ${raw}`)
  }
  t.equal(
    encodeQuery(parseQuery('watch=1&allowWatchBookmarks=false'), { allowWatchBookmarks: 'true' }),
    'watch=1&allowWatchBookmarks=true',
    'set replaces a parameter',
  )
})

t.test('escapePath and resourcePath write what Go decodes back to the same path', async t => {
  const paths: [string, string][] = [
    ['/api/v1/namespaces/default/pods', '/api/v1/namespaces/default/pods'],
    ['/api/v1/namespaces/default/services/https:web:443/proxy/a;b=c,d@e$f&g+h', '/api/v1/namespaces/default/services/https:web:443/proxy/a;b=c,d@e$f&g+h'],
    ['/api/v1/namespaces/atk19/configmaps?x=/services', '/api/v1/namespaces/atk19/configmaps%3Fx=/services'],
    ['/a/./b/../c/.d/..e', '/a/%2E/b/%2E%2E/c/.d/..e'],
    ['/a b/"q"/#/%/!*\'()', '/a%20b/%22q%22/%23/%25/%21%2A%27%28%29'],
    ['/caf\u00e9/\ud83d\ude00/\ud800x', '/caf%C3%A9/%F0%9F%98%80/%EF%BF%BDx'],
    ['/x\0y/\u007f', '/x%00y/%7F'],
    ['//api//v1/', '//api//v1/'],
  ]
  for (const [path, want] of paths) t.equal(escapePath(path), want, JSON.stringify(path))
  t.equal(resourcePath({ group: '', version: 'v1', namespace: 'default', resource: 'services' }), '/api/v1/namespaces/default/services')
  t.equal(resourcePath({ group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices' }), '/apis/discovery.k8s.io/v1/endpointslices')
  t.equal(
    resourcePath({ group: '', version: 'v1', namespace: 'a/b?c', resource: 'pods', name: '..', subresource: 'status' }),
    '/api/v1/namespaces/a%2Fb%3Fc/pods/%2E%2E/status',
  )
})

t.test('upstreamPath: what the hub sends is what it read', async t => {
  const cases: [string, string, string][] = [
    // client-go (kubelet, kube-proxy, kubectl) writes paths and queries as Go does: they go unchanged
    [
      'GET',
      '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2&limit=500&resourceVersion=0',
      '/api/v1/pods?fieldSelector=spec.nodeName%3Dkind-worker2&limit=500&resourceVersion=0',
    ],
    [
      'GET',
      '/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dkind-worker2&resourceVersion=1234&timeout=7m51s&timeoutSeconds=471&watch=true',
      '/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dkind-worker2&resourceVersion=1234&timeout=7m51s&timeoutSeconds=471&watch=true',
    ],
    ['GET', '/api/v1/namespaces/default/pods?watch=1', '/api/v1/namespaces/default/pods?watch=1'],
    [
      'GET',
      '/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker2&resourceVersion=0',
      '/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker2&resourceVersion=0',
    ],
    [
      'GET',
      '/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name&limit=500&resourceVersion=0',
      '/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name&limit=500&resourceVersion=0',
    ],
    ['GET', '/api/v1/pods?labelSelector=tier+in+%28web%2Capi%29%2Capp%21%3Dx', '/api/v1/pods?labelSelector=tier+in+%28web%2Capi%29%2Capp%21%3Dx'],
    ['GET', '/api/v1/namespaces/kube-system/services/https:web:443', '/api/v1/namespaces/kube-system/services/https:web:443'],
    [
      'POST',
      '/api/v1/namespaces/default/pods/nginx/exec?command=sh&command=-c&command=echo+a%3Bb&stdin=true',
      '/api/v1/namespaces/default/pods/nginx/exec?command=sh&command=-c&command=echo+a%3Bb&stdin=true',
    ],
    // other encoders: the same values, written as Go writes them
    ['GET', '/api/v1/pods?labelSelector=tier%20in%20(web,api)', '/api/v1/pods?labelSelector=tier+in+%28web%2Capi%29'],
    ['GET', '/api/v1/namespaces/default/configmaps/a%3Ab', '/api/v1/namespaces/default/configmaps/a:b'],
    ['GET', '/api/v1/pods?labelSelector=a;b&limit=1&watch', '/api/v1/pods?limit=1&watch='],
    // what a hostile client sends reaches the apiserver as the hub read it
    ['GET', '/api/v1/namespaces/atk19%2Fconfigmaps%3Fx%3D/services', '/api/v1/namespaces/atk19/configmaps%3Fx=/services'],
    ['GET', '/api/v1/namespaces/default/configmaps%2F%2e%2e%2Fsecrets', '/api/v1/namespaces/default/configmaps/%2E%2E/secrets'],
    ['GET', '/api/v1/namespaces/a%252Fb/services', '/api/v1/namespaces/a%252Fb/services'],
    ['GET', '/api/v1/namespaces/default/configmaps/%FF', '/api/v1/namespaces/default/configmaps/%EF%BF%BD'],
    ['GET', 'http://apiserver:6443/api/v1/nodes/n1?resourceVersion=0', '/api/v1/nodes/n1?resourceVersion=0'],
    // a proxied request's query is the backend's: passed as sent
    ['GET', '/api/v1/namespaces/default/services/web:80/proxy/metrics%2Fx?a=1;b=2&c', '/api/v1/namespaces/default/services/web:80/proxy/metrics/x?a=1;b=2&c'],
    ['GET', '/api/v1/proxy/nodes/kind-worker2/stats?q=%zz', '/api/v1/proxy/nodes/kind-worker2/stats?q=%zz'],
    // non-resource paths
    ['GET', '/healthz', '/healthz'],
    ['GET', '/livez?verbose', '/livez?verbose='],
    ['GET', '/version', '/version'],
    ['GET', '/openapi/v2', '/openapi/v2'],
    ['GET', '/openapi/v3/apis/apps/v1?hash=4D6C', '/openapi/v3/apis/apps/v1?hash=4D6C'],
    ['GET', '/apis', '/apis'],
    ['GET', '/apis/discovery.k8s.io/v1/', '/apis/discovery.k8s.io/v1/'],
  ]
  for (const [method, url, want] of cases) t.equal(upstreamPath(classify(method, url)), want, `${method} ${url}`)
  const watch = classify('GET', '/api/v1/pods?allowWatchBookmarks=false&watch=1&resourceVersion=5')
  t.equal(
    upstreamPath(watch, { allowWatchBookmarks: 'true' }),
    '/api/v1/pods?watch=1&resourceVersion=5&allowWatchBookmarks=true',
    'the hub’s own parameter replaces the client’s',
  )
})

t.test('boolean query parameters as the apiserver reads them: present and not "0" or "false" (any case)', async t => {
  const flag = (query: string) => queryFlag(classify('GET', `/api/v1/pods?watch=1&${query}`), 'allowWatchBookmarks')
  const cases: [string, boolean][] = [
    ['allowWatchBookmarks=true', true],
    ['allowWatchBookmarks=1', true],
    ['allowWatchBookmarks=True', true],
    ['allowWatchBookmarks', true],
    ['allowWatchBookmarks=false', false],
    ['allowWatchBookmarks=FALSE', false],
    ['allowWatchBookmarks=0', false],
    ['other=1', false],
  ]
  for (const [query, want] of cases) t.equal(flag(query), want, query)
})
