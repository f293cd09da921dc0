#include "sluice/service/dispatcher_impl.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/service/log.h"

namespace sluice::service {

absl::StatusOr<ElementSpec> DescribeElements(const PipelineDef& def) {
  SLUICE_ASSIGN_OR_RETURN(const int distribute, graph::FindDistribute(def));
  if (distribute >= 0) {
    return absl::InvalidArgumentError("register the nodes before the distribute node, not the whole pipeline");
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  ElementSpec out;
  for (const ColumnSpec& c : pipeline->output_schema().columns()) {
    ColumnSpecProto* p = out.add_columns();
    p->set_name(c.name);
    p->set_dtype(std::string(DTypeName(c.dtype)));
    for (int64_t d : c.shape.dims()) p->add_shape(d);
    p->set_ragged(c.ragged);
  }
  out.set_batched(pipeline->batched());
  for (const graph::CompiledNode& node : pipeline->compiled().nodes) {
    if (node.kind == graph::NodeKind::kBatch) {
      out.set_batch_size(node.count);
      out.set_drop_remainder(node.drop_remainder);
    }
  }
  out.set_cardinality(pipeline->Cardinality());
  out.set_num_splits(static_cast<int64_t>(pipeline->Splits().size()));
  return out;
}

absl::StatusOr<std::unique_ptr<DispatcherImpl>> DispatcherImpl::Create(
    const std::string& work_dir, DispatcherState::Options options) {
  std::unique_ptr<DispatcherImpl> impl(new DispatcherImpl(work_dir, options));
  if (work_dir.empty()) return impl;
  std::vector<JournalEntry> replay;
  std::string warning;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Journal> journal, Journal::Open(work_dir, &replay, &warning));
  if (!warning.empty()) Log("dispatcher", warning);
  absl::MutexLock lock(&impl->mu_);
  for (const JournalEntry& entry : replay) impl->state_.Apply(entry);
  impl->journal_ = std::move(journal);
  Log("dispatcher", absl::StrCat("journal ", impl->journal_->path(), ": replayed ", replay.size(), " entries"));
  return impl;
}

DispatcherImpl::DispatcherImpl(std::string work_dir, DispatcherState::Options options)
    : work_dir_(std::move(work_dir)),
      state_(options, [this](const JournalEntry& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return journal_ ? journal_->Append(entry) : absl::OkStatus();
      }) {}

absl::StatusOr<RegisterPipelineResponse> DispatcherImpl::RegisterPipeline(
    const RegisterPipelineRequest& request) {
  // Compiling reads file headers: outside the lock.
  absl::StatusOr<ElementSpec> element = DescribeElements(request.pipeline());
  if (!element.ok()) return WithContext(element.status(), "pipeline rejected");
  absl::MutexLock lock(&mu_);
  SLUICE_ASSIGN_OR_RETURN(std::string id, state_.RegisterPipeline(request.pipeline(), *element));
  RegisterPipelineResponse out;
  out.set_pipeline_id(id);
  *out.mutable_element() = *element;
  return out;
}

absl::StatusOr<GetOrCreateJobResponse> DispatcherImpl::GetOrCreateJob(const GetOrCreateJobRequest& request) {
  absl::MutexLock lock(&mu_);
  SLUICE_ASSIGN_OR_RETURN(GetOrCreateJobResponse out, state_.GetOrCreateJob(request, absl::Now()));
  Log("dispatcher", absl::StrCat("client ", out.client_id(), " joined job ", out.job_id(), " (",
                                 ProcessingMode_Name(request.mode()), ")"));
  return out;
}

absl::StatusOr<ClientHeartbeatResponse> DispatcherImpl::ClientHeartbeat(const ClientHeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  return state_.ClientHeartbeat(request, absl::Now());
}

absl::Status DispatcherImpl::ReportSplits(const ReportSplitsRequest& request) {
  absl::MutexLock lock(&mu_);
  return state_.ReportSplits(request, absl::Now());
}

absl::Status DispatcherImpl::ReleaseClient(const ReleaseClientRequest& request) {
  absl::MutexLock lock(&mu_);
  return state_.ReleaseClient(request);
}

WorkerHeartbeatResponse DispatcherImpl::WorkerHeartbeat(const WorkerHeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  const bool known = request.worker_id() > 0;
  WorkerHeartbeatResponse out = state_.WorkerHeartbeat(request, absl::Now());
  if (!known) Log("dispatcher", absl::StrCat("worker ", out.worker_id(), " joined at ", request.address()));
  return out;
}

absl::StatusOr<GetPipelineResponse> DispatcherImpl::GetPipeline(const GetPipelineRequest& request) {
  absl::MutexLock lock(&mu_);
  const PipelineDef* def = state_.FindPipelineDef(request.pipeline_id());
  if (def == nullptr) return absl::NotFoundError(absl::StrCat("no pipeline ", request.pipeline_id()));
  GetPipelineResponse out;
  *out.mutable_pipeline() = *def;
  return out;
}

absl::StatusOr<GetSplitResponse> DispatcherImpl::GetSplit(const GetSplitRequest& request) {
  absl::MutexLock lock(&mu_);
  return state_.GetSplit(request, absl::Now());
}

DispatcherStatus DispatcherImpl::Status() {
  absl::MutexLock lock(&mu_);
  DispatcherStatus out = state_.Status(absl::Now());
  out.set_work_dir(work_dir_);
  return out;
}

absl::Status DispatcherImpl::Expire() {
  absl::MutexLock lock(&mu_);
  return state_.Expire(absl::Now());
}

}  // namespace sluice::service
