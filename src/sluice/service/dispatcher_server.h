// `sluice dispatcher`: the dispatcher's gRPC server. Each RPC checks the
// token and forwards to DispatcherImpl; a thread drops silent workers and
// clients. gRPC's standard health service (grpc.health.v1) reports SERVING
// once the journal has been replayed, for readiness probes.
#ifndef SLUICE_SERVICE_DISPATCHER_SERVER_H_
#define SLUICE_SERVICE_DISPATCHER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service.grpc.pb.h"
#include "sluice/service/dispatcher_impl.h"
#include "sluice/service/grpc_server.h"
#include "sluice/service/metrics_server.h"
#include "sluice/service/security.h"

namespace sluice::service {

class DispatcherServer {
 public:
  static absl::StatusOr<std::unique_ptr<DispatcherServer>> Start(const DispatcherOptions& options);

  ~DispatcherServer();  // stops the server first

  int port() const { return server_->port(); }
  // -1 when it serves no metrics.
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  // host:port for clients on this machine.
  std::string local_address() const { return "127.0.0.1:" + std::to_string(port()); }
  // Stops accepting calls, lets running ones finish briefly, joins threads.
  void Stop() { server_->Stop(); }
  void Wait() { server_->Wait(); }

 private:
  class Service;
  DispatcherServer() = default;

  std::unique_ptr<DispatcherImpl> impl_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<GrpcServer> server_;      // stops before what it serves
  std::unique_ptr<MetricsServer> metrics_;  // last: stops first
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_DISPATCHER_SERVER_H_
