// Starting the engine's threads where the system may refuse one: a limit
// on tasks (`ulimit -u`, a container's pids limit) or no address space for
// a stack (`ulimit -v`). std::thread throws then, and thrown out of a
// constructor that had already started others it ended the process.
#ifndef SLUICE_EXEC_THREAD_START_H_
#define SLUICE_EXEC_THREAD_START_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::exec {

// Starts threads running body(0), body(1), ... into *threads until `count`
// run or the system refuses one; returns how many started.
int StartThreads(int count, const std::function<void(int)>& body, std::vector<std::thread>* threads);

// A thread running `body`, or a thread that is not joinable when the
// system refused it.
std::thread TryStartThread(std::function<void()> body);

// The error of `who` (a node's name) when none of its threads started.
absl::Status ThreadStartError(absl::string_view who);

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_THREAD_START_H_
