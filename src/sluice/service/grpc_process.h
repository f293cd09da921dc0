// gRPC on one side of a fork only.
#ifndef SLUICE_SERVICE_GRPC_PROCESS_H_
#define SLUICE_SERVICE_GRPC_PROCESS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::service {

// OK when this process may start gRPC channels and servers: always, unless
// it was forked from a process that had. A child forked after gRPC started
// shares its parent's polling engine (the epoll sets are kernel objects
// both hold): the child's calls crashed the parent (a DataLoader worker
// forked from a trainer using the service). `what` begins the error.
absl::Status ClaimGrpcForThisProcess(absl::string_view what);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_GRPC_PROCESS_H_
