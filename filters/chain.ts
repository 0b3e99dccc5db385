// The filters that apply to one request, run in order over what the response carries: a list body
// (items changed or dropped), one object, one watch frame, in JSON or protobuf. Each filter is a
// pure step over one object; this is the plumbing around them: decode once, run the steps, encode
// only when something changed (the apiserver's own bytes otherwise), and never let a step's
// failure take the response down (the object passes as it is, and the failure is reported).
import { assembleList, decodeUnknown, decodeWatchEvent, encodeUnknown, encodeWatchEvent, isProtobuf, splitList } from '../lib/codec/protobuf.ts'
import { eachMember, elementRanges, isObjectAt, memberRanges, objectMembers, skipValue, spliceArray, stringAt } from '../lib/codec/json-scan.ts'
import type { Range } from '../lib/codec/json-scan.ts'
import type { WireFormat } from '../lib/api/wire-format.ts'

/** One filter, bound to its context for this request. */
export interface Step {
  name: string
  /** the kinds it reads; objects of other kinds are not shown to it */
  kinds: ReadonlySet<string>
  /** same reference when unchanged, null when dropped; never mutates */
  json(object: unknown, kind: string, apiVersion: string): unknown | null
  /**
   * Optional: the same over the object's JSON bytes, without a parse: the same Buffer when
   * unchanged, null when dropped, undefined when bytes are not enough (the chain parses the object
   * and calls json). Throws on malformed JSON.
   */
  jsonBytes?(raw: Buffer, kind: string, apiVersion: string): Buffer | null | undefined
  /** same Buffer when unchanged, null when dropped; throws ProtobufError on malformed bytes */
  protobuf(raw: Buffer, kind: string, apiVersion: string): Buffer | null
  /** whether it ever drops an object (returns null) */
  drops: boolean
}

/** What each step did, for /debug/filters and the metrics; `what` names the object, when asked (most reports are never read). */
export interface StepReport {
  ran(step: string): void
  changed(step: string, what: () => string): void
  dropped(step: string, what: () => string): void
  failed(step: string, what: () => string, error: unknown): void
}

/** A response's filters: bodies, frames and single objects in either format. */
export interface ResponseFilter {
  readonly names: readonly string[]
  /** a list (items filtered, dropped ones left out) or one object (null when dropped) */
  body(format: WireFormat, body: Buffer): Buffer | null
  /** one watch event (null when its object is dropped: nothing to send) */
  frame(format: WireFormat, frame: Buffer): Buffer | null
  /** one object as the cache stores it (JSON text, or the raw protobuf message) */
  object(format: WireFormat, apiVersion: string, kind: string, body: Buffer): Buffer | null
  /** whether an object of this kind may be dropped (else it is only ever changed, or passed as it is) */
  mayDrop(kind: string): boolean
  /** what the filters read, as an identity that changes when it does; undefined: an answer filtered now may not be kept */
  readonly generation?: object
  /** Runs `make`, reporting as it goes; replay() reports the same again (an answer kept and sent once more); failed: not to be kept. */
  recording?<T>(make: () => T): Recorded<T>
}

export interface Recorded<T> {
  value: T
  failed: boolean
  replay(): void
}

/** Per step: how many objects it ran on, changed and dropped, and the last of each, to be told again. */
type Tallied = Map<string, { ran: number; changed: number; dropped: number; lastChanged?: () => string; lastDropped?: () => string }>

const listSuffix = /List$/
const eventMembers = ['type', 'object']
const typeMembers = ['kind', 'apiVersion']
const listMembers = ['kind', 'apiVersion', 'items']
const metadataMember = ['metadata']

function label(object: { metadata?: { namespace?: unknown; name?: unknown } } | undefined, kind: string): () => string {
  const m = object?.metadata
  return () => `${kind} ${typeof m?.namespace === 'string' && m.namespace ? `${m.namespace}/` : ''}${typeof m?.name === 'string' ? m.name : '?'}`
}

/** label() of an object's JSON bytes, read only when the report is. */
function labelOfBytes(raw: Buffer, kind: string): () => string {
  return () => {
    try {
      const meta = memberRanges(raw, metadataMember).get('metadata')
      return label(isObjectAt(raw, meta) ? { metadata: JSON.parse(raw.toString('utf8', meta.start, meta.end)) } : undefined, kind)()
    } catch {
      return `${kind} ?`
    }
  }
}

/** What the steps made of one stored object, and what they reported doing, told again on each reuse. */
export interface FilteredObject {
  out: Buffer | null
  reports: ((report: StepReport) => void)[]
}

/**
 * Filtered objects by their stored body, for one set of steps while nothing they read changes
 * (the registry drops it when something does): every client of the same filters shares one
 * filtered copy of an object, however many lists and watches it is sent in.
 */
export type FilteredObjects = WeakMap<Buffer, FilteredObject>

export class FilterChain implements ResponseFilter {
  readonly names: readonly string[]

  constructor(
    private readonly steps: Step[],
    private report: StepReport,
    /** the filtered objects shared while nothing the steps read changes: asked each time, as that may change under a long watch */
    private readonly shared?: () => FilteredObjects,
  ) {
    this.names = steps.map(s => s.name)
  }

