// @kubernetes/client-node pointed at the hub, optionally speaking as a node component (its
// User-Agent decides what the hub caches and filters for it).
import * as k8s from '@kubernetes/client-node'
import type { RequestOptions } from 'node:https'

class ComponentKubeConfig extends k8s.KubeConfig {
  constructor(private readonly userAgent: string | undefined) {
    super()
  }

  // watches go through fetch options
  override async applyToFetchOptions(opts: RequestOptions): Promise<any> {
    const init = await super.applyToFetchOptions(opts)
    if (this.userAgent) init.headers = { ...(init.headers as Record<string, string>), 'User-Agent': this.userAgent }
    return init
  }

  // lists and gets go through the generated API clients' request contexts
  override async applySecurityAuthentication(context: Parameters<k8s.KubeConfig['applySecurityAuthentication']>[0]): Promise<void> {
    await super.applySecurityAuthentication(context)
    if (this.userAgent) context.setHeaderParam('User-Agent', this.userAgent)
  }
}

export function kubeConfigFor(server: string, userAgent?: string): k8s.KubeConfig {
  const kc = new ComponentKubeConfig(userAgent)
  kc.loadFromOptions({
    clusters: [{ name: 'hub', server, skipTLSVerify: true }],
    users: [{ name: 'node' }],
    contexts: [{ name: 'hub', cluster: 'hub', user: 'node' }],
    currentContext: 'hub',
  })
  return kc
}
