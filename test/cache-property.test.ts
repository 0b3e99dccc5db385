// A property of the whole recording path (Recorder → CacheStore → DiskCache, real files): across
// random sequences of list pages (some lists abandoned half way), watch events (some of them
// replayed, older than what is held), relists, restarts and byte damage to the files, the offline
// answer to a list of the scope is always exactly the last complete state the apiserver told the
// hub, or a 503; and without damage it is never a 503 once the scope was listed whole.
import t from 'tap'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import { DiskCache } from '../lib/cache/disk.ts'
import { CacheStore } from '../lib/cache/store.ts'
import { Recorder } from '../lib/cache/recorder.ts'
import { classify } from '../lib/api/requestinfo.ts'
import { encodeContinue } from '../lib/api/continue-token.ts'
import { resourceDirName } from '../lib/cache/types.ts'
import { seededRandom } from './helpers/random.ts'
import { scopeOf } from '../lib/cache/scope.ts'
import { resourceKeyOf } from '../lib/cache/types.ts'

const log = pino({ level: process.env.OUTPOST_TEST_LOG ?? 'silent' })
const kubelet = 'kubelet/v1.24.0 (linux/amd64) kubernetes/4ce5a89'
const namespace = 'app'
const base = `/api/v1/namespaces/${namespace}/configmaps`

interface ConfigMap {
  name: string
  rv: number
  value: string
}

/** The apiserver: one namespace of ConfigMaps, one resourceVersion counter. */
class Cloud {
  rv = 100
  readonly objects = new Map<string, ConfigMap>()

  change(random: () => number): { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: ConfigMap } {
    const names = [...this.objects.keys()]
    const pick = random()
    this.rv++
    if (names.length > 0 && pick < 0.25) {
      const gone = this.objects.get(names[Math.floor(random() * names.length)])!
      this.objects.delete(gone.name)
      return { type: 'DELETED', object: { ...gone, rv: this.rv } }
    }
    if (names.length > 0 && pick < 0.65) {
      const name = names[Math.floor(random() * names.length)]
      const changed = { name, rv: this.rv, value: `v${this.rv}` }
      this.objects.set(name, changed)
      return { type: 'MODIFIED', object: changed }
    }
    const name = `cm-${String(Math.floor(random() * 40)).padStart(2, '0')}`
    const type = this.objects.has(name) ? 'MODIFIED' : 'ADDED'
    const made = { name, rv: this.rv, value: `v${this.rv}` }
    this.objects.set(name, made)
    return { type, object: made }
  }

  state(): Map<string, ConfigMap> {
    return new Map([...this.objects].map(([k, v]) => [k, { ...v }]))
  }
}

function document(o: ConfigMap, typed: boolean): Record<string, unknown> {
  const body = { metadata: { name: o.name, namespace, resourceVersion: String(o.rv) }, data: { value: o.value } }
  return typed ? { kind: 'ConfigMap', apiVersion: 'v1', ...body } : body
}

/** The pages of one list as the apiserver writes them: items without kind, continue tokens relative to the namespace. */
function pages(state: Map<string, ConfigMap>, rv: number, limit: number): { url: string; body: Buffer }[] {
  const items = [...state.values()].sort((a, b) => (a.name < b.name ? -1 : 1))
  const out: { url: string; body: Buffer }[] = []
  let token = ''
  for (let start = 0; start === 0 || start < items.length; start += limit) {
    const page = items.slice(start, start + limit)
    const more = start + limit < items.length
    const next = more ? encodeContinue({ rv, start: `${page[page.length - 1].name}\u0000` }) : ''
    const meta: Record<string, unknown> = { resourceVersion: String(rv) }
    if (next) meta.continue = next
    const url = token ? `${base}?limit=${limit}&continue=${token}` : `${base}?limit=${limit}`
    out.push({ url, body: Buffer.from(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: meta, items: page.map(o => document(o, false)) })) })
    token = next
    if (!more) break
  }
  return out
}

