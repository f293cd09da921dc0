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

// A call that ended this way found no server to answer it: down,
// restarting, hung past the deadline, or stopping (a server's shutdown
// ends its calls in flight CANCELLED). Worth retrying while the caller's
// patience lasts; anything else is the server's answer.
bool ServerAway(const absl::Status& status);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_GRPC_STATUS_H_
