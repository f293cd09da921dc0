#include "sluice/service/grpc_status.h"

#include "absl/strings/str_cat.h"

namespace sluice::service {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& call) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(call, ": ", status.error_message()));
}

bool LostWorker(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE || status.error_code() == grpc::StatusCode::CANCELLED ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || status.error_code() == grpc::StatusCode::ABORTED;
}

}  // namespace sluice::service
