// kubelet's writes about its own pods, seen while the cloud is away: a status write (PATCH or PUT of
// pods/<name>/status) or a delete of a pod bound to this node teaches the overlay what the pod's
// endpoints are now. The write itself is still refused by the caller (the router's 503): this only
// learns from it, and says in one phrase what it learned for that 503.
import type { RequestInfo } from '../api/requestinfo.ts'
import type { CacheStore } from '../cache/store.ts'
import { LostObjectError } from '../cache/store.ts'
import { asJson } from '../cache/translate.ts'
import { resourceKeyOf } from '../cache/types.ts'
import type { CachedObject } from '../cache/types.ts'
import { freshestCopy } from '../cache/offline.ts'
import { localPodOf, statusAfterWrite } from './pod-status.ts'
import type { PodJson } from './pod-status.ts'
import type { PodOverlay } from './pod-overlay.ts'

export interface StatusLearnerOptions {
  store: CacheStore
  overlay: PodOverlay
  nodeName: string
}

/** Whether a request is kubelet's kind of write about one pod: its status, or its deletion. */
export function isPodWrite(info: RequestInfo): boolean {
  if (!info.isResourceRequest || info.apiGroup !== '' || info.resource !== 'pods' || info.name === '' || info.namespace === '') return false
  if (info.subresource === 'status') return info.verb === 'patch' || info.verb === 'update'
  return info.subresource === '' && info.verb === 'delete'
}

export class StatusLearner {
  constructor(private readonly options: StatusLearnerOptions) {}

  /**
   * Learns from one of kubelet's pod writes (isPodWrite); returns what the refusal should add: that
   * the node's endpoints now follow it, or why they do not.
   */
  async learn(info: RequestInfo, contentType: string | undefined, body: Buffer | undefined): Promise<string> {
    const cached = await this.cachedPod(info)
    if (cached === 'lost') return `the hub could not read its copy of pod ${info.namespace}/${info.name}, so this node's endpoints do not follow the write`
    const base = cached && (asJson(cached) as PodJson | undefined)
    if (!base) return `pod ${info.namespace}/${info.name} is not in the hub's cache, so this node's endpoints do not follow the write`
    if (base.spec?.nodeName !== this.options.nodeName)
      return `pod ${info.namespace}/${info.name} is not bound to this node (${this.options.nodeName}), so its endpoints do not follow the write`
    let pod
    if (info.verb === 'delete') pod = { ...localPodOf(base), gone: true, ready: false, serving: false }
    else {
      const after = statusAfterWrite(base, { verb: info.verb === 'patch' ? 'patch' : 'update', contentType, body: body ?? Buffer.alloc(0) })
      if ('invalid' in after) return `the write cannot be applied (${after.invalid}), so this node's endpoints do not follow it`
      pod = localPodOf({ ...base, status: after.status })
    }
    try {
      await this.options.overlay.learn(pod, localPodOf(base).ips)
    } catch (error) {
      return `this node's endpoints do not follow the write: ${(error as Error).message}`
    }
    return `this node's endpoints of pod ${info.namespace}/${info.name} now show it${pod.gone ? ' gone' : ` at ${pod.ips.join(', ') || 'no address'}, ${pod.ready ? 'ready' : 'not ready'}`} until the cloud catches up`
  }

  /** The freshest copy of the pod any component cached. */
  private async cachedPod(info: RequestInfo): Promise<CachedObject | undefined | 'lost'> {
    const { store } = this.options
    try {
      return (await freshestCopy(store, await store.candidates(resourceKeyOf(info)), info.namespace, info.name))?.object
    } catch (error) {
      if (error instanceof LostObjectError) return 'lost'
      throw error
    }
  }
}
