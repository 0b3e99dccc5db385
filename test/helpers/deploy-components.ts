// What the test does on the node in kubelet's and kube-proxy's place while it follows docs/deploy.md
// (test/deploy-guide.e2e.ts), and the small readers its checks share.
import { existsSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import type { Test } from 'tap'
import { parse } from 'yaml'
import { nodeName } from './deploy-node.ts'
import type { DeployNode } from './deploy-node.ts'

export type Said = [ok: boolean, message: string][]

export const json = (text: string) => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
export const fileMode = (file: string) => (existsSync(file) ? statSync(file).mode & 0o777 : undefined)
export const mentions = (text: string, what: string | RegExp): Said => [[typeof what === 'string' ? text.includes(what) : what.test(text), `says ${what}`]]
export const kubeconfigServer = (text: string) => parse(text)?.clusters?.[0]?.cluster?.server as string | undefined

/** kubelet, once it reads through the hub: the kubeconfig its drop-in names, its pods, its node, kube-proxy's ConfigMap (a mounted volume). */
export async function playKubelet(t: Test, node: DeployNode): Promise<void> {
  const dropIn = readFileSync(`${node.root}/etc/systemd/system/kubelet.service.d/20-outpost.conf`, 'utf8')
  const kubeconfig = /--kubeconfig=(\S+?)"/.exec(dropIn)?.[1] ?? ''
  const server = kubeconfigServer(readFileSync(node.root + kubeconfig, 'utf8'))
  t.equal(server, 'http://127.0.0.1:10261', `kubelet's kubeconfig (${kubeconfig}) names the hub`)
  const get = (p: string) => node.sh(`curl -sf -A 'kubelet/v1.30.0 (linux/amd64) kubernetes/7c48c2b' '${server}${p}'`)
  const pods = json((await get(`/api/v1/pods?fieldSelector=spec.nodeName%3D${nodeName}`)).stdout)
  t.equal(pods?.kind, 'PodList', 'kubelet lists its pods through the hub')
  t.equal(json((await get(`/api/v1/nodes/${nodeName}`)).stdout)?.metadata?.name, nodeName, 'and gets its Node')
  const cm = json((await get('/api/v1/namespaces/kube-system/configmaps/kube-proxy')).stdout)
  t.equal(cm?.kind, 'ConfigMap', "and reads kube-proxy's ConfigMap, which it mounts into kube-proxy's pods")
}

/**
 * kube-proxy after a restart, as kubeadm's DaemonSet runs it: kubelet mounts its ConfigMap (read
 * through the hub, filters and all) at /var/lib/kube-proxy; kube-proxy reads config.conf there, and
 * the kubeconfig its clientConnection names (without one, the in-cluster config: the cloud,
 * straight past the hub).
 */
export async function playKubeProxy(t: Test, node: DeployNode): Promise<void> {
  const mounted = json((await node.sh(`curl -sf -A kubelet/v1.30.0 http://127.0.0.1:10261/api/v1/namespaces/kube-system/configmaps/kube-proxy`)).stdout)
  const files: Record<string, string> = mounted?.data ?? {}
  const named = parse(files['config.conf'] ?? '')?.clientConnection?.kubeconfig as string | undefined
  t.equal(named, '/var/lib/kube-proxy/kubeconfig.conf', "config.conf, as kubelet mounts it, still names kube-proxy's kubeconfig (no filter commented it out)")
  const kubeconfig = named?.startsWith('/var/lib/kube-proxy/') ? files[named.slice('/var/lib/kube-proxy/'.length)] : undefined
  if (kubeconfig === undefined) return // in-cluster: kube-proxy never reaches the hub (the checks after this one say so too)
  const server = kubeconfigServer(kubeconfig)
  if (server !== 'http://127.0.0.1:10261') {
    t.equal(kubeconfig, readFileSync(path.join(node.work, 'kube-proxy-kubeconfig.conf.orig'), 'utf8'), "rolled back: kube-proxy's own kubeconfig again")
    return
  }
  const get = (p: string) => node.sh(`curl -sf -A 'kube-proxy/v1.30.0 (linux/amd64) kubernetes/7c48c2b' '${server}${p}'`)
  t.equal(json((await get('/apis/discovery.k8s.io/v1/endpointslices')).stdout)?.kind, 'EndpointSliceList', 'kube-proxy lists EndpointSlices through the hub')
  t.equal(json((await get('/api/v1/services')).stdout)?.kind, 'ServiceList', 'and Services')
}

/** kubelet's part at step 3: the static pod's mirror pod (through the apiserver kubelet uses then). */
export async function createMirrorPod(t: Test, node: DeployNode): Promise<void> {
  const pod = parse(readFileSync(`${node.root}/etc/kubernetes/manifests/outpost.yaml`, 'utf8'))
  pod.metadata = {
    ...pod.metadata,
    name: `outpost-${nodeName}`,
    annotations: { 'kubernetes.io/config.mirror': 'test', 'kubernetes.io/config.source': 'file' },
  }
  pod.spec.nodeName = nodeName
  const made = await node.sh(
    `curl -sf -A kubelet/v1.30.0 -H 'Content-Type: application/json' -d '${JSON.stringify(pod).replaceAll("'", "'\\''")}' ${node.simulatorUrl}/api/v1/namespaces/kube-system/pods`,
  )
  t.equal(made.code, 0, 'the mirror pod', { stderr: made.stderr })
}
