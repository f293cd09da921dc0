#include "sluice/core/descriptor_limit.h"

#include <sys/resource.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace sluice {

std::string DescriptorLimitHint(int err) {
  if (err == ENFILE) return "; the system's table of open files is full";
  if (err != EMFILE) return "";
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return "; raise this process's limit of open descriptors (ulimit -n)";
  }
  return absl::StrCat(
      "; this process may open ", limit.rlim_cur, " descriptors (ulimit -n): raise the limit",
      limit.rlim_max > limit.rlim_cur ? absl::StrCat(" (up to ", limit.rlim_max, " without root)") : "");
}

}  // namespace sluice
