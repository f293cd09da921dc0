#include "sluice/service/unary_call.h"

#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "sluice/io/thread_cancel.h"

namespace sluice::service {
namespace {

// Shared with the callback: gRPC's thread may still be leaving it (its
// lock's release) when the waiter has returned.
struct PendingCall {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  grpc::Status result ABSL_GUARDED_BY(mu);
};

}  // namespace

grpc::Status WaitUnlessCancelled(grpc::ClientContext* context,
                                 const std::function<void(std::function<void(grpc::Status)>)>& start) {
  auto call = std::make_shared<PendingCall>();
  start([call](grpc::Status status) {
    absl::MutexLock lock(&call->mu);
    call->result = std::move(status);
    call->done = true;
  });
  absl::MutexLock lock(&call->mu);
  // Polled: the cancellation is a flag, with nothing to wake a waiter.
  while (!call->mu.AwaitWithTimeout(absl::Condition(&call->done), absl::Milliseconds(50))) {
    if (!io::ThreadCancelled()) continue;
    context->TryCancel();
    call->mu.Await(absl::Condition(&call->done));  // the callback still writes `result`
  }
  return call->result;
}

}  // namespace sluice::service
