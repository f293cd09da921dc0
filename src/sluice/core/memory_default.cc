#include "sluice/core/memory_default.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kShare = 128;
constexpr int64_t kLeast = 256 * kMiB;
constexpr int64_t kMost = 2048 * kMiB;

// The cgroup (v2, else v1) memory limit; 0 when none is set.
int64_t CgroupLimit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    int64_t limit = 0;
    if (in >> text && absl::SimpleAtoi(text, &limit) && limit > 0) return limit;
  }
  return 0;
}

int LocalRanks() {
  const char* env = std::getenv("LOCAL_WORLD_SIZE");
  int ranks = 1;
  if (env == nullptr || !absl::SimpleAtoi(env, &ranks) || ranks < 1) return 1;
  return ranks;
}

}  // namespace

DefaultMemoryBudget DefaultMemoryBudgetOfMachine() {
  DefaultMemoryBudget d;
  d.machine_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const int64_t cgroup = CgroupLimit();
  if (cgroup > 0 && cgroup < d.machine_bytes) d.machine_bytes = cgroup;
  d.local_ranks = LocalRanks();
  d.bytes = std::clamp(d.machine_bytes / kShare / d.local_ranks, kLeast, kMost);
  return d;
}

std::string DefaultMemoryBudget::Describe() const {
  const int64_t share = machine_bytes / kShare / local_ranks;
  const std::string bound = share < kLeast  ? absl::StrFormat(", %.0f MiB, raised to the least", share / double{kMiB})
                            : share > kMost ? ", lowered to the most"
                                            : "";
  return absl::StrFormat("%d MiB (1/%d of %.1f GiB for %d rank%s%s)", bytes / kMiB, kShare,
                         machine_bytes / static_cast<double>(kMiB * 1024), local_ranks, local_ranks == 1 ? "" : "s",
                         bound);
}

}  // namespace sluice
