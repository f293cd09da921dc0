#include "sluice/service/dispatcher_server.h"

#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/log.h"

namespace sluice::service {

// Each method: token check, then the implementation.
class DispatcherServer::Service final : public ::sluice::Dispatcher::Service {
 public:
  Service(DispatcherImpl* impl, std::string token) : impl_(impl), token_(std::move(token)) {}

#define SLUICE_RPC(Method, Request, Response, call)                                           \
  grpc::Status Method(grpc::ServerContext* context, const Request* request, Response* response) \
      override {                                                                              \
    grpc::Status auth = CheckToken(*context, token_);                                         \
    if (!auth.ok()) return auth;                                                              \
    return call;                                                                              \
  }

  SLUICE_RPC(RegisterPipeline, RegisterPipelineRequest, RegisterPipelineResponse,
             Reply(impl_->RegisterPipeline(*request), response))
  SLUICE_RPC(GetOrCreateJob, GetOrCreateJobRequest, GetOrCreateJobResponse,
             Reply(impl_->GetOrCreateJob(*request), response))
  SLUICE_RPC(ClientHeartbeat, ClientHeartbeatRequest, ClientHeartbeatResponse,
             Reply(impl_->ClientHeartbeat(*request), response))
  SLUICE_RPC(ReportSplits, ReportSplitsRequest, ReportSplitsResponse, ToGrpc(impl_->ReportSplits(*request)))
  SLUICE_RPC(ReleaseClient, ReleaseClientRequest, ReleaseClientResponse,
             ToGrpc(impl_->ReleaseClient(*request)))
  SLUICE_RPC(WorkerHeartbeat, WorkerHeartbeatRequest, WorkerHeartbeatResponse,
             Reply(absl::StatusOr<WorkerHeartbeatResponse>(impl_->WorkerHeartbeat(*request)), response))
  SLUICE_RPC(GetPipeline, GetPipelineRequest, GetPipelineResponse, Reply(impl_->GetPipeline(*request), response))
  SLUICE_RPC(GetSplit, GetSplitRequest, GetSplitResponse, Reply(impl_->GetSplit(*request), response))
  SLUICE_RPC(GetStatus, GetStatusRequest, DispatcherStatus,
             Reply(absl::StatusOr<DispatcherStatus>(impl_->Status()), response))
#undef SLUICE_RPC

 private:
  template <typename T>
  static grpc::Status Reply(absl::StatusOr<T> result, T* response) {
    if (!result.ok()) return ToGrpc(result.status());
    *response = *std::move(result);
    return grpc::Status::OK;
  }

  DispatcherImpl* impl_;
  const std::string token_;
};

absl::StatusOr<std::unique_ptr<DispatcherServer>> DispatcherServer::Start(const DispatcherOptions& options) {
  std::unique_ptr<DispatcherServer> server(new DispatcherServer());
  SLUICE_ASSIGN_OR_RETURN(server->impl_, DispatcherImpl::Create(options.work_dir, options.timeouts, options.security));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          MakeServerCredentials(options.security));
  server->service_ = std::make_unique<Service>(server->impl_.get(), options.security.token);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(options.host, ":", options.port), credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("dispatcher: cannot listen on ", options.host, ":", options.port));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  DispatcherServer* raw = server.get();
  server->expirer_ = std::thread([raw] {
    while (!raw->stopping_.WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
      absl::Status s = raw->impl_->Expire();
      if (!s.ok()) Log("dispatcher", s.ToString());
    }
  });
  Log("dispatcher", absl::StrCat("listening on ", options.host, ":", server->port_,
                                 options.security.cert_file.empty() ? "" : " (TLS)",
                                 options.security.token.empty() ? "" : " (token required)"));
  return server;
}

void DispatcherServer::Stop() {
  if (stopping_.HasBeenNotified()) return;
  stopping_.Notify();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  if (expirer_.joinable()) expirer_.join();
}

DispatcherServer::~DispatcherServer() { Stop(); }

}  // namespace sluice::service
