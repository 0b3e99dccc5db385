// Field tables for core/v1 volume sources (every kind v1.24 has) and projections, used by Pod specs.
// Split from schema-pod.ts only to keep files short. Notation: see schema-meta.ts.

export const volumeMessages: Record<string, string> = {
  Volume: '1 name string; 2 ... VolumeSource',
  VolumeSource: `1 hostPath *HostPathVolumeSource?; 2 emptyDir *EmptyDirVolumeSource?;
    3 gcePersistentDisk *GCEPersistentDiskVolumeSource?;
    4 awsElasticBlockStore *AWSElasticBlockStoreVolumeSource?; 5 gitRepo *GitRepoVolumeSource?;
    6 secret *SecretVolumeSource?; 7 nfs *NFSVolumeSource?; 8 iscsi *ISCSIVolumeSource?;
    9 glusterfs *GlusterfsVolumeSource?; 10 persistentVolumeClaim *PersistentVolumeClaimVolumeSource?;
    11 rbd *RBDVolumeSource?; 12 flexVolume *FlexVolumeSource?; 13 cinder *CinderVolumeSource?;
    14 cephfs *CephFSVolumeSource?; 15 flocker *FlockerVolumeSource?; 16 downwardAPI *DownwardAPIVolumeSource?;
    17 fc *FCVolumeSource?; 18 azureFile *AzureFileVolumeSource?; 19 configMap *ConfigMapVolumeSource?;
    20 vsphereVolume *VsphereVirtualDiskVolumeSource?; 21 quobyte *QuobyteVolumeSource?;
    22 azureDisk *AzureDiskVolumeSource?; 23 photonPersistentDisk *PhotonPersistentDiskVolumeSource?;
    26 projected *ProjectedVolumeSource?; 24 portworxVolume *PortworxVolumeSource?;
    25 scaleIO *ScaleIOVolumeSource?; 27 storageos *StorageOSVolumeSource?; 28 csi *CSIVolumeSource?;
    29 ephemeral *EphemeralVolumeSource?`,
  HostPathVolumeSource: '1 path string; 2 type *string?',
  EmptyDirVolumeSource: '1 medium string?; 2 sizeLimit *Quantity?',
  GCEPersistentDiskVolumeSource: '1 pdName string; 2 fsType string?; 3 partition int32?; 4 readOnly bool?',
  AWSElasticBlockStoreVolumeSource: '1 volumeID string; 2 fsType string?; 3 partition int32?; 4 readOnly bool?',
  GitRepoVolumeSource: '1 repository string; 2 revision string?; 3 directory string?',
  SecretVolumeSource: '1 secretName string?; 2 items []KeyToPath?; 3 defaultMode *int32?; 4 optional *bool?',
  NFSVolumeSource: '1 server string; 2 path string; 3 readOnly bool?',
  ISCSIVolumeSource: `1 targetPortal string; 2 iqn string; 3 lun int32; 4 iscsiInterface string?; 5 fsType string?;
    6 readOnly bool?; 7 portals []string?; 8 chapAuthDiscovery bool?; 11 chapAuthSession bool?;
    10 secretRef *LocalObjectReference?; 12 initiatorName *string?`,
  GlusterfsVolumeSource: '1 endpoints string; 2 path string; 3 readOnly bool?',
  PersistentVolumeClaimVolumeSource: '1 claimName string; 2 readOnly bool?',
  RBDVolumeSource: `1 monitors []string; 2 image string; 3 fsType string?; 4 pool string?; 5 user string?; 6 keyring string?;
    7 secretRef *LocalObjectReference?; 8 readOnly bool?`,
  FlexVolumeSource: `1 driver string; 2 fsType string?; 3 secretRef *LocalObjectReference?; 4 readOnly bool?;
    5 options map[string]?`,
  CinderVolumeSource: '1 volumeID string; 2 fsType string?; 3 readOnly bool?; 4 secretRef *LocalObjectReference?',
  CephFSVolumeSource: `1 monitors []string; 2 path string?; 3 user string?; 4 secretFile string?;
    5 secretRef *LocalObjectReference?; 6 readOnly bool?`,
  FlockerVolumeSource: '1 datasetName string?; 2 datasetUUID string?',
  DownwardAPIVolumeSource: '1 items []DownwardAPIVolumeFile?; 2 defaultMode *int32?',
  FCVolumeSource: '1 targetWWNs []string?; 2 lun *int32?; 3 fsType string?; 4 readOnly bool?; 5 wwids []string?',
  AzureFileVolumeSource: '1 secretName string; 2 shareName string; 3 readOnly bool?',
  ConfigMapVolumeSource: '1 ... LocalObjectReference; 2 items []KeyToPath?; 3 defaultMode *int32?; 4 optional *bool?',
  VsphereVirtualDiskVolumeSource: '1 volumePath string; 2 fsType string?; 3 storagePolicyName string?; 4 storagePolicyID string?',
  QuobyteVolumeSource: `1 registry string; 2 volume string; 3 readOnly bool?; 4 user string?; 5 group string?; 6 tenant string?`,
  AzureDiskVolumeSource: `1 diskName string; 2 diskURI string; 3 cachingMode *string?; 4 fsType *string?; 5 readOnly *bool?;
    6 kind *string?`,
  PhotonPersistentDiskVolumeSource: '1 pdID string; 2 fsType string?',
  ProjectedVolumeSource: '1 sources []VolumeProjection; 2 defaultMode *int32?',
  PortworxVolumeSource: '1 volumeID string; 2 fsType string?; 3 readOnly bool?',
  ScaleIOVolumeSource: `1 gateway string; 2 system string; 3 secretRef *LocalObjectReference; 4 sslEnabled bool?;
    5 protectionDomain string?; 6 storagePool string?; 7 storageMode string?; 8 volumeName string?;
    9 fsType string?; 10 readOnly bool?`,
  StorageOSVolumeSource: `1 volumeName string?; 2 volumeNamespace string?; 3 fsType string?; 4 readOnly bool?;
    5 secretRef *LocalObjectReference?`,
  CSIVolumeSource: `1 driver string; 2 readOnly *bool?; 3 fsType *string?; 4 volumeAttributes map[string]?;
    5 nodePublishSecretRef *LocalObjectReference?`,
  EphemeralVolumeSource: '1 volumeClaimTemplate *PersistentVolumeClaimTemplate?',
  KeyToPath: '1 key string; 2 path string; 3 mode *int32?',
  DownwardAPIVolumeFile: `1 path string; 2 fieldRef *ObjectFieldSelector?; 3 resourceFieldRef *ResourceFieldSelector?;
    4 mode *int32?`,
  VolumeProjection: `1 secret *SecretProjection?; 2 downwardAPI *DownwardAPIProjection?; 3 configMap *ConfigMapProjection?;
    4 serviceAccountToken *ServiceAccountTokenProjection?`,
  PersistentVolumeClaimTemplate: '1 metadata ObjectMeta?; 2 spec PersistentVolumeClaimSpec',
  SecretProjection: '1 ... LocalObjectReference; 2 items []KeyToPath?; 4 optional *bool?',
  DownwardAPIProjection: '1 items []DownwardAPIVolumeFile?',
  ConfigMapProjection: '1 ... LocalObjectReference; 2 items []KeyToPath?; 4 optional *bool?',
  ServiceAccountTokenProjection: '1 audience string?; 2 expirationSeconds *int64?; 3 path string',
  PersistentVolumeClaimSpec: `1 accessModes []string?; 4 selector *LabelSelector?; 2 resources ResourceRequirements?;
    3 volumeName string?; 5 storageClassName *string?; 6 volumeMode *string?;
    7 dataSource *TypedLocalObjectReference?; 8 dataSourceRef *TypedLocalObjectReference?`,
  TypedLocalObjectReference: '1 apiGroup *string; 2 kind string; 3 name string',
}
