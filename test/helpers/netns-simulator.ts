// The demo cluster in a process of its own, for tests that run it inside a network namespace
// (`ip netns exec NS node --import tsx test/helpers/netns-simulator.ts CA_FILE`): it approves and
// signs CSRs, writes its signer's CA to CA_FILE, prints {"url": …} once it listens, and stops when
// its stdin closes.
import { writeFileSync } from 'node:fs'
import { startDemoCluster } from '../simulator/demo.ts'

const sim = await startDemoCluster({ autoApproveCsr: true })
writeFileSync(process.argv[2], sim.signerCa.cert)
process.stdout.write(`${JSON.stringify({ url: sim.url })}\n`)
process.stdin.resume()
process.stdin.on('end', () => void sim.close().then(() => process.exit(0)))
