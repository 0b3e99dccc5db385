// A watcher's selection within a shared watch cache, as a table: what a watcher of a narrower
// selector is told of each event of the cache (kube-apiserver's cacheWatcher.convertToWatchEvent):
// in before and after → MODIFIED; only after → ADDED; only before → DELETED with what it last
// saw, at the event's version; neither → nothing. Field values come from what the cache keeps.
import t from 'tap'
import { eventInSelection, selects } from '../lib/watch/selection.ts'
import { parseScope } from '../lib/cache/scope.ts'
import type { CachedObject } from '../lib/cache/types.ts'
import type { CacheEvent } from '../lib/watch/cache.ts'

function service(rv: number, labels: Record<string, string>, fields: Record<string, string> = {}, namespace = 'default'): CachedObject {
  const body = { kind: 'Service', apiVersion: 'v1', metadata: { name: 'web', namespace, resourceVersion: String(rv), labels } }
  return {
    apiVersion: 'v1',
    kind: 'Service',
    namespace,
    name: 'web',
    resourceVersion: String(rv),
    format: 'json',
    body: Buffer.from(JSON.stringify(body)),
    labels,
    fields,
  }
}

const scope = (labelSelector: string, fieldSelector = '', namespace = '') => parseScope({ namespace, labelSelector, fieldSelector })

t.test('events as a narrower watcher sees them', async t => {
  const web = { tier: 'web' }
  const db = { tier: 'db' }
  const cases: { name: string; scope: ReturnType<typeof scope>; event: CacheEvent; want: string | undefined }[] = [
    {
      name: 'stays in: MODIFIED',
      scope: scope('tier=web'),
      event: { type: 'MODIFIED', object: service(2, web), previous: service(1, web), resourceVersion: 2n },
      want: 'MODIFIED 2',
    },
    {
      name: 'moves in: ADDED',
      scope: scope('tier=web'),
      event: { type: 'MODIFIED', object: service(2, web), previous: service(1, db), resourceVersion: 2n },
      want: 'ADDED 2',
    },
    {
      name: 'moves out: DELETED, the old object at the new version',
      scope: scope('tier=web'),
      event: { type: 'MODIFIED', object: service(2, db), previous: service(1, web), resourceVersion: 2n },
      want: 'DELETED 2 web',
    },
    {
      name: 'never in: nothing',
      scope: scope('tier=web'),
      event: { type: 'MODIFIED', object: service(2, db), previous: service(1, db), resourceVersion: 2n },
      want: undefined,
    },
    { name: 'new and in: ADDED', scope: scope('tier=web'), event: { type: 'ADDED', object: service(3, web), resourceVersion: 3n }, want: 'ADDED 3' },
    { name: 'new, not in: nothing', scope: scope('tier=web'), event: { type: 'ADDED', object: service(3, db), resourceVersion: 3n }, want: undefined },
    {
      name: 'deleted while in: DELETED',
      scope: scope('tier=web'),
      event: { type: 'DELETED', object: service(4, web), previous: service(3, web), resourceVersion: 4n },
      want: 'DELETED 4 web',
    },
    {
      name: 'deleted, never in: nothing',
      scope: scope('tier=web'),
      event: { type: 'DELETED', object: service(4, db), previous: service(3, db), resourceVersion: 4n },
      want: undefined,
    },
    {
      name: 'a field selector on a kept value: type changes out',
      scope: scope('', 'spec.type=NodePort'),
      event: {
        type: 'MODIFIED',
        object: service(5, web, { 'spec.type': 'ClusterIP' }),
        previous: service(4, web, { 'spec.type': 'NodePort' }),
        resourceVersion: 5n,
      },
      want: 'DELETED 5 web',
    },
    {
      name: 'another namespace: nothing',
      scope: scope('', '', 'kube-system'),
      event: { type: 'ADDED', object: service(6, web), resourceVersion: 6n },
      want: undefined,
    },
    {
      name: 'metadata.namespace as a field',
      scope: scope('', 'metadata.namespace=default'),
      event: { type: 'ADDED', object: service(7, web), resourceVersion: 7n },
      want: 'ADDED 7',
    },
  ]
  for (const c of cases) {
    const got = eventInSelection(c.scope, c.event)
    const said =
      got && `${got.type} ${got.object.resourceVersion}${got.type === 'DELETED' ? ` ${JSON.parse(got.object.body.toString()).metadata.labels.tier}` : ''}`
    t.equal(said, c.want, c.name)
    if (got?.type === 'DELETED')
      t.equal(JSON.parse(got.object.body.toString()).metadata.resourceVersion, String(c.event.resourceVersion), `${c.name}: its body says the event's version`)
  }
})

t.test('a field the cache kept no value for never matches (the watch cache keeps every selectable one)', async t => {
  t.notOk(selects(scope('', 'spec.type=NodePort'), service(1, {})))
  t.ok(selects(scope('', 'spec.type!=NodePort'), service(1, {}, { 'spec.type': 'ClusterIP' })))
})
