#include "sluice/core/usable_cores.h"

#include <sched.h>

#include <algorithm>

namespace sluice {

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

}  // namespace sluice
