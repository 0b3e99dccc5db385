// A JSON watch stream read in the background as it arrives: its events, whether it is still open,
// and how it ended (cleanly, or cut with an error).
import { pipeline } from 'node:stream'
import type { Readable } from 'node:stream'
import { WatchFrameSplitter } from '../../lib/api/frames.ts'

export interface WatchReader {
  /** the events received so far */
  events: any[]
  bookmarks(): number
  isOpen(): boolean
  /** settles when the stream ends: `onEnd()`'s value, and the error if it was cut */
  ended: Promise<{ error?: unknown }>
}

export function readWatch(body: Readable): WatchReader {
  const events: any[] = []
  let open = true
  const ended = (async () => {
    try {
      for await (const frame of pipeline(body, new WatchFrameSplitter('json'), () => {})) events.push(JSON.parse((frame as Buffer).toString()))
      return {}
    } catch (error) {
      return { error }
    } finally {
      open = false
    }
  })()
  return { events, bookmarks: () => events.filter(e => e.type === 'BOOKMARK').length, isOpen: () => open, ended }
}
