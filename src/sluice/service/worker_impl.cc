#include "sluice/service/worker_impl.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/unary_call.h"
#include "sluice/ops/op_registry.h"
#include "sluice/service/backoff.h"
#include "sluice/service/element_spec.h"
#include "sluice/service/encode_ahead.h"
#include "sluice/service/wire_batch.h"
#include "sluice/service/log.h"

namespace sluice::service {
namespace {

// The ops a pipeline part may use here: those with a cpu kernel (or views),
// and those with a cuda kernel when this process has a usable GPU.
std::vector<std::string> RunnableOps() {
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  const ops::DeviceRuntime* cuda = registry.runtime(ops::Backend::kCuda);
  const bool gpu = cuda != nullptr && cuda->CheckAvailable().ok();
  std::vector<std::string> names;
  for (const ops::OpSchema* op : registry.List()) {
    if (registry.Runs(op->name(), ops::Backend::kCpu) || (gpu && registry.Runs(op->name(), ops::Backend::kCuda))) {
      names.push_back(op->name());
    }
  }
  return names;
}

}  // namespace

WorkerImpl::WorkerImpl(WorkerOptions options) : options_(std::move(options)), ops_(RunnableOps()) {}

absl::StatusOr<std::unique_ptr<WorkerImpl>> WorkerImpl::Create(WorkerOptions options) {
  std::unique_ptr<WorkerImpl> worker(new WorkerImpl(std::move(options)));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(worker->options_.dispatcher, worker->options_.security));
  worker->dispatcher_ = ::sluice::Dispatcher::NewStub(channel);
  return worker;
}

absl::Status WorkerImpl::Heartbeat() {
  WorkerHeartbeatRequest request;
  request.set_worker_id(worker_id_.load());
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    address = address_;
  }
  request.set_address(address);
  request.set_active_streams(active_streams_.load());
  for (const std::string& op : ops_) request.add_ops(op);
  WorkerHeartbeatResponse response;
  SLUICE_RETURN_IF_ERROR(CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::WorkerHeartbeat,
                              "worker heartbeat", request, &response, options_.security.token));
  if (worker_id_.exchange(response.worker_id()) != response.worker_id()) {
    Log("worker", absl::StrCat("registered with dispatcher ", options_.dispatcher, " as worker ",
                               response.worker_id(), " at ", address));
  }
  return absl::OkStatus();
}

absl::StatusOr<ElementSpec> WorkerImpl::Describe(const DescribePipelineRequest& request) const {
  return DescribeElements(request.pipeline(), FromProto(request.limits()));
}

WorkerStatus WorkerImpl::Status() const {
  WorkerStatus out;
  out.set_worker_id(worker_id_.load());
  out.set_dispatcher(options_.dispatcher);
  out.set_active_streams(active_streams_.load());
  out.set_samples_sent(samples_sent_.load());
  out.set_bytes_sent(bytes_sent_.load());
  return out;
}

absl::StatusOr<std::shared_ptr<const exec::Pipeline>> WorkerImpl::GetPipeline(const std::string& id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = pipelines_.find(id);
    if (it != pipelines_.end()) return it->second;
  }
  GetPipelineRequest request;
  request.set_pipeline_id(id);
  GetPipelineResponse response;
  SLUICE_RETURN_IF_ERROR(CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::GetPipeline, "get pipeline",
                              request, &response, options_.security.token));
  PipelineDef def = response.pipeline();
  if (options_.threads > 0) def.mutable_options()->set_threads(options_.threads);
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  absl::MutexLock lock(&mu_);
  return pipelines_.emplace(id, std::move(pipeline)).first->second;
}

absl::StatusOr<GetSplitResponse> WorkerImpl::NextSplit(const StreamBatchesRequest& request,
                                                       const std::function<bool()>& cancelled) {
  GetSplitRequest ask;
  ask.set_job_id(request.job_id());
  ask.set_client_id(request.client_id());
  ask.set_epoch(request.epoch());
  ask.set_worker_id(worker_id_.load());
  const absl::Time give_up = absl::Now() + options_.dispatcher_grace;
  Backoff backoff(absl::Milliseconds(5), absl::Milliseconds(200));
  while (!cancelled()) {
    GetSplitResponse response;
    absl::Status s = CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::GetSplit, "get split", ask,
                          &response, options_.security.token);
    const bool retry = s.ok() ? response.state() == GetSplitResponse::WAIT
                              : absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
    if (!retry) {
      if (!s.ok()) return s;
      return response;
    }
    if (!s.ok() && absl::Now() > give_up) return s;
    backoff.Wait();
  }
  return absl::CancelledError("stream cancelled by the client");
}

absl::Status WorkerImpl::SendAll(exec::PipelineIterator* it, const StreamBatchesRequest& request,
                                 int64_t split, BatchMessage* header, const WriteFn& write,
                                 const std::function<bool()>& cancelled) {
  header->set_split(split);
  EncodeAhead encoded(it, *header, request.compression());
  header->clear_files();  // sent once per stream
  while (!cancelled()) {
    EncodeAhead::Encoded message;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(encoded.Next(&message, &end));
    if (end) return absl::OkStatus();
    const size_t bytes = message.bytes.Length();
    if (!write(&message.bytes)) return absl::CancelledError("the client went away");
    samples_sent_ += message.rows;
    bytes_sent_ += static_cast<int64_t>(bytes);
  }
  return absl::CancelledError("stream cancelled by the client");
}

absl::Status WorkerImpl::StreamBatches(const StreamBatchesRequest& request, const WriteFn& write,
                                       const std::function<bool()>& cancelled) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const exec::Pipeline> pipeline, GetPipeline(request.pipeline_id()));
  ++active_streams_;
  struct Done {
    std::atomic<int>* n;
    ~Done() { --*n; }
  } done{&active_streams_};
  BatchMessage message;
  const graph::CompiledNode& source = pipeline->compiled().nodes.front();
  for (const std::string& f : *source.format->files()) message.add_files(f);

  if (request.mode() == PARALLEL_EPOCHS) {
    std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(request.epoch());
    SLUICE_RETURN_IF_ERROR(SendAll(it.get(), request, -1, &message, write, cancelled));
  } else {
    const std::vector<io::Split> splits = pipeline->Splits();
    while (true) {
      SLUICE_ASSIGN_OR_RETURN(GetSplitResponse next, NextSplit(request, cancelled));
      if (next.state() == GetSplitResponse::END) break;
      if (next.split() < 0 || next.split() >= static_cast<int64_t>(splits.size())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the dispatcher handed out split ", next.split(), " of ", splits.size(),
            ": do the dispatcher and this worker see the same files?"));
      }
      std::unique_ptr<exec::PipelineIterator> it =
          pipeline->IterateSplits(request.epoch(), {splits[next.split()]});
      SLUICE_RETURN_IF_ERROR(SendAll(it.get(), request, next.split(), &message, write, cancelled));
      BatchMessage split_end;
      split_end.set_split(next.split());
      split_end.set_split_end(true);
      grpc::ByteBuffer marker = SerializeMessage(split_end);
      if (!write(&marker)) return absl::CancelledError("the client went away");
    }
  }
  BatchMessage epoch_end;
  epoch_end.set_split(-1);
  epoch_end.set_epoch_end(true);
  grpc::ByteBuffer marker = SerializeMessage(epoch_end);
  if (!write(&marker)) return absl::CancelledError("the client went away");
  return absl::OkStatus();
}

}  // namespace sluice::service
