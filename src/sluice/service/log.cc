#include "sluice/service/log.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice::service {
namespace {

std::atomic<bool> routine_logged{true};

}  // namespace

void Log(absl::string_view who, absl::string_view message) {
  const std::string when = absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
  std::fprintf(stderr, "%s %.*s: %.*s\n", when.c_str(), static_cast<int>(who.size()), who.data(),
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

void LogRoutine(absl::string_view who, absl::string_view message) {
  if (routine_logged.load(std::memory_order_relaxed)) Log(who, message);
}

void SetRoutineLogging(bool on) { routine_logged.store(on, std::memory_order_relaxed); }

}  // namespace sluice::service
