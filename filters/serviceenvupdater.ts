// serviceenvupdater (kubelet's Pods): the env vars KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT
// a pod sets explicitly get the hub's host and port, so that such pods (CNI agents, operators that
// pin the apiserver's address) reach the apiserver through the hub. masterservice covers the
// variables kubelet injects itself; this covers those written in the pod spec.
//
// Semantics as YurtHub's pkg/yurthub/filter/serviceenvupdater: every env var of one of those names
// gets the value, whatever value it had (YurtHub does not look at the old value; neither does this).
// A var set with valueFrom gets the value too, valueFrom left in place, as YurtHub does: kubelet
// uses a non-empty value before valueFrom. Where this differs, deliberately:
//   - initContainers and ephemeralContainers too, not only containers: they reach the apiserver the
//     same way (CNI installers run as init containers);
//   - every occurrence of a name, where YurtHub stops after it has seen both names once: with a
//     name repeated, kubelet uses the last occurrence, which YurtHub could leave unchanged;
//   - the input is never mutated (YurtHub rewrote the cached pod in place, #2481).
//
// Protobuf field numbers (k8s.io/api core/v1 generated.proto, v1.24):
//   Pod: 2 spec; PodSpec: 20 initContainers, 2 containers (Container), 34 ephemeralContainers
//   EphemeralContainer: 1 ephemeralContainerCommon (Container's fields and numbers), 2 targetContainerName
//   Container: 7 repeated env; EnvVar: 1 name, 2 value, 3 valueFrom
import { type FilterContext, type Json, type ObjectFilter, hasKind, isKindOf, isObject, usableHub } from './object-filter.ts'
import { Patches, type Span, applyPatches, inner, lastString, single, spansOf, stringField } from './protobuf-edit.ts'

export const serviceHostEnv = 'KUBERNETES_SERVICE_HOST'
export const servicePortEnv = 'KUBERNETES_SERVICE_PORT'

const name = 'serviceenvupdater'
const kinds = [{ apiVersion: 'v1', kind: 'Pod' }]

/** The value an env var of this name gets, or undefined when the filter leaves it. */
export function serviceEnvValue(envName: string, hub: { host: string; port: number }): string | undefined {
  if (envName === serviceHostEnv) return hub.host
  if (envName === servicePortEnv) return String(hub.port)
  return undefined
}

// --- JSON -----------------------------------------------------------------------------------------

/** A copy of the array with f applied to each element, or the array itself when f changed none. */
function mapChanged(list: unknown[], f: (v: unknown) => unknown): unknown[] {
  let out: unknown[] | undefined
  list.forEach((v, i) => {
    const w = f(v)
    if (w === v) return
    out ??= [...list]
    out[i] = w
  })
  return out ?? list
}

function containerJson(container: unknown, hub: FilterContext['hub']): unknown {
  if (!isObject(container) || !Array.isArray(container.env)) return container
  const env = mapChanged(container.env, e => {
    if (!isObject(e) || typeof e.name !== 'string') return e
    const value = serviceEnvValue(e.name, hub)
    return value === undefined || e.value === value ? e : { ...e, value }
  })
  return env === container.env ? container : { ...container, env }
}

const containerLists = ['initContainers', 'containers', 'ephemeralContainers'] as const

function json(object: unknown, kind: string, context: FilterContext): unknown {
  if (!isObject(object) || !isKindOf(object, kind, kinds) || !isObject(object.spec)) return object
  if (!usableHub(name, context)) return object
  const spec = object.spec
  let out: Json | undefined
  for (const list of containerLists) {
    const containers = spec[list]
    if (!Array.isArray(containers)) continue
    const mapped = mapChanged(containers, c => containerJson(c, context.hub))
    if (mapped === containers) continue
    out ??= { ...spec }
    out[list] = mapped
  }
  return out ? { ...object, spec: out } : object
}

// --- protobuf -------------------------------------------------------------------------------------

/** The patches of one Container message (its env), or undefined when it has no env var to rewrite. */
function containerPatches(raw: Buffer, container: Span, hub: FilterContext['hub']): Patches | undefined {
  const patches = new Patches(inner(raw, container))
  patches.spans.forEach((s, i) => {
    if (s.field !== 7) return
    const envVar = new Patches(inner(raw, s))
    const value = serviceEnvValue(lastString(raw, envVar.spans, 1), hub)
    if (value === undefined) return
    envVar.set(raw, 2, stringField(2, value))
    patches.nest(raw, i, envVar)
  })
  return patches.changed ? patches : undefined
}

function protobuf(raw: Buffer, kind: string, context: FilterContext): Buffer {
  if (!hasKind(kind, kinds) || !usableHub(name, context)) return raw
  const top = new Patches(spansOf(raw))
  const spec = single(top.spans, 2)
  if (spec === undefined) return raw
  const specPatches = new Patches(inner(raw, spec))
  specPatches.spans.forEach((s, i) => {
    if (s.field === 2 || s.field === 20) {
      const patches = containerPatches(raw, s, context.hub)
      if (patches) specPatches.nest(raw, i, patches)
    } else if (s.field === 34) {
      const ephemeral = new Patches(inner(raw, s))
      const common = single(ephemeral.spans, 1)
      const patches = common && containerPatches(raw, common, context.hub)
      if (!patches) return
      ephemeral.nest(raw, ephemeral.spans.indexOf(common), patches)
      specPatches.nest(raw, i, ephemeral)
    }
  })
  top.nest(raw, top.spans.indexOf(spec), specPatches)
  return applyPatches(raw, top)
}

export const serviceEnvUpdaterFilter: ObjectFilter = { name, kinds, json, protobuf, drops: false }
