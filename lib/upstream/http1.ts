// undici, loaded on first use. Its module compiles llhttp's WebAssembly as it loads, which cost an
// idle hub 11 MiB of its own memory and 9 MiB more of node's pages; a hub whose apiserver speaks
// HTTP/2 (h2-link.ts) needs it only for upgrades and for a server that answers HTTP/1.1.
import type * as Undici from 'undici'

let loaded: Promise<typeof Undici> | undefined

export function undici(): Promise<typeof Undici> {
  loaded ??= import('undici')
  return loaded
}
