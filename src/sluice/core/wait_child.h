// Waiting for a child process without losing the wait to a signal.
#ifndef SLUICE_CORE_WAIT_CHILD_H_
#define SLUICE_CORE_WAIT_CHILD_H_

#include <sys/types.h>

namespace sluice {

// waitpid(pid, status, options), tried again while a signal interrupts it.
// The trainer's process often has a SIGCHLD handler (PyTorch's DataLoader
// installs one; Python's handlers leave out SA_RESTART), so any child's exit
// can interrupt a wait; a wait given up then leaves the child a zombie and
// its exit status unknown.
pid_t WaitChild(pid_t pid, int* status, int options);

}  // namespace sluice

#endif  // SLUICE_CORE_WAIT_CHILD_H_
