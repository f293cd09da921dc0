// One unary call to a sluice server (the dispatcher, or a worker), as
// workers, clients and the dispatcher make them: with the token, a
// deadline (`timeout` from now), and the gRPC status turned into an
// absl::Status that names the call.
#ifndef SLUICE_SERVICE_UNARY_CALL_H_
#define SLUICE_SERVICE_UNARY_CALL_H_

#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/security.h"

namespace sluice::service {

template <typename Stub, typename Request, typename Response, typename Method>
absl::Status CallUnary(Stub* stub, Method method, const std::string& name, const Request& request, Response* response,
                       const std::string& token, absl::Duration timeout = absl::Seconds(10)) {
  grpc::ClientContext context;
  AddToken(&context, token);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return FromGrpc((stub->*method)(&context, request, response), name);
}

// A blocking unary call that the calling thread's cancellation
// (io::ScopedThreadCancel: a Ctrl-C while a pipeline is made) stops within
// 50 ms, not at its deadline: `start(done)` begins it through the stub's
// async() API. CANCELLED when it was stopped so.
grpc::Status WaitUnlessCancelled(grpc::ClientContext* context,
                                 const std::function<void(std::function<void(grpc::Status)>)>& start);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_UNARY_CALL_H_
