#include "sluice/core/wait_child.h"

#include <sys/wait.h>

#include <cerrno>

namespace sluice {

pid_t WaitChild(pid_t pid, int* status, int options) {
  for (;;) {
    const pid_t waited = ::waitpid(pid, status, options);
    if (waited >= 0 || errno != EINTR) return waited;
  }
}

}  // namespace sluice
