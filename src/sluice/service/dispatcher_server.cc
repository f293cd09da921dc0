#include "sluice/service/dispatcher_server.h"

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
             Reply(impl_->WorkerHeartbeat(*request), response))
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
  SLUICE_ASSIGN_OR_RETURN(server->impl_, DispatcherImpl::Create(options));
  server->service_ = std::make_unique<Service>(server->impl_.get(), options.security.token);
  GrpcServer::Options grpc_options;
  grpc_options.role = "dispatcher";
  grpc_options.host = options.host;
  grpc_options.port = options.port;
  grpc_options.security = options.security;
  SLUICE_ASSIGN_OR_RETURN(server->server_, GrpcServer::Start(grpc_options, server->service_.get()));
  DispatcherImpl* impl = server->impl_.get();
  server->server_->RunLoop([impl](absl::Notification* stopping) {
    while (!stopping->WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
      absl::Status s = impl->Expire();
      if (!s.ok()) Log("dispatcher", s.ToString());
    }
  });
  Log("dispatcher", absl::StrCat("listening on ", options.host, ":", server->port(),
                                 options.security.cert_file.empty() ? "" : " (TLS)",
                                 options.security.token.empty() ? "" : " (token required)"));
  return server;
}

DispatcherServer::~DispatcherServer() = default;

}  // namespace sluice::service
