// Checks shared by the object filters' tests (masterservice, serviceenvupdater, forwardkubesvctraffic,
// discardcloudservice, nodeportisolation, inclusterconfig): one case runs the JSON filter on a frozen
// object and the protobuf filter on the apiserver's bytes for it (typed.ts), and checks they agree;
// the fuzzers feed malformed shapes and bytes.
import type { Test } from 'tap'
import type { FilterContext, ObjectFilter } from '../../filters/object-filter.ts'
import { ProtobufError } from '../../lib/codec/wire.ts'
import { spansOf } from '../../filters/protobuf-edit.ts'
import { decodeObject, encodeObject } from '../../lib/codec/typed.ts'
import { decodeUnknown, splitList } from '../../lib/codec/protobuf.ts'

export type Json = any // eslint-disable-line @typescript-eslint/no-explicit-any

export function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v)
    for (const child of Object.values(v)) deepFreeze(child)
  }
  return v
}

export const clone = <T>(v: T): T => structuredClone(v)

export function context(over: Partial<FilterContext> = {}): FilterContext & { warnings: string[] } {
  const warnings: string[] = []
  return { hub: { host: '169.254.2.1', port: 10268 }, nodePool: 'shanghai', warn: (f, reason) => warnings.push(`${f}: ${reason}`), ...over, warnings }
}

/** Paths (a.b.0.c) where two JSON values differ. */
export function diffPaths(a: unknown, b: unknown, path = ''): string[] {
  if (Object.is(a, b)) return []
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return [path]
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  const out: string[] = []
  for (const k of keys) out.push(...diffPaths((a as Json)[k], (b as Json)[k], path === '' ? k : `${path}.${k}`))
  return out
}

export type Expect = 'same' | 'dropped' | ((input: Json) => Json)

/**
 * One case in both formats. expect: 'same' (the input itself), 'dropped' (null), or a function of
 * the input giving the expected JSON result; `changed` lists the paths the change may touch (the
 * protobuf result, decoded, differs from the decoded input exactly there).
 */
export function checkCase(
  t: Test,
  filter: ObjectFilter,
  apiVersion: string,
  object: Json,
  expect: Expect,
  ctx: FilterContext = context(),
  changed?: string[],
): void {
  const kind = object.kind as string
  const frozen = deepFreeze(clone(object))
  // JSON, as a list item (no kind) and as a single object
  const item = deepFreeze(Object.fromEntries(Object.entries(frozen).filter(([k]) => k !== 'kind' && k !== 'apiVersion')))
  const want = typeof expect === 'function' ? expect(clone(object)) : undefined
  for (const [label, input] of [
    ['object', frozen],
    ['list item', item],
  ] as const) {
    const out = filter.json(input, kind, ctx)
    if (expect === 'same') t.equal(out, input, `json ${label}: the same reference`)
    else if (expect === 'dropped') t.equal(out, null, `json ${label}: dropped`)
    else {
      t.not(out, input, `json ${label}: a new object`)
      const expected = label === 'object' ? want : Object.fromEntries(Object.entries(want).filter(([k]) => k !== 'kind' && k !== 'apiVersion'))
      t.same(out, expected, `json ${label}: as expected`)
      t.equal(filter.json(out, kind, ctx), out, `json ${label}: a filtered object passes as it is`)
    }
  }
  // protobuf, from the apiserver's bytes for the object
  const raw = encodeObject(object, apiVersion, kind)
  const before = Buffer.from(raw)
  const out = filter.protobuf(raw, kind, ctx)
  t.ok(raw.equals(before), 'protobuf input not mutated')
  if (expect === 'same') t.equal(out, raw, 'protobuf: the same Buffer')
  else if (expect === 'dropped') t.equal(out, null, 'protobuf: dropped')
  else {
    t.ok(Buffer.isBuffer(out) && out !== raw, 'protobuf: a new Buffer')
    t.ok(out!.equals(encodeObject(want, apiVersion, kind)), 'protobuf: the bytes the apiserver would write for the JSON result')
    t.same(decodeObject(out!, apiVersion, kind), decodeObject(encodeObject(want, apiVersion, kind), apiVersion, kind), 'protobuf decoded = JSON result')
    if (changed) {
      const diff = diffPaths(decodeObject(raw, apiVersion, kind), decodeObject(out!, apiVersion, kind))
      t.same(
        diff.filter(p => !changed.some(c => p === c || p.startsWith(`${c}.`))),
        [],
        `only ${changed.join(', ')} changed`,
      )
    }
    t.equal(filter.protobuf(out!, kind, ctx), out, 'protobuf: a filtered object passes as it is')
  }
}

