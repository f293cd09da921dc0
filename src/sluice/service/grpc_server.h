// The life of a sluice gRPC server, shared by the dispatcher and workers:
// listening on host:port with the security options' credentials, the
// standard health service (grpc.health.v1, SERVING once started), message
// size limits, one background loop (heartbeats, expiry), and a stop that
// lets running calls finish briefly and joins the loop.
#ifndef SLUICE_SERVICE_GRPC_SERVER_H_
#define SLUICE_SERVICE_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/call_once.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "sluice/service/channel.h"
#include "sluice/service/security.h"

namespace sluice::service {

// Thread-safe.
class GrpcServer {
 public:
  struct Options {
    std::string role;  // "dispatcher", "worker": names it in messages
    std::string host = "127.0.0.1";
    int port = 0;  // 0: any free port (see port())
    SecurityOptions security;
    int max_receive_bytes = kMaxRequestBytes;
    int max_send_bytes = kMaxMessageBytes;
  };

  // Serves `service` (which must outlive the server). Unavailable naming
  // the role and address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const Options& options, grpc::Service* service);
  ~GrpcServer();  // Stop()s

  int port() const { return port_; }
  // Runs `loop(stopping)` on a thread of its own; the loop returns once
  // `stopping` is notified (Stop). One loop per server.
  void RunLoop(std::function<void(absl::Notification* stopping)> loop);
  // Stops accepting calls, lets running ones finish for up to 500 ms, joins
  // the loop. Idempotent.
  void Stop();
  void Wait() { server_->Wait(); }

 private:
  GrpcServer() = default;

  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::once_flag stop_once_;
  absl::Notification stopping_;
  std::thread loop_;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_GRPC_SERVER_H_
