// CSINode, CSIDriver and RuntimeClass as the apiserver answers them, with every field their schema
// has: samples for the typed codec's tests (kubelet's own CSINode from its recorded create).
import { fixtureJson } from './fixtures.ts'

/** By `apiVersion/kind`. */
export const kubeletKinds: Record<string, any> = {
  'storage.k8s.io/v1/CSINode': {
    ...fixtureJson('kubelet-writes/02-create-csinodes.json').requestObject,
    spec: {
      drivers: [
        { name: 'ebs.csi.aws.com', nodeID: 'i-0abc', topologyKeys: ['topology.ebs.csi.aws.com/zone'], allocatable: { count: 25 } },
        { name: 'hostpath.csi.k8s.io', nodeID: 'edge-1', topologyKeys: null },
      ],
    },
  },
  'storage.k8s.io/v1/CSIDriver': {
    kind: 'CSIDriver',
    apiVersion: 'storage.k8s.io/v1',
    metadata: { name: 'ebs.csi.aws.com', uid: '2f0d', resourceVersion: '301', creationTimestamp: '2026-11-25T13:18:50Z' },
    spec: {
      attachRequired: true,
      podInfoOnMount: false,
      volumeLifecycleModes: ['Persistent', 'Ephemeral'],
      storageCapacity: false,
      fsGroupPolicy: 'ReadWriteOnceWithFSType',
      tokenRequests: [{ audience: 'vault', expirationSeconds: 3600 }, { audience: '' }],
      requiresRepublish: true,
    },
  },
  'node.k8s.io/v1/RuntimeClass': {
    kind: 'RuntimeClass',
    apiVersion: 'node.k8s.io/v1',
    metadata: { name: 'gvisor', uid: '7c1e', resourceVersion: '302', creationTimestamp: '2026-11-25T13:18:50Z' },
    handler: 'runsc',
    overhead: { podFixed: { cpu: '250m', memory: '64Mi' } },
    scheduling: {
      nodeSelector: { 'runtime/gvisor': 'true' },
      tolerations: [{ key: 'runtime', operator: 'Equal', value: 'gvisor', effect: 'NoSchedule', tolerationSeconds: 30 }],
    },
  },
}
