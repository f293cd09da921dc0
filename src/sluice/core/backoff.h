// Capped exponential backoff, the one way sluice retries (the service, object
// stores): the pause doubles from `initial` up to `max`, and starts over
// after a success.
#ifndef SLUICE_CORE_BACKOFF_H_
#define SLUICE_CORE_BACKOFF_H_

#include <algorithm>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice {

// Thread-compatible: one per retry loop.
class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max) : initial_(initial), max_(max), next_(initial) {}

  // Sleeps the current pause and doubles the next (up to max). With `stop`:
  // returns false at once when it is notified meanwhile.
  bool Wait(absl::Notification* stop = nullptr) {
    const absl::Duration pause = Next();
    if (stop != nullptr) return !stop->WaitForNotificationWithTimeout(pause);
    absl::SleepFor(pause);
    return true;
  }
  // The current pause, doubling the next: for a caller that waits itself.
  absl::Duration Next() {
    const absl::Duration pause = next_;
    next_ = std::min(next_ * 2, max_);
    return pause;
  }
  // After a success: the next failure waits `initial` again.
  void Reset() { next_ = initial_; }

 private:
  const absl::Duration initial_, max_;
  absl::Duration next_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_BACKOFF_H_
