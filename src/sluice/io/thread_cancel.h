// The pipeline cancellation of the thread doing IO, for waits deep in a
// read that have no context of their own: a store's retries stop waiting
// when the pipeline reading goes away, rather than for the store's timeout.
#ifndef SLUICE_IO_THREAD_CANCEL_H_
#define SLUICE_IO_THREAD_CANCEL_H_

#include <atomic>

#include "absl/time/time.h"

namespace sluice::io {

// While alive, `*cancelled` (may be null) is this thread's cancellation.
class ScopedThreadCancel {
 public:
  explicit ScopedThreadCancel(const std::atomic<bool>* cancelled);
  ~ScopedThreadCancel();
  ScopedThreadCancel(const ScopedThreadCancel&) = delete;
  ScopedThreadCancel& operator=(const ScopedThreadCancel&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// Whether this thread's pipeline was cancelled.
bool ThreadCancelled();
// This thread's cancellation (null when none), for a wait below io that
// takes its flag.
const std::atomic<bool>* ThreadCancellation();
// Sleeps for `pause`, or less when this thread's pipeline is cancelled
// meanwhile; whether it was.
bool SleepUnlessCancelled(absl::Duration pause);

}  // namespace sluice::io

#endif  // SLUICE_IO_THREAD_CANCEL_H_
