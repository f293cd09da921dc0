#include "sluice/service/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::service {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

// gRPC's own statuses for a server that has no such call (another sluice
// server's port: a worker's given as the dispatcher) come without a
// message; say what they mean.
std::string MessageOf(const grpc::Status& status) {
  if (!status.error_message().empty()) return status.error_message();
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return "the server there does not serve this call (another server's address, such as a worker's given for "
           "the dispatcher's?)";
  }
  return absl::StrCat("gRPC status ", static_cast<int>(status.error_code()), " without a message");
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status, const std::string& call) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), absl::StrCat(call, ": ", MessageOf(status)));
}

bool LostWorker(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE || status.error_code() == grpc::StatusCode::CANCELLED ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || status.error_code() == grpc::StatusCode::ABORTED;
}

bool ServerAway(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) || absl::IsCancelled(status);
}

}  // namespace sluice::service
