// What counts as the network's doing (an outage, a restart) rather than the apiserver's answer: the
// reflectors log such failures as detail, since the hub's own cloud line says the outage once.
import t from 'tap'
import { connectionLost, describeError, UpstreamUnavailableError } from '../lib/upstream/upstream.ts'

t.test("a lost connection is told apart from an answer, and undici's parser error on a cut body said plainly", async t => {
  const cut = Object.assign(new Error('Response does not match the HTTP/1.1 protocol (Invalid EOF state)'), { code: 'HPE_INVALID_EOF_STATE' })
  t.equal(describeError(cut), 'the connection closed in the middle of the answer')
  t.ok(connectionLost(cut), 'a body cut mid-answer')
  t.ok(connectionLost(new Error('Response does not match the HTTP/1.1 protocol (Invalid EOF state)')), 'its message alone, where the code was lost')
  t.ok(connectionLost(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })), 'a socket closed')
  t.ok(connectionLost(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })), 'refused')
  t.ok(connectionLost(new UpstreamUnavailableError([{ server: 'https://a:6443', error: 'connect ECONNREFUSED' }])), 'no apiserver reachable')
  t.notOk(connectionLost(new Error('the apiserver answered 500')), 'an answer is not a lost connection')
  t.notOk(
    connectionLost(Object.assign(new Error('unable to verify the first certificate'), { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' })),
    'nor is a TLS problem: that one is worth a warning',
  )
})