  mayDrop(kind: string): boolean {
    return this.steps.some(step => step.drops && step.kinds.has(kind))
  }

  get generation(): object | undefined {
    return this.shared?.()
  }

  recording<T>(make: () => T): Recorded<T> {
    const tallied: Tallied = new Map()
    const tally = (step: string) => {
      let t = tallied.get(step)
      if (!t) tallied.set(step, (t = { ran: 0, changed: 0, dropped: 0 }))
      return t
    }
    const real = this.report
    let failed = false
    this.report = {
      ran: step => real.ran((tally(step).ran++, step)),
      changed: (step, what) => {
        const t = tally(step)
        t.changed++
        t.lastChanged = what
        real.changed(step, what)
      },
      dropped: (step, what) => {
        const t = tally(step)
        t.dropped++
        t.lastDropped = what
        real.dropped(step, what)
      },
      failed: (step, what, error) => {
        failed = true
        real.failed(step, what, error)
      },
    }
    let value: T
    try {
      value = make()
    } finally {
      this.report = real
    }
    const replay = () => {
      for (const [step, t] of tallied) {
        for (let i = 0; i < t.ran; i++) this.report.ran(step)
        for (let i = 0; i < t.changed; i++) this.report.changed(step, t.lastChanged!)
        for (let i = 0; i < t.dropped; i++) this.report.dropped(step, t.lastDropped!)
      }
    }
    return { value, failed, replay }
  }

  /** A decoded JSON object through the steps (from step `from` on, which has been told it ran) that read its kind. */
  private runJson(object: unknown, kind: string, apiVersion: string, from = 0, fromReported = false): unknown | null {
    let current = object
    for (let i = from; i < this.steps.length; i++) {
      const step = this.steps[i]
      if (!step.kinds.has(kind)) continue
      if (!(i === from && fromReported)) this.report.ran(step.name)
      let next: unknown
      try {
        next = step.json(current, kind, apiVersion)
      } catch (error) {
        this.report.failed(step.name, label(current as never, kind), error)
        continue
      }
      if (next === null) {
        this.report.dropped(step.name, label(current as never, kind))
        return null
      }
      if (next !== current) this.report.changed(step.name, label(next as never, kind))
      current = next
    }
    return current
  }

  /**
   * An object's JSON bytes through the steps that read its kind: those that can read bytes do, and
   * the object is parsed only for the first step that cannot (then serialized once, if changed).
   * `kind` names the kind of list items, which carry none.
   */
  private runJsonBytes(raw: Buffer, kind: string, apiVersion: string): Buffer | null {
    let current = raw
    for (let i = 0; i < this.steps.length; i++) {
      const step = this.steps[i]
      if (!step.kinds.has(kind)) continue
      this.report.ran(step.name)
      let next: Buffer | null | undefined
      try {
        next = step.jsonBytes?.(current, kind, apiVersion)
      } catch (error) {
        this.report.failed(step.name, labelOfBytes(current, kind), error)
        continue
      }
      if (next === null) {
        this.report.dropped(step.name, labelOfBytes(current, kind))
        return null
      }
      if (next === undefined) {
        let object: unknown
        try {
          object = JSON.parse(current.toString())
        } catch {
          return current // not ours to judge: the client gets it as it is
        }
        const out = this.runJson(object, kind, apiVersion, i, true)
        return out === null ? null : out === object ? current : Buffer.from(JSON.stringify(out))
      }
      if (next !== current) this.report.changed(step.name, labelOfBytes(next, kind))
      current = next
    }
    return current
  }

  private runProtobuf(raw: Buffer, kind: string, apiVersion: string): Buffer | null {
    let current = raw
    for (const step of this.steps) {
      if (!step.kinds.has(kind)) continue
      this.report.ran(step.name)
      let next: Buffer | null
      try {
        next = step.protobuf(current, kind, apiVersion)
      } catch (error) {
        this.report.failed(step.name, () => kind, error)
        continue
      }
      if (next === null) {
        this.report.dropped(step.name, () => kind)
        return null
      }
      if (next !== current) this.report.changed(step.name, () => kind)
      current = next
    }
    return current
  }

  object(format: WireFormat, apiVersion: string, kind: string, body: Buffer): Buffer | null {
    const run = () => (format === 'protobuf' ? this.runProtobuf(body, kind, apiVersion) : this.runJsonBytes(body, kind, apiVersion))
    const shared = this.shared?.()
    if (!shared) return run()
    const known = shared.get(body)
    if (known) {
      for (const tell of known.reports) tell(this.report)
      return known.out
    }
    const reports: FilteredObject['reports'] = []
    let failed = false
    const real = this.report
    this.report = {
      ran: name => reports.push(report => report.ran(name)),
      changed: (name, what) => reports.push(report => report.changed(name, what)),
      dropped: (name, what) => reports.push(report => report.dropped(name, what)),
      failed: (name, what, error) => {
        failed = true
        real.failed(name, what, error)
      },
    }
    let out: Buffer | null
    try {
      out = run()
    } finally {
      this.report = real
    }
    // a failure is told each time it happens, and not kept: the object passed as it is
    for (const tell of reports) tell(real)
    if (!failed) shared.set(body, { out, reports })
    return out
  }

