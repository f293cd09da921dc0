#include "sluice/service/unary_call.h"

#include <utility>

#include "absl/synchronization/mutex.h"
#include "sluice/io/thread_cancel.h"

namespace sluice::service {

grpc::Status WaitUnlessCancelled(grpc::ClientContext* context,
                                 const std::function<void(std::function<void(grpc::Status)>)>& start) {
  absl::Mutex mu;
  bool done = false;
  grpc::Status result;
  start([&](grpc::Status status) {
    absl::MutexLock lock(&mu);
    result = std::move(status);
    done = true;
  });
  absl::MutexLock lock(&mu);
  // Polled: the cancellation is a flag, with nothing to wake a waiter.
  while (!mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(50))) {
    if (!io::ThreadCancelled()) continue;
    context->TryCancel();
    mu.Await(absl::Condition(&done));  // the callback still writes `result`
  }
  return result;
}

}  // namespace sluice::service
