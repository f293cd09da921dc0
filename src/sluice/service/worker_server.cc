#include "sluice/service/worker_server.h"

#include <grpcpp/impl/codegen/method_handler.h>
#include <grpcpp/impl/rpc_service_method.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "service.grpc.pb.h"
#include "sluice/core/backoff.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/log.h"
#include "sluice/service/security.h"
#include "sluice/service/service_metrics.h"
#include "sluice/service/wire_batch.h"

namespace sluice::service {

// The Worker service, registered by hand rather than through the generated
// class: StreamBatches writes WireBatches (tensor memory as gRPC slices, no
// copy) where the generated one would write BatchMessages, which protobuf
// and gRPC copy twice; it runs on gRPC's sync threads, whose writes need
// no hand-off. Clients' generated stubs parse the messages as BatchMessages.
class WorkerServer::Service final : public grpc::Service {
 public:
  Service(WorkerImpl* impl, SecurityOptions security) : impl_(impl), security_(std::move(security)) {
    static const std::string stream = absl::StrCat("/", ::sluice::Worker::service_full_name(), "/StreamBatches");
    static const std::string status = absl::StrCat("/", ::sluice::Worker::service_full_name(), "/GetStatus");
    static const std::string describe = absl::StrCat("/", ::sluice::Worker::service_full_name(), "/DescribePipeline");
    AddMethod(new grpc::internal::RpcServiceMethod(
        stream.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING,
        new grpc::internal::ServerStreamingHandler<Service, StreamBatchesRequest, WireBatch>(
            [](Service* service, grpc::ServerContext* context, const StreamBatchesRequest* request,
               grpc::ServerWriter<WireBatch>* writer) { return service->StreamBatches(context, request, writer); },
            this)));
    AddMethod(new grpc::internal::RpcServiceMethod(
        status.c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<Service, GetStatusRequest, WorkerStatus, grpc::protobuf::MessageLite,
                                             grpc::protobuf::MessageLite>(
            [](Service* service, grpc::ServerContext* context, const GetStatusRequest*, WorkerStatus* response) {
              absl::Status auth =
                  Authorize(*context, service->security_, {Role::kClient, Role::kWorker}, "GetStatus").status();
              if (auth.ok()) *response = service->impl_->Status();
              return ToGrpc(auth);
            },
            this)));
    AddMethod(new grpc::internal::RpcServiceMethod(
        describe.c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<Service, DescribePipelineRequest, ElementSpec, grpc::protobuf::MessageLite,
                                             grpc::protobuf::MessageLite>(
            [](Service* service, grpc::ServerContext* context, const DescribePipelineRequest* request,
               ElementSpec* response) {
              // The dispatcher asks, with a worker's credentials.
              absl::Status auth = Authorize(*context, service->security_, {Role::kWorker}, "DescribePipeline").status();
              if (!auth.ok()) return ToGrpc(auth);
              absl::StatusOr<ElementSpec> element = service->impl_->Describe(*request);
              if (element.ok()) *response = *std::move(element);
              return ToGrpc(element.status());
            },
            this)));
  }

 private:
  grpc::Status StreamBatches(grpc::ServerContext* context, const StreamBatchesRequest* request,
                             grpc::ServerWriter<WireBatch>* writer) {
    absl::Status auth = Authorize(*context, security_, {Role::kClient}, "StreamBatches").status();
    if (!auth.ok()) return ToGrpc(auth);
    WireBatch message;
    absl::Status s = impl_->StreamBatches(
        *request,
        [&](grpc::ByteBuffer* bytes) {
          message.bytes = std::move(*bytes);
          return writer->Write(message);
        },
        [context] { return context->IsCancelled(); });
    if (!s.ok() && !absl::IsCancelled(s)) {
      impl_->CountError(s.code());
      Log("worker", absl::StrCat("stream of job ", request->job_id(), " for client ", request->client_id(),
                                 " failed: ", s.ToString()));
    }
    return ToGrpc(s);
  }

  WorkerImpl* impl_;
  const SecurityOptions security_;
};

namespace {

// The address clients dial, `host` (a name, an IPv4 address or an IPv6 one,
// bracketed or not) with `port`. A host given with a port was announced as
// "host:port:port", which every consumer retried without end.
absl::StatusOr<std::string> AdvertisedAddress(const std::string& host, int port) {
  const size_t colons = std::count(host.begin(), host.end(), ':');
  if (host.empty() || (colons == 1 && host.front() != '[')) {
    return absl::InvalidArgumentError(absl::StrCat("worker: --advertise '", host,
                                                   "' is not a host name or address (without a port: the worker "
                                                   "adds the one it listens on)"));
  }
  if (colons > 1 && host.front() != '[') return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(WorkerServerOptions options) {
  SLUICE_RETURN_IF_ERROR(AdvertisedAddress(options.advertise_host, 1).status());
  std::unique_ptr<WorkerServer> server(new WorkerServer());
  SLUICE_ASSIGN_OR_RETURN(server->impl_, WorkerImpl::Create(options.worker));
  server->service_ = std::make_unique<Service>(server->impl_.get(), options.worker.security);
  GrpcServer::Options grpc_options;
  grpc_options.role = "worker";
  grpc_options.host = options.host;
  grpc_options.port = options.port;
  grpc_options.security = options.worker.security;
  SLUICE_ASSIGN_OR_RETURN(server->server_, GrpcServer::Start(grpc_options, server->service_.get()));
  // The port (and so the address clients dial) is known once the server
  // runs; heartbeats, which announce it, start after that.
  SLUICE_ASSIGN_OR_RETURN(const std::string address, AdvertisedAddress(options.advertise_host, server->port()));
  server->impl_->set_address(address);
  WorkerImpl* impl = server->impl_.get();
  // Before the first heartbeat: a worker that cannot serve its metrics
  // exits without having registered (a dispatcher would count it live).
  if (options.metrics_port >= 0) {
    SLUICE_ASSIGN_OR_RETURN(server->metrics_, MetricsServer::Start(options.host, options.metrics_port,
                                                                   [impl] { return WorkerMetrics(impl->Status()); }));
  }
  server->server_->RunLoop([impl, on_refused = options.on_refused](absl::Notification* stopping) {
    // Every 500 ms; after a failure, backing off to every 2 s.
    Backoff backoff(absl::Milliseconds(500), absl::Seconds(2));
    // A run of failures says each kind once (a dispatcher that was away
    // answers, but refuses the worker's id).
    std::set<absl::StatusCode> reported;
    do {
      absl::Status s = impl->Heartbeat();
      if (s.ok()) {
        backoff.Reset();
        reported.clear();
      } else if (on_refused && (absl::IsUnauthenticated(s) || absl::IsPermissionDenied(s))) {
        return on_refused(s);
      } else if (reported.insert(s.code()).second) {
        Log("worker", absl::StrCat(s.ToString(), "; retrying"));
      }
    } while (backoff.Wait(stopping));
  });
  LogRoutine("worker", absl::StrCat("listening on ", options.host, ":", server->port(), ", dispatcher ",
                                    options.worker.dispatcher));
  return server;
}

int WorkerServer::Drain(absl::Duration timeout) {
  impl_->StartDraining();
  const absl::Time give_up = absl::Now() + timeout;
  while (impl_->active_streams() > 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
  const int cut = impl_->active_streams();
  const absl::Status left = impl_->Leave();
  if (!left.ok()) Log("worker", absl::StrCat(left.ToString(), " (the dispatcher notices after its worker timeout)"));
  Stop();
  return cut;
}

WorkerServer::~WorkerServer() = default;

}  // namespace sluice::service