function eventFrame(type: string, o: ConfigMap): Buffer {
  return Buffer.from(JSON.stringify({ type, object: document(o, true) }) + '\n')
}

async function openHub(dir: string) {
  const disk = await DiskCache.open(dir, log)
  const store = new CacheStore(disk, log, { maxBodyBytes: 4_096 }) // small: bodies are read back from the files too
  await store.load()
  return { store, recorder: new Recorder(store, log) }
}

/** What an offline list of the scope answers: its objects, or 503. */
async function offlineAnswer(store: CacheStore): Promise<Map<string, string> | 503> {
  const info = classify('GET', base, kubelet)
  const selection = await store.list(resourceKeyOf(info), scopeOf(info))
  if (!selection?.complete || selection.lost.length > 0) return 503
  return new Map(selection.items.map(o => [o.name, `${o.resourceVersion}:${JSON.parse(o.body.toString()).data.value}`]))
}

function expected(state: Map<string, ConfigMap>): Map<string, string> {
  return new Map([...state.values()].map(o => [o.name, `${o.rv}:${o.value}`]))
}

/**
 * Damages the collection's files as a disk can: a flipped byte anywhere but in the newest journal's
 * last record (damage there is indistinguishable from a write a crash interrupted, which is cut as
 * a torn tail by design), or garbage after the last record (the torn tail of a write that was never
 * acknowledged). Returns what it did, and whether the collection now holds damage.
 */
async function damage(dir: string, random: () => number): Promise<{ what: string; damaged: boolean }> {
  const collection = path.join(dir, 'kubelet', resourceDirName({ group: '', version: 'v1', resource: 'configmaps' }))
  const files = (await readdir(collection).catch(() => [] as string[])).filter(f => /^(snapshot|journal)\.\d+$/.test(f))
  const generation = (f: string) => Number(f.slice(f.indexOf('.') + 1))
  const newestJournal = files.filter(f => f.startsWith('journal.')).sort((a, b) => generation(b) - generation(a))[0]
  if (newestJournal && random() < 0.3) {
    const file = path.join(collection, newestJournal)
    await writeFile(file, Buffer.concat([await readFile(file), Buffer.from([0, 0, 0, 200, 1, 2, 3])]))
    return { what: `a torn tail after ${newestJournal}`, damaged: false }
  }
  const candidates: { file: string; end: number }[] = []
  for (const f of files) {
    const bytes = await readFile(path.join(collection, f))
    const end = f === newestJournal ? lastRecordStart(bytes) : bytes.length
    if (end > 0) candidates.push({ file: f, end })
  }
  if (candidates.length === 0) return { what: 'nothing to damage', damaged: false }
  const { file, end } = candidates[Math.floor(random() * candidates.length)]
  const bytes = await readFile(path.join(collection, file))
  const at = Math.floor(random() * end)
  bytes[at] ^= 0x5a
  await writeFile(path.join(collection, file), bytes)
  return { what: `flipped byte ${at} of ${file}`, damaged: true }
}

/** Where the last whole record of a journal begins (records are [u32 length][u32 crc][payload]). */
function lastRecordStart(bytes: Buffer): number {
  let at = 0
  let last = 0
  while (at + 8 <= bytes.length) {
    const next = at + 8 + bytes.readUInt32BE(at)
    if (next > bytes.length) break
    last = at
    at = next
  }
  return last
}

const sequences = Number(process.env.PROPERTY_SEQUENCES ?? 12)
const steps = 60

