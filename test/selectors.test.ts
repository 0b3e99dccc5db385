import t from 'tap'
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from '../lib/api/selectors.ts'

const labels = { app: 'web', tier: 'front', 'apps.openyurt.io/nodepool': 'shanghai', n: '7', empty: '' }

t.test('label selectors: matching table', async t => {
  const cases: [string, boolean][] = [
    ['', true],
    ['app=web', true],
    ['app==web', true],
    ['app=db', false],
    ['app!=db', true],
    ['app!=web', false],
    ['missing!=x', true], // != matches objects without the key
    ['app', true],
    ['missing', false],
    ['!missing', true],
    ['!app', false],
    ['app in (web,db)', true],
    ['app in (db, cache)', false],
    ['missing in (web)', false],
    ['app notin (db,cache)', true],
    ['app notin (web)', false],
    ['missing notin (web)', true],
    ['app=web,tier=front', true],
    ['app=web,tier=back', false],
    [' app = web , tier in ( front ) ', true],
    ['apps.openyurt.io/nodepool=shanghai', true],
    ['apps.openyurt.io/nodepool in (beijing,hangzhou)', false],
    ['n>5', true],
    ['n<5', false],
    ['app>5', false], // not an integer label value
    ['empty=', true],
    ['empty', true],
    ['app=in', false],
    ['app,!missing,tier notin (back)', true],
  ]
  for (const [sel, want] of cases) {
    t.equal(matchesLabels(parseLabelSelector(sel), labels), want, JSON.stringify(sel))
  }
  t.equal(matchesLabels(parseLabelSelector('a!=b'), undefined), true, 'no labels at all')
  t.equal(matchesLabels(parseLabelSelector('a'), undefined), false, 'no labels: exists fails')
})

t.test('label selectors: parse structure', async t => {
  t.same(parseLabelSelector('a in (x, y),!b,c!=d').requirements, [
    { key: 'a', operator: 'in', values: ['x', 'y'] },
    { key: 'b', operator: '!', values: [] },
    { key: 'c', operator: '!=', values: ['d'] },
  ])
})

t.test('label selectors: syntax errors throw', async t => {
  const bad = [
    'a=b,',
    ',a=b',
    'a in ()',
    'a in (b',
    'a in b',
    'a notin',
    'a=b=c',
    'a b',
    '!',
    '!a=b',
    'a>x',
    'a==(b)',
    'bad key=x',
    'a=bad value',
    '-a=b',
    'a=' + 'x'.repeat(64),
    'Prefix_/a=b',
    '(a)',
  ]
  for (const sel of bad) t.throws(() => parseLabelSelector(sel), JSON.stringify(sel))
})

const pod = {
  metadata: { name: 'p1', namespace: 'default' },
  spec: { nodeName: 'kind-worker2', hostNetwork: false },
  status: { phase: 'Running', restarts: 3 },
  involvedObject: { name: 'a,b=c' },
}

t.test('field selectors: matching table', async t => {
  const cases: [string, boolean][] = [
    ['', true],
    ['metadata.name=p1', true],
    ['metadata.name==p1', true],
    ['metadata.name=p2', false],
    ['metadata.name!=p2', true],
    ['metadata.namespace=default', true],
    ['spec.nodeName=kind-worker2', true],
    ['spec.nodeName=kind-worker2,status.phase=Running', true],
    ['spec.nodeName=kind-worker2,status.phase!=Running', false],
    ['spec.nodeName=', false],
    ['spec.schedulerName=', true], // missing fields compare as ""
    ['spec.hostNetwork=false', true],
    ['status.restarts=3', true],
    ['involvedObject.name=a\\,b\\=c', true],
    ['metadata.name = p1', false], // value is " p1" after the operator
    ['metadata.name=p1,', true], // empty terms are skipped, as by the apiserver
  ]
  for (const [sel, want] of cases) t.equal(matchesFields(parseFieldSelector(sel), pod), want, JSON.stringify(sel))
  t.same(parseFieldSelector('a.b!=x\\!y').requirements, [{ field: 'a.b', operator: '!=', value: 'x!y' }])
})

t.test('field selectors: syntax errors throw', async t => {
  for (const sel of ['metadata.name', '=x', 'a=b,c', 'a=b\\q', 'a b=c']) {
    t.throws(() => parseFieldSelector(sel), JSON.stringify(sel))
  }
})