/** The fields of a protobuf message: number, whole bytes (tag included), payload. */
export function fieldBytes(buf: Buffer): { field: number; bytes: Buffer; payload: Buffer }[] {
  return spansOf(buf).map(s => ({ field: s.field, bytes: buf.subarray(s.tagStart, s.next), payload: buf.subarray(s.start, s.end) }))
}

// --- fuzzing ------------------------------------------------------------------------------------

const odd: unknown[] = [
  null,
  undefined,
  0,
  -1,
  1.5,
  NaN,
  '',
  'x',
  'true',
  true,
  [],
  [null],
  [[]],
  {},
  { '': null },
  { __proto__: null },
  Object.create(null),
  [{ name: 'https' }, 3],
  'x'.repeat(100_000),
  deep(2000),
]

function deep(n: number): unknown {
  let v: unknown = {}
  for (let i = 0; i < n; i++) v = i % 2 ? { spec: v, metadata: v } : [v]
  return v
}

/** Every path of a JSON value (objects and arrays), '' for the root. */
function paths(v: unknown, path: string[] = []): string[][] {
  const out = [path]
  if (typeof v === 'object' && v !== null) for (const [k, c] of Object.entries(v)) out.push(...paths(c, [...path, k]))
  return out
}

function replaceAt(v: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value
  const copy: Json = Array.isArray(v) ? [...v] : { ...(v as Json) }
  copy[path[0]] = replaceAt((v as Json)[path[0]], path.slice(1), value)
  return copy
}

const isPlainObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const nonEmptyString = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)
/** Whether JSON.parse can give the value. */
const inJson = (v: unknown): boolean => v !== undefined && !Number.isNaN(v)
/** A value in a failure message (String() throws on an object without a prototype). */
function shown(v: unknown): string {
  try {
    return String(v).slice(0, 20)
  } catch {
    return Object.prototype.toString.call(v)
  }
}

/**
 * Whether the filter may touch a decoded object, as its contract says: of one of its kinds (the
 * object's own kind and apiVersion where it carries them, else the kind the caller names), and
 * the one object it is about, when it names one.
 */
function targets(filter: ObjectFilter, input: unknown, kind: string): boolean {
  if (!isPlainObject(input)) return false
  const ownKind = nonEmptyString(input.kind) ?? kind
  const ownApiVersion = nonEmptyString(input.apiVersion)
  if (!filter.kinds.some(k => k.kind === ownKind && (ownApiVersion === undefined || k.apiVersion === ownApiVersion))) return false
  if (!filter.only) return true
  const meta = isPlainObject(input.metadata) ? input.metadata : {}
  return meta.namespace === filter.only.namespace && meta.name === filter.only.name
}

/**
 * The JSON filter on the object with each of its paths replaced by each odd value, as an item of
 * every kind the test names. Never a throw, never a mutation (the input is frozen); always the
 * input, null or an object. What the filter does not target (another kind, another object) is the
 * input itself; what it changed from a shape JSON can hold, it leaves as it is when filtered
 * again. Returns how many shapes were tried.
 */