t.test('the offline list is the last complete state, or 503', async t => {
  for (let sequence = 0; sequence < sequences; sequence++) {
    const seed = 0x5eed + sequence * 7919
    const random = seededRandom(seed)
    const dir = await mkdtemp(path.join(os.tmpdir(), 'outpost-property-'))
    const cloud = new Cloud()
    for (let i = 0; i < 6; i++) cloud.change(random)
    let hub = await openHub(dir)
    /** the state the hub was last told whole: a list's, moved on by the watch that followed it */
    let complete: Map<string, ConfigMap> | undefined
    /** events the watch delivered, to replay later (older than what the hub holds by then) */
    let delivered: { type: string; object: ConfigMap }[] = []
    let watching = false
    /** damage since the last whole list: the hub may refuse (503), never answer something else */
    let damaged = false
    const trail: string[] = []
    const follow = async (event: { type: string; object: ConfigMap }) => {
      await recordEvent(hub.recorder, event.type, event.object)
      if (event.type === 'DELETED') complete!.delete(event.object.name)
      else complete!.set(event.object.name, { ...event.object })
      delivered.push(event)
    }
    try {
      for (let step = 0; step < steps; step++) {
        const roll = random()
        if (roll < 0.15) {
          // a list, whole or abandoned after some pages; the cloud may change between pages (the pages are one snapshot)
          watching = false
          const snapshot = cloud.state()
          const rv = cloud.rv
          const all = pages(snapshot, rv, 1 + Math.floor(random() * 4))
          const upTo = random() < 0.3 ? Math.floor(random() * all.length) : all.length
          const meanwhile: { type: string; object: ConfigMap }[] = []
          for (const page of all.slice(0, upTo)) {
            await hub.recorder.recordListPage(classify('GET', page.url, kubelet), 'json', page.body)
            if (random() < 0.2) meanwhile.push(cloud.change(random))
          }
          trail.push(`list at ${rv} in ${all.length} page(s)${upTo < all.length ? `, abandoned after ${upTo}` : ''}`)
          if (upTo === all.length) {
            complete = snapshot
            damaged = false
            delivered = []
            watching = true
            // the watch from the list's version brings what changed while it was paged
            for (const event of meanwhile) await follow(event)
          }
        } else if (roll < 0.6) {
          const event = cloud.change(random)
          if (watching) await follow(event)
          trail.push(`${event.type} ${event.object.name}@${event.object.rv}${watching ? '' : ' (unwatched)'}`)
        } else if (roll < 0.7 && delivered.length > 0 && watching) {
          // a replayed, older event (a watch resumed from an older version): it changes nothing
          const old = delivered[Math.floor(random() * delivered.length)]
          await recordEvent(hub.recorder, old.type, old.object)
          trail.push(`replayed ${old.type} ${old.object.name}@${old.object.rv}`)
        } else if (roll < 0.85) {
          await hub.store.close()
          const hurt = random() < 0.4 ? await damage(dir, random) : { what: 'clean', damaged: false }
          damaged ||= hurt.damaged
          hub = await openHub(dir)
          watching = false // a restarted hub's watches are gone: its clients list again before they watch
          trail.push(`restart (${hurt.what})`)
        } else {
          trail.push('offline read')
        }
        const answer = await offlineAnswer(hub.store)
        const context = { seed, step, trail: trail.slice(-12) }
        if (!complete) {
          if (answer !== 503) t.fail('never listed whole: must be 503', context)
          continue
        }
        if (answer === 503) {
          if (!damaged) t.fail('listed whole and nothing damaged since: must not be 503', context)
          continue
        }
        const same = JSON.stringify([...answer].sort()) === JSON.stringify([...expected(complete)].sort())
        if (!same) t.same([...answer].sort(), [...expected(complete)].sort(), 'the offline answer is the last complete state', context)
      }
      t.pass(`seed ${seed}: ${steps} steps, every offline answer the last complete state or 503`)
    } finally {
      await hub.store.close()
      await rm(dir, { recursive: true, force: true })
    }
  }
})

async function recordEvent(recorder: Recorder, type: string, o: ConfigMap): Promise<void> {
  const watch = classify('GET', `${base}?watch=true&resourceVersion=1`, kubelet)
  await recorder.recordEvent(watch, 'json', eventFrame(type, o), scopeOf(watch))
}
