#include "sluice/core/mutex_checks.h"

#include <mutex>

#include "absl/synchronization/mutex.h"

namespace sluice {

void SkipDebugDeadlockChecks() {
  static std::once_flag once;
  std::call_once(once, [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

}  // namespace sluice
