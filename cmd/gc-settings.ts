// Imported first by cmd/outpost.ts: V8's GC flags are set before the libraries load and before
// any collection can be under way (cmd/heap.ts says which and why).
import { tuneGarbageCollector } from './heap.ts'

tuneGarbageCollector(process.execArgv)
