#include "sluice/service/grpc_server.h"

#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/grpc_process.h"

namespace sluice::service {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const Options& options, grpc::Service* service) {
  SLUICE_RETURN_IF_ERROR(ClaimGrpcForThisProcess(options.role));
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          MakeServerCredentials(options.security));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on a port in use
  // would start and take a share of its calls (two dispatchers each with
  // some of the workers and clients). Off, it fails to listen.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(absl::StrCat(options.host, ":", options.port), credentials, &server->port_);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  builder.SetMaxSendMessageSize(options.max_send_bytes);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(options.role, ": cannot listen on ", options.host, ":", options.port,
                                               " (is another process listening there?)"));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

void GrpcServer::RunLoop(std::function<void(absl::Notification* stopping)> loop) {
  loop_ = std::thread([this, loop = std::move(loop)] { loop(&stopping_); });
}

void GrpcServer::Stop() {
  absl::call_once(stop_once_, [this] {
    stopping_.Notify();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    if (loop_.joinable()) loop_.join();
  });
}

GrpcServer::~GrpcServer() { Stop(); }

}  // namespace sluice::service
