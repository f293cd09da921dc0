#include "sluice/service/grpc_process.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"

namespace sluice::service {
namespace {

std::atomic<pid_t> grpc_started_in{0};  // a child inherits its parent's

}  // namespace

absl::Status ClaimGrpcForThisProcess(absl::string_view what) {
  const pid_t self = ::getpid();
  pid_t started_in = 0;
  if (grpc_started_in.compare_exchange_strong(started_in, self) || started_in == self) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": gRPC was started in process ", started_in, ", which this process (", self,
      ") was forked from, and cannot run on both sides of a fork (the parent's connections would break). Start this "
      "process with 'spawn' (multiprocessing.get_context(\"spawn\"), DataLoader(multiprocessing_context=\"spawn\")), "
      "or fork it before the parent first uses the service."));
}

}  // namespace sluice::service
