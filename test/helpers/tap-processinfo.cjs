// Loaded (--require, from package.json's tap node-arg) before tap's @tapjs/processinfo hooks start
// in each test process. Those record every module a test process and every node process it spawns
// loads (a hub, the demo, kubectl's children are not node), reading each one again and measuring
// its lines, for coverage and `tap --changed`. Coverage is off here and that bookkeeping was a
// quarter of the suite's CPU: nothing is recorded. The spawned processes inherit the setting.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = '/./'
