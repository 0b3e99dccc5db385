// A client that heard of an endpoint change offline holds a version the pod overlay minted; when it
// lists or watches again, it starts from the real version the minted range sits on, so it misses
// nothing the cloud did meanwhile (the apiserver would not know the minted one, or worse, would know
// it as another revision). Only the endpoint resources' reads are touched.
const endpointResource = /\/(endpointslices|endpoints)(\?|$)/
const versionParam = /([?&]resourceVersion=)([0-9]{1,20})(?=&|$)/

export function resumedUrl(url: string, resumeVersion: (resource: string, rv: string) => string | undefined): string {
  if (!url.includes('resourceVersion=')) return url
  const query = url.indexOf('?')
  const resource = endpointResource.exec(url.slice(0, query === -1 ? url.length : query + 1))
  if (!resource) return url
  const match = versionParam.exec(url)
  if (!match) return url
  const base = resumeVersion(resource[1], match[2])
  return base === undefined ? url : url.slice(0, match.index) + match[1] + base + url.slice(match.index + match[0].length)
}
