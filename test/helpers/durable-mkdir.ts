// Runs durableMkdir on argv[2], for test/durable-dirs.test.ts to watch its syscalls under strace.
import { durableMkdir } from '../../lib/durable-dirs.ts'

await durableMkdir(process.argv[2])
