#include "sluice/service/dispatcher_impl.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "service.grpc.pb.h"
#include "sluice/core/backoff.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/graph/fingerprint.h"
#include "sluice/graph/pin_files.h"
#include "sluice/ops/op_registry.h"
#include "sluice/service/channel.h"
#include "sluice/service/element_spec.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/log.h"
#include "sluice/service/unary_call.h"

namespace sluice::service {

absl::StatusOr<std::unique_ptr<DispatcherImpl>> DispatcherImpl::Create(const DispatcherOptions& options) {
  std::unique_ptr<DispatcherImpl> impl(new DispatcherImpl(options));
  if (options.work_dir.empty()) return impl;
  std::vector<JournalEntry> replay;
  std::string warning;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Journal> journal,
                          Journal::Open(options.work_dir, options.journal, &replay, &warning));
  if (!warning.empty()) Log("dispatcher", warning);
  absl::MutexLock lock(&impl->mu_);
  for (const JournalEntry& entry : replay) impl->state_.Apply(entry);
  impl->state_.Recovered(absl::Now());
  impl->journal_ = std::move(journal);
  impl->AfterChange();  // a journal past its size compacts now
  impl->Routine(absl::StrCat("journal ", impl->journal_->path(), ": replayed ", replay.size(), " entries"));
  return impl;
}

DispatcherImpl::DispatcherImpl(const DispatcherOptions& options)
    : work_dir_(options.work_dir),
      security_(options.security),
      worker_timeout_(options.timeouts.worker_timeout),
      limits_(options.limits),
      allow_python_(options.allow_python),
      routine_logging_(options.routine_logging),
      state_(options.timeouts, [this](const JournalEntry& entry) {
        return journal_ ? journal_->Append(entry).status() : absl::OkStatus();
      }) {}

void DispatcherImpl::Routine(absl::string_view message) const {
  if (routine_logging_) LogRoutine("dispatcher", message);
}

uint64_t DispatcherImpl::AfterChange() {
  if (journal_ == nullptr) return 0;
  if (journal_->wants_compaction()) {
    const uint64_t before = journal_->bytes();
    const absl::Status s = journal_->Compact(state_.Snapshot());
    Log("dispatcher", s.ok() ? absl::StrCat("compacted the journal ", journal_->path(), " from ", before, " to ",
                                            journal_->bytes(), " bytes")
                             : s.ToString());
  }
  return journal_->appended();
}

namespace {

// Why registering `def` needs a worker, when the dispatcher has its ops.
std::string WhyAWorkerChecksIt(const PipelineDef& def) {
  if (graph::RunsPython(def)) return "its Python code (a python op or a Python dataset) is checked on a worker";
  return "its maps on a device are checked on a worker";
}

}  // namespace

absl::StatusOr<ElementSpec> DispatcherImpl::DescribeOnAWorker(const PipelineDef& def,
                                                              const std::vector<std::string>& ops) {
  // A worker that refuses the call (killed, its heartbeats not yet timed
  // out) counts as lost for this decision: another capable one is asked.
  std::set<std::string> unreachable;
  while (true) {
    absl::StatusOr<std::string> capable = WaitForCapableWorker(ops, unreachable);
    if (absl::IsFailedPrecondition(capable.status())) {  // no live worker at all
      return absl::FailedPreconditionError(absl::StrCat(WhyAWorkerChecksIt(def), ": ", capable.status().message(),
                                                        "; a new one is waited for up to the worker timeout (",
                                                        absl::FormatDuration(worker_timeout_), "): start a worker"));
    }
    SLUICE_ASSIGN_OR_RETURN(const std::string address, capable);
    absl::StatusOr<ElementSpec> element = DescribeOn(address, def);
    // Away, not slow: a describe past its deadline (a slow import) is said as it is.
    if (element.ok() || absl::IsDeadlineExceeded(element.status()) || !ServerAway(element.status())) return element;
    Log("dispatcher", absl::StrCat("worker ", address,
                                   " refused to describe a pipeline, asking another: ", element.status().message()));
    unreachable.insert(address);
  }
}

