// How the object store's code turns Arrow's errors into statuses and
// retries the transient ones. Only in builds with Arrow.
#ifndef SLUICE_IO_OBJECT_STORE_RETRY_H_
#define SLUICE_IO_OBJECT_STORE_RETRY_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "arrow/status.h"
#include "sluice/core/backoff.h"
#include "sluice/io/object_store.h"
#include "sluice/io/thread_cancel.h"

namespace sluice::io {

// An Arrow error as a status naming `what` and the URL. Arrow's messages
// name the bucket and key, never a credential. Matched on the AWS and
// Google error names, not on status numbers: a request ID may hold "403".
absl::Status ToStatus(const arrow::Status& st, absl::string_view what, absl::string_view url);

// Counts one transient failure retried (ObjectStoreRetries()).
void CountRetry();

// When the WithRetries this thread runs gives up (InfiniteFuture outside
// one): the S3 client's own retries of a request on this thread stop
// there, so that a store that hangs (each try waiting out its inactivity
// timeout) fails near the store's timeout, not seven tries later.
absl::Time RetryDeadline();

class ScopedRetryDeadline {
 public:
  explicit ScopedRetryDeadline(absl::Time deadline);
  ~ScopedRetryDeadline();
  ScopedRetryDeadline(const ScopedRetryDeadline&) = delete;
  ScopedRetryDeadline& operator=(const ScopedRetryDeadline&) = delete;

 private:
  absl::Time before_;
};

// `attempt()` (an absl::StatusOr) until it succeeds, fails otherwise than
// Unavailable, the store has been unavailable for ObjectStoreTimeout(), or
// the thread's pipeline is cancelled (thread_cancel.h).
template <typename Attempt>
auto WithRetries(Attempt attempt) -> decltype(attempt()) {
  const absl::Duration timeout = ObjectStoreTimeout();
  const absl::Time start = absl::Now(), deadline = std::min(start + timeout, RetryDeadline());
  const ScopedRetryDeadline scoped(deadline);
  Backoff backoff(absl::Milliseconds(100), absl::Seconds(5));
  while (true) {
    auto result = attempt();
    if (result.ok() || !absl::IsUnavailable(result.status())) return result;
    const absl::Duration left = deadline - absl::Now();
    // The last try comes at the deadline; a request's own try can outlast
    // it: the wait is said as it was.
    const absl::Duration pause = std::min(backoff.Next(), left);
    if (left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat(
          result.status().message(), " (retried for ",
          absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(100))), "; the store's timeout is ",
          absl::FormatDuration(timeout), ": set SLUICE_OBJECT_STORE_TIMEOUT_S to wait longer)"));
    }
    CountRetry();
    if (SleepUnlessCancelled(pause)) {
      return absl::CancelledError(
          absl::StrCat("pipeline cancelled while waiting for the store: ", result.status().message()));
    }
  }
}

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_STORE_RETRY_H_
