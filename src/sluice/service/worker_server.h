// `sluice worker`: the worker's gRPC server. StreamBatches streams what
// WorkerImpl produces; a thread keeps the worker registered with the
// dispatcher (heartbeats, retried with backoff while it is away).
#ifndef SLUICE_SERVICE_WORKER_SERVER_H_
#define SLUICE_SERVICE_WORKER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sluice/service/grpc_server.h"
#include "sluice/service/metrics_server.h"
#include "sluice/service/worker_impl.h"

namespace sluice::service {

struct WorkerServerOptions {
  std::string host = "127.0.0.1";            // beyond loopback: see docs/service.md#security
  int port = 0;                              // 0: any free port
  std::string advertise_host = "127.0.0.1";  // the host clients dial
  WorkerOptions worker;                      // its address is set from the port
  int metrics_port = -1;                     // Prometheus metrics on `host` (0: any free port; -1: none)
  // Called once, from the heartbeat thread, when the dispatcher refuses
  // this worker's credentials (a wrong token, or a caller whose role may
  // not serve): no retry can succeed. Unset, the worker logs it and keeps
  // retrying.
  std::function<void(const absl::Status&)> on_refused;
};

class WorkerServer {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Start(WorkerServerOptions options);

  ~WorkerServer();  // stops the server first

  int port() const { return server_->port(); }
  // -1 when it serves no metrics.
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  void Stop() { server_->Stop(); }
  // SIGTERM: lets each stream finish its current split (at most `timeout`),
  // tells the dispatcher it leaves, then stops. Returns the streams that
  // had to be cut off at the timeout.
  int Drain(absl::Duration timeout);
  void Wait() { server_->Wait(); }

 private:
  class Service;
  WorkerServer() = default;

  std::unique_ptr<WorkerImpl> impl_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<GrpcServer> server_;      // stops before what it serves
  std::unique_ptr<MetricsServer> metrics_;  // last: stops first
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_WORKER_SERVER_H_
