// One string per recurring value. Every watch event and list item carries strings that repeat
// across the cluster's objects: kind, apiVersion, the event type, namespaces, label keys and values,
// node names and zones. Decoded afresh, each object keeps its own copies (a heap snapshot of a hub
// holding 10,000 slices had 10,000 of "discovery.k8s.io/v1", "EndpointSlice" and
// "endpointslice-controller.k8s.io"), and each event's copies are promoted to the old generation,
// which V8 then marks and sweeps. Found by a hash of their bytes, recurring values are not decoded
// again; the table is bounded, and starts over when full.

const table = new Map<number, string>()
const maxEntries = 10_000
/** longer values are seldom repeated (annotations' JSON), and would cost their bytes in the table */
const maxLength = 128

/** The table's string for a value read elsewhere (from JSON.parse), kept when it is new. */
export function interned(value: string): string {
  const length = value.length
  if (length === 0 || length > maxLength) return value
  let hash = 0x811c9dc5
  for (let i = 0; i < length; i++) hash = Math.imul(hash ^ value.charCodeAt(i), 0x01000193)
  const known = table.get(hash)
  if (known === value) return known
  if (known === undefined) remember(hash, value)
  return value
}

/**
 * buf[start..end) as a string, the table's when the bytes are a value it holds. Undefined when the
 * bytes are not plain ASCII, or longer than the table keeps: the caller decodes them (as UTF-8, or
 * unescaping them) as it would any other string.
 */
export function internedAscii(buf: Buffer, start: number, end: number): string | undefined {
  if (end - start > maxLength) return undefined
  let hash = 0x811c9dc5
  for (let i = start; i < end; i++) {
    const c = buf[i]
    if (c > 0x7f || c === 0x5c) return undefined // UTF-8, or a JSON escape
    hash = Math.imul(hash ^ c, 0x01000193)
  }
  const known = table.get(hash)
  if (known !== undefined && known.length === end - start) {
    let i = 0
    while (i < known.length && known.charCodeAt(i) === buf[start + i]) i++
    if (i === known.length) return known
  }
  const value = buf.toString('latin1', start, end)
  if (known === undefined && value.length > 0) remember(hash, value)
  return value
}

function remember(hash: number, value: string): void {
  if (table.size >= maxEntries) table.clear()
  table.set(hash, value)
}
