#include "sluice/io/thread_cancel.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace sluice::io {
namespace {

thread_local const std::atomic<bool>* thread_cancelled = nullptr;

}  // namespace

ScopedThreadCancel::ScopedThreadCancel(const std::atomic<bool>* cancelled) : previous_(thread_cancelled) {
  thread_cancelled = cancelled;
}

ScopedThreadCancel::~ScopedThreadCancel() { thread_cancelled = previous_; }

bool ThreadCancelled() { return thread_cancelled != nullptr && thread_cancelled->load(std::memory_order_acquire); }

const std::atomic<bool>* ThreadCancellation() { return thread_cancelled; }

bool SleepUnlessCancelled(absl::Duration pause) {
  // Polled: the flag has no condition variable to wake a sleeper, and a
  // retry's pause is long beside 20 ms.
  const absl::Time until = absl::Now() + pause;
  for (absl::Time now = absl::Now(); now < until; now = absl::Now()) {
    if (ThreadCancelled()) return true;
    absl::SleepFor(std::min(until - now, absl::Milliseconds(20)));
  }
  return ThreadCancelled();
}

}  // namespace sluice::io