absl::StatusOr<std::string> DispatcherImpl::WaitForCapableWorker(const std::vector<std::string>& ops,
                                                                 const std::set<std::string>& unreachable) {
  // Workers starting with the dispatcher may not have announced themselves
  // yet: while none is alive, wait for one as long as a silent worker
  // counts as alive. Live workers none of which has an op fail at once.
  const absl::Time give_up = absl::Now() + worker_timeout_;
  Backoff backoff(absl::Milliseconds(20), absl::Milliseconds(500));
  absl::StatusOr<std::string> address;
  while (true) {
    int workers;
    {
      absl::MutexLock lock(&mu_);
      address = state_.CapableWorker(ops, unreachable);
      workers = state_.workers();
    }
    if (address.ok() || workers > 0 || absl::Now() > give_up) break;
    backoff.Wait();
  }
  if (address.ok()) return address;
  if (!absl::IsInvalidArgument(address.status())) return address.status();  // no live worker at all
  std::vector<std::string> known;
  for (const ops::OpSchema* op : ops::OpRegistry::Global().List()) known.push_back(op->name());
  return absl::Status(address.status().code(),
                      absl::StrCat(address.status().message(), "; the dispatcher's ops: ", absl::StrJoin(known, ", ")));
}

absl::StatusOr<ElementSpec> DispatcherImpl::DescribeOn(const std::string& address, const PipelineDef& def) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, MakeChannel(address, security_));
  std::unique_ptr<::sluice::Worker::Stub> worker = ::sluice::Worker::NewStub(channel);
  DescribePipelineRequest request;
  *request.mutable_pipeline() = def;
  *request.mutable_limits() = ToProto(limits_);
  ElementSpec element;
  // Describing loads the pipeline's Python code in a fresh process (torch,
  // transformers: many seconds on a busy host) and lists its files: the
  // client's connect_timeout_s bounds the registration, not 10 s here.
  constexpr absl::Duration kDescribeTimeout = absl::Minutes(10);
  SLUICE_RETURN_IF_ERROR(CallUnary(worker.get(), &::sluice::Worker::Stub::DescribePipeline,
                                   absl::StrCat("describe the pipeline on worker ", address), request, &element,
                                   security_.token, kDescribeTimeout));
  return element;
}

absl::StatusOr<RegisterPipelineResponse> DispatcherImpl::RegisterPipeline(const RegisterPipelineRequest& request) {
  // Ops the dispatcher does not have (a plugin's) are compiled by a worker
  // that has them; without one, the registration fails now, naming the op,
  // rather than a job failing mid-epoch. So are maps on a device, which the
  // dispatcher need not have, and the user's Python code, which a worker
  // must be able to import (and the dispatcher need not). Compiling reads
  // file headers: outside the lock.
  // Pinned: the files the pattern or folder names now are the ones every
  // worker reads, whatever changes there later.
  if (!allow_python_ && graph::RunsPython(request.pipeline())) {
    return absl::PermissionDeniedError(
        "pipeline rejected: this dispatcher takes no Python code (--no-python), and the pipeline has a python op or "
        "a Python dataset: code its consumer sent, which the workers would run");
  }
  PipelineDef pinned = request.pipeline();
  if (absl::Status s = graph::PinFiles(&pinned); !s.ok()) return WithContext(s, "pipeline rejected");
  const std::vector<std::string> used = graph::OpsAWorkerNeeds(pinned);
  std::vector<std::string> missing;
  for (const std::string& op : used) {
    if (ops::OpRegistry::Global().Find(op) == nullptr) missing.push_back(op);
  }
  const bool on_a_worker = graph::UsesDevice(pinned) || graph::RunsPython(pinned);
  absl::StatusOr<ElementSpec> element = missing.empty() && !on_a_worker
                                            ? DescribeElements(pinned, limits_)
                                            : DescribeOnAWorker(pinned, on_a_worker ? used : missing);
  if (!element.ok()) return WithContext(element.status(), "pipeline rejected");
  SLUICE_ASSIGN_OR_RETURN(std::string id, Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                            return state_.RegisterPipeline(pinned, *element,
                                                           graph::DefinitionFingerprint(request.pipeline()));
                          }));
  RegisterPipelineResponse out;
  out.set_pipeline_id(id);
  *out.mutable_element() = *element;
  return out;
}