  body(format: WireFormat, body: Buffer): Buffer | null {
    return format === 'protobuf' ? this.protobufBody(body) : this.jsonBody(body)
  }

  private protobufBody(body: Buffer): Buffer | null {
    if (!isProtobuf(body)) return body
    let unknown
    try {
      unknown = decodeUnknown(body)
    } catch {
      return body
    }
    if (!listSuffix.test(unknown.kind)) {
      const out = this.runProtobuf(unknown.raw, unknown.kind, unknown.apiVersion)
      return out === null ? null : out === unknown.raw ? body : encodeUnknown({ apiVersion: unknown.apiVersion, kind: unknown.kind, raw: out })
    }
    const kind = unknown.kind.replace(listSuffix, '')
    if (!this.steps.some(s => s.kinds.has(kind))) return body
    let parts
    try {
      parts = splitList(unknown.raw)
    } catch {
      return body
    }
    let changed = false
    const items: Buffer[] = []
    for (const item of parts.items) {
      const out = this.runProtobuf(item, kind, unknown.apiVersion)
      if (out !== item) changed = true
      if (out !== null) items.push(out)
    }
    if (!changed) return body
    const remainingItemCount = parts.remainingItemCount
    return encodeUnknown({ apiVersion: unknown.apiVersion, kind: unknown.kind, raw: assembleList({ ...parts, remainingItemCount, items }) })
  }

  private jsonBody(body: Buffer): Buffer | null {
    let members
    try {
      members = memberRanges(body, listMembers)
    } catch {
      return body
    }
    const text = (name: string) => {
      const r = members.get(name)
      let v: unknown
      try {
        v = r ? JSON.parse(body.toString('utf8', r.start, r.end)) : undefined
      } catch {
        v = undefined
      }
      return typeof v === 'string' ? v : ''
    }
    const kind = text('kind')
    const apiVersion = text('apiVersion')
    const itemsRange = members.get('items')
    if (!itemsRange || !listSuffix.test(kind)) return this.object('json', apiVersion, kind, body)
    const itemKind = kind.replace(listSuffix, '')
    if (!this.steps.some(s => s.kinds.has(itemKind))) return body
    try {
      return this.jsonItems(body, itemsRange, itemKind, apiVersion)
    } catch {
      return body // a list whose items cannot be told apart is not ours to judge: the client gets it as it is
    }
  }

  private jsonItems(body: Buffer, itemsRange: { start: number; end: number }, itemKind: string, apiVersion: string): Buffer | null {
    // Items are spliced: only those a step changed are serialized again.
    const items: Buffer[] = []
    let changed = false
    for (const range of elementRanges(body, itemsRange)) {
      const raw = body.subarray(range.start, range.end)
      const out = this.runJsonBytes(raw, itemKind, apiVersion)
      if (out !== raw) changed = true
      if (out !== null) items.push(out)
    }
    return changed ? spliceArray(body, itemsRange, items) : body
  }

  frame(format: WireFormat, frame: Buffer): Buffer | null {
    if (format === 'protobuf') {
      let event
      try {
        event = decodeWatchEvent(frame)
        if (event.type === 'BOOKMARK' || event.type === 'ERROR' || !isProtobuf(event.object)) return frame
        const unknown = decodeUnknown(event.object)
        const out = this.runProtobuf(unknown.raw, unknown.kind, unknown.apiVersion)
        if (out === null) return null
        return out === unknown.raw ? frame : encodeWatchEvent(event.type, encodeUnknown({ apiVersion: unknown.apiVersion, kind: unknown.kind, raw: out }))
      } catch {
        return frame
      }
    }
    // The event's object is spliced: the envelope's bytes are the apiserver's, and the object is
    // serialized again only when a step that cannot read bytes changed it.
    // One scan finds the type, the object, and the object's kind and apiVersion.
    let type: Range | undefined
    let object: Range | undefined
    let own: Map<string, Range> | undefined
    try {
      eachMember(frame, eventMembers, (which, start) => {
        if (which === 1 && frame[start] === 0x7b) {
          const found = objectMembers(frame, typeMembers, start)
          own = found.members
          object = { start, end: found.end }
          return found.end
        }
        const end = skipValue(frame, start)
        if (which === 0) type = { start, end }
        else object = undefined
        return end
      })
      const eventType = stringAt(frame, type)
      if (eventType === 'BOOKMARK' || eventType === 'ERROR' || !object) return frame
    } catch {
      return frame
    }
    const raw = frame.subarray(object.start, object.end)
    const out = this.runJsonBytes(raw, stringAt(frame, own?.get('kind')) ?? '', stringAt(frame, own?.get('apiVersion')) ?? '')
    if (out === null) return null
    return out === raw ? frame : Buffer.concat([frame.subarray(0, object.start), out, frame.subarray(object.end)])
  }
}
