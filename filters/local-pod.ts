// What the hub knows of this node's own pods beyond what the cloud last said: their status as kubelet
// wrote it while the apiserver was away (lib/overlay/pod-overlay.ts keeps it), reduced to what an
// endpoint is made of. The localendpoints filter (filters/localendpoints.ts) reads it.

/** A pod of this node, as its endpoints should show it now. */
export interface LocalPod {
  namespace: string
  name: string
  /** the pod's uid: an endpoint whose targetRef names another uid is another pod of that name */
  uid: string
  /** the pod's IPs in kubelet's order (status.podIPs), at most one per family; empty: no address (yet) */
  ips: readonly string[]
  /** the Ready condition is True and the pod is not terminating */
  ready: boolean
  /** the Ready condition is True (EndpointConditions.serving) */
  serving: boolean
  /** deleted (kubelet asked for its deletion), or phase Succeeded / Failed: its endpoints go away */
  gone: boolean
  /** being deleted (kubelet's graceful deletion under way): terminating endpoints */
  terminating: boolean
}

/** What the localendpoints filter reads. */
export interface LocalEndpointsInput {
  nodeName: string
  /** by `namespace/name`; empty: every object passes as it is */
  pods: ReadonlyMap<string, LocalPod>
  /**
   * Told, for each endpoint of an overlaid pod the filter reads, the addresses the object itself
   * names (before the filter changes them): the overlay's reconciler learns from it when the cloud
   * has caught up. Never called for pods not in `pods`.
   */
  observed?(pod: LocalPod, addressType: 'IPv4' | 'IPv6' | 'FQDN', addresses: readonly string[]): void
}
