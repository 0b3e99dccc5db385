// A @kubernetes/client-node informer (list + watch, as controllers use it) through the hub.
import t from 'tap'
import * as k8s from '@kubernetes/client-node'
import { startHarness, eventually } from './helpers/hub.ts'
import { kubeConfigFor } from './helpers/clients.ts'

t.test('an informer through the hub sees ADDED, MODIFIED and DELETED', async t => {
  const h = await startHarness({ demo: true })
  t.teardown(() => h.close())
  const kc = kubeConfigFor(h.url)
  const core = kc.makeApiClient(k8s.CoreV1Api)
  const informer = k8s.makeInformer(kc, '/api/v1/namespaces/default/configmaps', () => core.listNamespacedConfigMap({ namespace: 'default' }))
  const seen: string[] = []
  informer.on('add', cm => seen.push(`add ${cm.metadata?.name} ${cm.data?.v ?? ''}`))
  informer.on('update', cm => seen.push(`update ${cm.metadata?.name} ${cm.data?.v ?? ''}`))
  informer.on('delete', cm => seen.push(`delete ${cm.metadata?.name}`))
  informer.on('error', err => seen.push(`error ${err}`))
  await informer.start()
  t.teardown(() => informer.stop())

  h.simulator.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'inf', namespace: 'default' }, data: { v: '1' } })
  await eventually(() => seen.includes('add inf 1'), 10_000, 'ADDED')
  h.simulator.patch('v1', 'ConfigMap', 'default', 'inf', { data: { v: '2' } })
  await eventually(() => seen.includes('update inf 2'), 10_000, 'MODIFIED')
  h.simulator.remove('v1', 'ConfigMap', 'default', 'inf')
  await eventually(() => seen.includes('delete inf'), 10_000, 'DELETED')
  t.same(
    seen.filter(s => s.includes(' inf')),
    ['add inf 1', 'update inf 2', 'delete inf'],
  )
  t.same(
    informer
      .list('default')
      .map(o => o.metadata?.name)
      .filter(n => n === 'inf'),
    [],
    'the store no longer holds it',
  )
})
