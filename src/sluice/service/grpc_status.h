// The one conversion between absl::Status and grpc::Status at the service's
// boundary: the codes are the same numbers, and a status that comes back
// from a call is prefixed with the call that failed.
#ifndef SLUICE_SERVICE_GRPC_STATUS_H_
#define SLUICE_SERVICE_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"

namespace sluice::service {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status, const std::string& call);

// A stream that ended this way lost its worker (killed, restarted, network);
// anything else is the pipeline's own error, which the consumer must see.
bool LostWorker(const grpc::Status& status);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_GRPC_STATUS_H_
