#include "sluice/service/dispatcher_server.h"

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/log.h"
#include "sluice/service/service_metrics.h"

namespace sluice::service {

// Each method: the caller's role checked, then the implementation.
class DispatcherServer::Service final : public ::sluice::Dispatcher::Service {
 public:
  Service(DispatcherImpl* impl, SecurityOptions security) : impl_(impl), security_(std::move(security)) {}

#define SLUICE_RPC(Method, Request, Response, roles, call)                                                 \
  grpc::Status Method(grpc::ServerContext* context, const Request* request, Response* response) override { \
    absl::StatusOr<Caller> caller = Authorize(*context, security_, roles, #Method);                        \
    if (!caller.ok()) return ToGrpc(caller.status());                                                      \
    return call;                                                                                           \
  }
#define SLUICE_CLIENTS {Role::kClient}
#define SLUICE_WORKERS {Role::kWorker}
#define SLUICE_ANYONE {Role::kClient, Role::kWorker}

  SLUICE_RPC(RegisterPipeline, RegisterPipelineRequest, RegisterPipelineResponse, SLUICE_CLIENTS,
             Reply(impl_->RegisterPipeline(*request), response))
  SLUICE_RPC(GetOrCreateJob, GetOrCreateJobRequest, GetOrCreateJobResponse, SLUICE_CLIENTS,
             Reply(impl_->GetOrCreateJob(*request, *caller), response))
  SLUICE_RPC(ClientHeartbeat, ClientHeartbeatRequest, ClientHeartbeatResponse, SLUICE_CLIENTS,
             Reply(impl_->ClientHeartbeat(*request, *caller), response))
  SLUICE_RPC(ReportSplits, ReportSplitsRequest, ReportSplitsResponse, SLUICE_CLIENTS,
             ToGrpc(impl_->ReportSplits(*request, *caller)))
  SLUICE_RPC(ReleaseClient, ReleaseClientRequest, ReleaseClientResponse, SLUICE_CLIENTS,
             ToGrpc(impl_->ReleaseClient(*request, *caller)))
  SLUICE_RPC(ResumeClient, ResumeClientRequest, ResumeClientResponse, SLUICE_CLIENTS,
             ToGrpc(impl_->ResumeClient(*request, *caller)))
  SLUICE_RPC(WorkerHeartbeat, WorkerHeartbeatRequest, WorkerHeartbeatResponse, SLUICE_WORKERS,
             Reply(impl_->WorkerHeartbeat(*request), response))
  SLUICE_RPC(GetPipeline, GetPipelineRequest, GetPipelineResponse, SLUICE_WORKERS,
             Reply(impl_->GetPipeline(*request), response))
  SLUICE_RPC(GetSplit, GetSplitRequest, GetSplitResponse, SLUICE_WORKERS, Reply(impl_->GetSplit(*request), response))
  SLUICE_RPC(GetStatus, GetStatusRequest, DispatcherStatus, SLUICE_ANYONE,
             Reply(absl::StatusOr<DispatcherStatus>(impl_->Status(*caller)), response))
#undef SLUICE_RPC
#undef SLUICE_CLIENTS
#undef SLUICE_WORKERS
#undef SLUICE_ANYONE

 private:
  template <typename T>
  static grpc::Status Reply(absl::StatusOr<T> result, T* response) {
    if (!result.ok()) return ToGrpc(result.status());
    *response = *std::move(result);
    return grpc::Status::OK;
  }

  DispatcherImpl* impl_;
  const SecurityOptions security_;
};

absl::StatusOr<std::unique_ptr<DispatcherServer>> DispatcherServer::Start(const DispatcherOptions& options) {
  std::unique_ptr<DispatcherServer> server(new DispatcherServer());
  SLUICE_ASSIGN_OR_RETURN(server->impl_, DispatcherImpl::Create(options));
  server->service_ = std::make_unique<Service>(server->impl_.get(), options.security);
  GrpcServer::Options grpc_options;
  grpc_options.role = "dispatcher";
  grpc_options.host = options.host;
  grpc_options.port = options.port;
  grpc_options.security = options.security;
  SLUICE_ASSIGN_OR_RETURN(server->server_, GrpcServer::Start(grpc_options, server->service_.get()));
  DispatcherImpl* impl = server->impl_.get();
  server->server_->RunLoop([impl](absl::Notification* stopping) {
    while (!stopping->WaitForNotificationWithTimeout(DispatcherImpl::kExpireEvery)) {
      absl::Status s = impl->Expire();
      if (!s.ok()) Log("dispatcher", s.ToString());
    }
  });
  if (options.metrics_port >= 0) {
    SLUICE_ASSIGN_OR_RETURN(server->metrics_, MetricsServer::Start(options.host, options.metrics_port, [impl] {
                              return DispatcherMetrics(impl->Status());
                            }));
  }
  const std::string callers = !options.security.callers.empty()
                                  ? absl::StrCat(" (", options.security.callers.size(), " callers)")
                              : options.security.token.empty() ? ""
                                                               : " (token required)";
  if (options.routine_logging) {
    LogRoutine("dispatcher", absl::StrCat("listening on ", options.host, ":", server->port(),
                                          options.security.cert_file.empty() ? "" : " (TLS)", callers));
  }
  return server;
}

DispatcherServer::~DispatcherServer() = default;

}  // namespace sluice::service
