// Which listed scope answers for which requested one: a table, as the offline cache relies on it
// to answer only what it knows whole.
import t from 'tap'
import { covers, inScope, parseScope, scopeOfName } from '../lib/cache/scope.ts'

const s = (namespace: string, labelSelector = '', fieldSelector = '') => parseScope({ namespace, labelSelector, fieldSelector })

t.test('covers: a whole list of `listed` tells everything about `requested`', async t => {
  const cases: [string, ReturnType<typeof s>, ReturnType<typeof s>, boolean][] = [
    ['everything covers a namespace', s(''), s('default'), true],
    ['everything covers a label selector', s(''), s('', 'app=a'), true],
    ['everything covers kubelet’s node', s(''), s('', '', 'spec.nodeName=n1'), true],
    ['a namespace does not cover everything', s('default'), s(''), false],
    ['a namespace does not cover another', s('default'), s('kube-system'), false],
    ['a namespace covers itself with a selector', s('default'), s('default', 'app=a'), true],
    ['metadata.namespace= is the namespace', s('default'), s('', '', 'metadata.namespace=default'), true],
    ['a selector does not cover everything', s('', 'app=a'), s(''), false],
    ['a selector covers itself', s('', 'app=a'), s('', 'app==a'), true],
    ['a selector covers a narrower one', s('', 'app=a'), s('', 'app=a,tier!=db'), true],
    ['a narrower selector does not cover a wider one', s('', 'app=a,tier!=db'), s('', 'app=a'), false],
    ['set values in any order', s('', 'app in (b,a)'), s('', 'app in (a,b)'), true],
    ['a set does not cover another set', s('', 'app in (a,b)'), s('', 'app in (a,c)'), false],
    [
      'kube-proxy’s service selector covers itself',
      s('', '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name'),
      s('', '!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless'),
      true,
    ],
    ['one node’s pods do not cover another’s', s('', '', 'spec.nodeName=n1'), s('', '', 'spec.nodeName=n2'), false],
    ['one node’s pods cover themselves in a namespace', s('', '', 'spec.nodeName=n1'), s('default', '', 'spec.nodeName=n1'), true],
    ['one node’s pods do not cover all pods', s('', '', 'spec.nodeName=n1'), s(''), false],
    ['a name covers a get of it', s('', '', 'metadata.name=n1'), scopeOfName('', 'n1'), true],
    ['a name does not cover a get of another', s('', '', 'metadata.name=n1'), scopeOfName('', 'n2'), false],
    ['a namespace covers a get in it', s('default'), scopeOfName('default', 'x'), true],
  ]
  for (const [name, listed, requested, expected] of cases) t.equal(covers(listed, requested), expected, name)
})

t.test('scope ids: equal scopes however written', async t => {
  t.equal(s('', 'a=1,b=2').id, s('', 'b==2, a=1').id)
  t.not(s('', 'a=1').id, s('', 'a!=1').id)
  t.not(s('x').id, s('y').id)
})

t.test('inScope: vouched fields stand in for what the index cannot read', async t => {
  const object = { namespace: 'default', name: 'p', labels: { app: 'a' }, fields: { 'spec.nodeName': 'n1' } }
  t.ok(inScope(object, s('', '', 'spec.nodeName=n1')))
  t.notOk(inScope(object, s('', '', 'spec.nodeName=n2')))
  t.notOk(inScope({ ...object, fields: undefined }, s('', '', 'spec.nodeName=n1')), 'no vouched value, no body: no match')
  t.ok(
    inScope({ ...object, fields: undefined }, s('', '', 'spec.nodeName=n1'), () => 'n1'),
    'the body decides when given',
  )
  t.ok(inScope(object, s('default', 'app=a', 'metadata.name=p')))
})