absl::StatusOr<GetOrCreateJobResponse> DispatcherImpl::GetOrCreateJob(const GetOrCreateJobRequest& request,
                                                                      const Caller& caller) {
  SLUICE_ASSIGN_OR_RETURN(GetOrCreateJobResponse out, Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                            return state_.GetOrCreateJob(request, caller.name, absl::Now());
                          }));
  Routine(absl::StrCat("client ", out.client_id(), " joined job ", out.job_id(), " (",
                       ProcessingMode_Name(request.mode()), ")"));
  return out;
}

absl::StatusOr<ClientHeartbeatResponse> DispatcherImpl::ClientHeartbeat(const ClientHeartbeatRequest& request,
                                                                        const Caller& caller) {
  absl::MutexLock lock(&mu_);
  SLUICE_RETURN_IF_ERROR(state_.CheckTenant(request.job_id(), caller));
  return state_.ClientHeartbeat(request, absl::Now());
}

absl::Status DispatcherImpl::ReportSplits(const ReportSplitsRequest& request, const Caller& caller) {
  return Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SLUICE_RETURN_IF_ERROR(state_.CheckTenant(request.job_id(), caller));
    return state_.ReportSplits(request, absl::Now());
  });
}

absl::Status DispatcherImpl::ReleaseClient(const ReleaseClientRequest& request, const Caller& caller) {
  return Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SLUICE_RETURN_IF_ERROR(state_.CheckTenant(request.job_id(), caller));
    return state_.ReleaseClient(request);
  });
}

absl::Status DispatcherImpl::ResumeClient(const ResumeClientRequest& request, const Caller& caller) {
  SLUICE_RETURN_IF_ERROR(Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SLUICE_RETURN_IF_ERROR(state_.CheckTenant(request.job_id(), caller));
    return state_.ResumeClient(request, absl::Now());
  }));
  Routine(absl::StrCat("client ", request.client_id(), " of job ", request.job_id(), " resumed epoch ", request.epoch(),
                       " from a saved state (", request.done_size(), " splits done, ", request.partial_size(),
                       " partly)"));
  return absl::OkStatus();
}

absl::StatusOr<WorkerHeartbeatResponse> DispatcherImpl::WorkerHeartbeat(const WorkerHeartbeatRequest& request) {
  SLUICE_ASSIGN_OR_RETURN(WorkerHeartbeatResponse out, Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                            return state_.WorkerHeartbeat(request, absl::Now());
                          }));
  if (out.worker_id() != request.worker_id()) {
    Routine(absl::StrCat("worker ", out.worker_id(), " joined at ", request.address(),
                         request.worker_id() > 0
                             ? absl::StrCat(" (it was ", request.worker_id(), " for a dispatcher that kept no journal)")
                             : ""));
  }
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
  return Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.GetSplit(request, absl::Now()); });
}

DispatcherStatus DispatcherImpl::Status(const Caller& caller) {
  absl::MutexLock lock(&mu_);
  DispatcherStatus out = state_.Status(absl::Now(), caller);
  out.set_work_dir(work_dir_);
  if (journal_ != nullptr) out.set_journal_bytes(static_cast<int64_t>(journal_->bytes()));
  return out;
}

absl::Status DispatcherImpl::Expire(absl::Time now) {
  const absl::Status expired = Durably([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // Twice the period and a second: a busy machine's late call is no stall.
    const absl::Duration gap = now - last_expire_;
    if (last_expire_ != absl::InfinitePast() && gap > 2 * kExpireEvery + absl::Seconds(1)) {
      state_.ForgiveStall(gap, now);
    }
    last_expire_ = now;
    return state_.Expire(now);
  });
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    lost = state_.TakeDropped();
  }
  for (const std::string& line : lost) Log("dispatcher", line);
  return expired;
}

}  // namespace sluice::service
