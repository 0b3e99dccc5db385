import t from 'tap'
t.test('a', async t => { t.equal(1, 1); t.equal(2, 2) })
t.test('b', async t => { t.ok(true) })