export function fuzzJson(t: Test, filter: ObjectFilter, objects: Json[], ctxs: FilterContext[]): number {
  let tried = 0
  let changed = 0
  const problems: string[] = []
  for (const object of objects) {
    for (const path of paths(object)) {
      for (const value of odd) {
        const input = deepFreeze(replaceAt(object, path, value))
        for (const kind of [object.kind, 'Service', 'Pod', '', 'List']) {
          for (const ctx of ctxs) {
            tried++
            const what = `${path.join('.')}=${shown(value)} (${kind})`
            try {
              const out = filter.json(input, kind, ctx)
              if (!(Object.is(out, input) || out === null || isPlainObject(out))) problems.push(`${what}: returned ${shown(out)}`)
              else if (!Object.is(out, input) && !targets(filter, input, kind))
                problems.push(`${what}: not the filter's, yet ${out === null ? 'dropped' : 'changed'}`)
              else if (isPlainObject(out) && out !== input) {
                changed++
                // (JSON.parse gives no undefined or NaN: a filter may take an array holding one as changed)
                if (inJson(value) && filter.json(deepFreeze(out), kind, ctx) !== out) problems.push(`${what}: its result changed again when filtered again`)
              }
            } catch (error) {
              problems.push(`${what}: threw ${(error as Error).message}`)
            }
          }
        }
      }
    }
  }
  for (const value of odd)
    for (const ctx of ctxs) t.ok(Object.is(filter.json(value, 'Service', ctx), value), `${shown(value)} as the whole object: passed as it is`)
  t.same(
    problems.slice(0, 5),
    [],
    `${tried} malformed JSON shapes (${changed} changed): no throw, no mutation, only its own objects touched, a result filtered again is the same`,
  )
  return tried
}

function xorshift(seed: number): () => number {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x
  }
}

/**
 * What the JSON filter makes of the object the bytes decode to, when they are the bytes the
 * apiserver writes for it (a damaged byte inside a string or a number can leave them so): the
 * protobuf filter must agree. Returns why not, or undefined when it agrees or the bytes are not
 * the apiserver's (a field it always writes missing, an order it never writes).
 */
function disagreement(filter: ObjectFilter, apiVersion: string, kind: string, input: Buffer, out: Buffer | null, ctx: FilterContext): string | undefined {
  let decoded: Json
  try {
    decoded = decodeObject(input, apiVersion, kind)
    if (!encodeObject(decoded, apiVersion, kind).equals(input)) return undefined
  } catch {
    return undefined
  }
  const json = filter.json(deepFreeze(decoded), kind, ctx)
  if (json === null || out === null)
    return json === out ? '' : `json ${json === null ? 'dropped it' : 'kept it'}, protobuf ${out === null ? 'dropped it' : 'kept it'}`
  if (out === input) return json === decoded ? '' : 'json changed it, protobuf did not'
  if (json === decoded) return 'protobuf changed it, json did not'
  let filtered: Json
  try {
    filtered = decodeObject(out, apiVersion, kind)
  } catch (error) {
    return `the protobuf result does not decode: ${(error as Error).message}`
  }
  const differ = diffPaths(filtered, json)
  return differ.length === 0 ? '' : `json and protobuf differ at ${differ.slice(0, 3).join(', ')}`
}

/**
 * The protobuf filter on every prefix of each buffer, on each buffer with one byte changed at every
 * offset, and on random bytes: a Buffer, null or a ProtobufError, the input never mutated. Named as
 * a kind the filter does not read, every input is the same Buffer, unread; a new Buffer it made is
 * the same Buffer when filtered again; where the damaged bytes are still ones the apiserver writes,
 * the result is the JSON filter's.
 */
