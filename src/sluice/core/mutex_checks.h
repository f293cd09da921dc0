// Turns off absl::Mutex's debug-build deadlock detection for the process.
#ifndef SLUICE_CORE_MUTEX_CHECKS_H_
#define SLUICE_CORE_MUTEX_CHECKS_H_

namespace sluice {

// An absl built without NDEBUG (Debian's) checks every Mutex::Lock against a
// process-wide graph of lock orders, under a global lock of its own, and
// every Mutex's destruction removes it from that graph: skipping it took
// 1.4% of the machine's CPU off W3 through a local worker (perf), where
// the engine's and gRPC's threads lock often. Release builds of absl skip
// it; so does this process. Idempotent; called when a pipeline is created and by the CLI.
void SkipDebugDeadlockChecks();

}  // namespace sluice

#endif  // SLUICE_CORE_MUTEX_CHECKS_H_