export function fuzzProtobuf(t: Test, filter: ObjectFilter, kind: string, buffers: Buffer[], ctx: FilterContext): number {
  const otherKind = ['Namespace', 'Lease'].find(k => !filter.kinds.some(own => own.kind === k))!
  const apiVersion = filter.kinds.find(k => k.kind === kind)!.apiVersion
  let compared = 0
  const inputs: Buffer[] = []
  for (const b of buffers) {
    for (let n = 0; n < b.length; n++) inputs.push(b.subarray(0, n))
    for (let i = 0; i < b.length; i++) {
      for (const x of [0x01, 0x07, 0x80, 0xff]) {
        const m = Buffer.from(b)
        m[i] ^= x
        inputs.push(m)
      }
    }
  }
  const rand = xorshift(2481)
  for (let n = 0; n < 2000; n++) {
    const b = Buffer.allocUnsafe(rand() % 64)
    for (let i = 0; i < b.length; i++) b[i] = rand() & 0xff
    inputs.push(b)
  }
  const problems: string[] = []
  let thrown = 0
  let changed = 0
  /** filter.protobuf, or what it threw */
  const filtered = (input: Buffer, as: string): Buffer | null | Error => {
    try {
      return filter.protobuf(input, as, ctx)
    } catch (error) {
      return error as Error
    }
  }
  for (const input of inputs) {
    const before = Buffer.from(input)
    const hex = before.toString('hex').slice(0, 80)
    const out = filtered(input, kind)
    if (out instanceof ProtobufError) thrown++
    else if (out instanceof Error) problems.push(`${out.name}: ${out.message} on ${hex}`)
    else if (!(out === null || Buffer.isBuffer(out))) problems.push(`returned ${String(out)}`)
    else {
      const differs = disagreement(filter, apiVersion, kind, input, out, ctx)
      if (differs !== undefined) compared++
      if (differs) problems.push(`${differs}, on ${hex}`)
      if (out !== null && out !== input) {
        changed++
        const again = filtered(out, kind)
        if (again !== out)
          problems.push(
            `its result, filtered again: ${again instanceof Error ? `threw ${again.message}` : again === null ? 'dropped' : 'changed again'}, on ${hex}`,
          )
      }
    }
    const asOther = filtered(input, otherKind)
    if (asOther !== input) problems.push(`as a ${otherKind}: ${asOther instanceof Error ? `threw ${asOther.message}` : 'not the same Buffer'}, on ${hex}`)
    if (!input.equals(before)) problems.push(`input mutated, on ${hex}`)
  }
  t.same(
    problems.slice(0, 5),
    [],
    `${inputs.length} malformed protobuf inputs (${thrown} ProtobufError, ${changed} changed): nothing else thrown, no input mutated, a result filtered again is the same, another kind's bytes unread`,
  )
  // the agreement above is checked on these: make sure there are some
  t.ok(compared > 0, `${compared} of them still the apiserver's bytes for what they decode to, each filtered as the JSON filter filters that`)
  return inputs.length
}

/**
 * A recorded protobuf list through a filter of one object, item by item: no input is mutated, every
 * other item comes back as the same Buffer (and the same object from the JSON filter), and the
 * target's protobuf result decodes to the JSON filter's result. Returns the target's bytes before
 * and after, for the caller's byte-level checks.
 */
export function recordedListOfOne(
  t: Test,
  filter: ObjectFilter,
  list: Buffer,
  recorded: Json[],
  apiVersion: string,
  kind: string,
  target: string,
): { raw: Buffer; out: Buffer } {
  const items = splitList(decodeUnknown(list).raw).items
  t.equal(items.length, recorded.length)
  let found: { raw: Buffer; out: Buffer } | undefined
  items.forEach((raw, i) => {
    const before = Buffer.from(raw)
    const out = filter.protobuf(raw, kind, context())
    const input = deepFreeze(clone(recorded[i]))
    const json = filter.json(input, kind, context())
    t.ok(raw.equals(before), 'input not mutated')
    if (recorded[i].metadata.name !== target) {
      t.equal(out, raw, `${recorded[i].metadata.name}: the same Buffer`)
      t.equal(json, input, `${recorded[i].metadata.name}: the same object`)
      return
    }
    t.same(decodeObject(out!, apiVersion, kind), json, 'protobuf result = JSON result')
    found = { raw, out: out! }
  })
  if (!found) throw new Error(`${target} is not in the recorded list`)
  return found
}
