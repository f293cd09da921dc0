#include "sluice/service/dispatcher_state.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sluice/core/heap_reuse.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/graph/fingerprint.h"
#include "sluice/ops/op_registry.h"
#include "sluice/service/autoscale.h"
#include "sluice/service/element_spec.h"

namespace sluice::service {
namespace {

// The job and client a resumed state was saved in, as Job::continued keys
// them.
std::string SavedIn(const ResumeClientRequest& r) {
  return absl::StrCat(r.previous_job_uid(), "/", r.previous_client_id());
}

// 128 random bits as 32 hex digits.
std::string RandomHex() {
  absl::BitGen random;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(random), absl::Uniform<uint64_t>(random));
}

}  // namespace

DispatcherState::DispatcherState(Options options, JournalFn journal)
    : options_(options), journal_(std::move(journal)) {}

absl::Status DispatcherState::Journaled(const JournalEntry& entry) {
  if (journal_) SLUICE_RETURN_IF_ERROR(journal_(entry));
  Apply(entry);
  return absl::OkStatus();
}

void DispatcherState::Apply(const JournalEntry& entry) {
  switch (entry.entry_case()) {
    case JournalEntry::kRegisterPipeline:
      return ApplyRegisterPipeline(entry.register_pipeline());
    case JournalEntry::kCreateJob:
      return ApplyCreateJob(entry.create_job());
    case JournalEntry::kAddClient:
      return ApplyAddClient(entry.add_client());
    case JournalEntry::kReleaseClient:
      return ApplyReleaseClient(entry.release_client());
    case JournalEntry::kSplitsCompleted:
      return ApplySplitsCompleted(entry.splits_completed());
    case JournalEntry::kResumeClient:
      return ApplyResumeClient(entry.resume_client());
    case JournalEntry::kLineage:
      return ApplyLineage(entry.lineage());
    case JournalEntry::kSplitAssigned:
      return ApplySplitAssigned(entry.split_assigned());
    case JournalEntry::kAddWorker:
      worker_secrets_[entry.add_worker().worker_id()] = entry.add_worker().secret();
      next_id_ = std::max(next_id_, entry.add_worker().worker_id() + 1);
      return;
    case JournalEntry::kNextId:
      next_id_ = std::max(next_id_, entry.next_id());
      return;
    case JournalEntry::ENTRY_NOT_SET:
      return;
  }
}

void DispatcherState::ApplyRegisterPipeline(const JournalPipeline& r) {
  const std::string id = graph::Fingerprint(r.pipeline());
  Pipeline& p = pipelines_[id];
  p.def = r.pipeline();
  p.info.set_pipeline_id(id);
  *p.info.mutable_element() = r.element();
  p.ops = graph::OpsAWorkerNeeds(p.def);
  p.last_used = absl::Now();
  p.origin_id = r.origin_id().empty() ? id : r.origin_id();
}

void DispatcherState::ApplyCreateJob(const JournalJob& j) {
  jobs_[j.job_id()].def = j;
  if (!j.job_name().empty()) named_jobs_[{j.tenant(), j.job_name()}] = j.job_id();
  next_id_ = std::max(next_id_, j.job_id() + 1);
}

void DispatcherState::ApplyAddClient(const JournalClient& c) {
  auto job = jobs_.find(c.job_id());
  if (job == jobs_.end()) return;
  job->second.clients.insert(c.client_id());
  clients_[c.client_id()].job_id = c.job_id();
  next_id_ = std::max(next_id_, c.client_id() + 1);
}

void DispatcherState::ApplyReleaseClient(const ReleaseClientRequest& r) {
  auto job = jobs_.find(r.job_id());
  if (job != jobs_.end()) {
    job->second.clients.erase(r.client_id());
    for (auto& [epoch, splits] : job->second.epochs) splits.ClientLost(r.client_id());
    // A job no one reads is over: a consumer giving its name later starts
    // a new one.
    if (job->second.clients.empty()) {
      auto named = named_jobs_.find({job->second.def.tenant(), job->second.def.job_name()});
      if (named != named_jobs_.end() && named->second == job->first) named_jobs_.erase(named);
      jobs_.erase(job);
    }
  }
  clients_.erase(r.client_id());
}

void DispatcherState::ApplySplitsCompleted(const ReportSplitsRequest& r) {
  auto job = jobs_.find(r.job_id());
  if (job == jobs_.end()) return;
  EpochSplits& splits = Epoch(job->second, r.epoch());
  for (int64_t s : r.completed()) splits.Complete(s, r.client_id());
  if (r.left_epoch()) splits.ClientLeft(r.client_id());
}

void DispatcherState::ApplyResumeClient(const ResumeClientRequest& r) {
  auto job = jobs_.find(r.job_id());
  if (job == jobs_.end()) return;
  const std::vector<int64_t> done(r.done().begin(), r.done().end());
  std::vector<EpochSplits::Partial> partial;
  for (int i = 0; i < r.partial_size(); ++i) {
    partial.push_back({r.partial(i), i < r.partial_from_size() ? r.partial_from(i) : 0});
  }
  Job& j = job->second;
  const int64_t root = r.previous_client_id() >= 0 ? j.Root(r.previous_client_id()) : r.client_id();
  if (!r.saved_in().empty() && r.previous_job_uid() != j.def.job_uid()) j.continued.emplace(r.saved_in(), root);
  std::vector<int64_t> consumer = {root, r.client_id()};
  for (const auto& [client, first] : j.lineage) {
    if (first == root) consumer.push_back(client);
  }
  j.lineage[r.client_id()] = root;
  Epoch(j, r.epoch()).Resume(r.client_id(), consumer, done, partial);
  // Epochs the consumer had gone on to: all of it runs again.
  for (auto& [epoch, splits] : j.epochs) {
    if (epoch > r.epoch()) splits.Resume(r.client_id(), consumer, {}, {});
  }
}

void DispatcherState::ApplyLineage(const JournalClient& l) {
  auto job = jobs_.find(l.job_id());
  if (job == jobs_.end()) return;
  if (!l.continues().empty()) {
    job->second.continued[l.continues()] = l.root();
  } else {
    job->second.lineage[l.client_id()] = l.root();
  }
}

void DispatcherState::ApplySplitAssigned(const JournalSplit& a) {
  // A replayed assignment has no live worker: it counts as abandoned, so
  // the split re-runs for the client that may hold part of it.
  auto job = jobs_.find(a.job_id());
  if (job == jobs_.end()) return;
  EpochSplits& splits = Epoch(job->second, a.epoch());
  splits.Assign(a.split(), a.client_id(), -1);
  splits.Abandon(a.split(), a.client_id(), /*why=*/"");
}

void DispatcherState::Recovered(absl::Time now) {
  for (auto& [id, client] : clients_) client.last_seen = now;
  for (auto& [id, pipeline] : pipelines_) pipeline.last_used = now;
}

absl::StatusOr<std::string> DispatcherState::RegisterPipeline(const PipelineDef& def, const ElementSpec& element,
                                                              const std::string& origin_id) {
  const std::string id = graph::Fingerprint(def);
  if (pipelines_.count(id) == 0) {
    JournalEntry entry;
    *entry.mutable_register_pipeline()->mutable_pipeline() = def;
    *entry.mutable_register_pipeline()->mutable_element() = element;
    entry.mutable_register_pipeline()->set_origin_id(origin_id);
    SLUICE_RETURN_IF_ERROR(Journaled(entry));
  }
  pipelines_[id].last_used = absl::Now();
  return id;
}

const RegisterPipelineResponse* DispatcherState::FindPipeline(const std::string& id) const {
  auto it = pipelines_.find(id);
  return it == pipelines_.end() ? nullptr : &it->second.info;
}

const PipelineDef* DispatcherState::FindPipelineDef(const std::string& id) const {
  auto it = pipelines_.find(id);
  return it == pipelines_.end() ? nullptr : &it->second.def;
}

absl::Status DispatcherState::CheckTenant(int64_t job_id, const Caller& caller) const {
  auto job = jobs_.find(job_id);
  if (caller.admin() || job == jobs_.end() || job->second.def.tenant() == caller.name) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("job ", job_id, " is not tenant '", caller.name, "''s: a client sees only its tenant's jobs"));
}

absl::StatusOr<GetOrCreateJobResponse> DispatcherState::GetOrCreateJob(const GetOrCreateJobRequest& request,
                                                                       const std::string& tenant, absl::Time now) {
  if (pipelines_.count(request.pipeline_id()) == 0) {
    return absl::NotFoundError(absl::StrCat("no pipeline ", request.pipeline_id(), " is registered"));
  }
  const ProcessingMode mode = request.mode() == PROCESSING_MODE_UNSET ? DISTRIBUTED_EPOCH : request.mode();
  int64_t job_id = 0;
  auto named = request.job_name().empty() ? named_jobs_.end() : named_jobs_.find({tenant, request.job_name()});
  if (named != named_jobs_.end()) {
    const JournalJob& existing = jobs_[named->second].def;
    // Consumers that registered the same definition at different times may
    // hold different pins of it: they join the job's.
    auto job_pipeline = pipelines_.find(existing.pipeline_id());
    const bool same = job_pipeline != pipelines_.end() &&
                      job_pipeline->second.origin_id == pipelines_[request.pipeline_id()].origin_id;
    if (!same || existing.mode() != mode) {
      const std::string differs =
          !same ? absl::StrCat("another pipeline (", existing.pipeline_id(), "; this one is ", request.pipeline_id(),
                               ": a change to the source, an op, an attr or the seed)")
                : absl::StrCat("mode ", ProcessingMode_Name(existing.mode()), " (this one asks for ",
                               ProcessingMode_Name(mode), ")");
      return absl::InvalidArgumentError(
          absl::StrCat("job '", request.job_name(), "' exists with ", differs, "; name a new job"));
    }
    job_id = named->second;
  } else {
    JournalEntry entry;
    JournalJob* job = entry.mutable_create_job();
    job->set_job_id(next_id_);
    job->set_pipeline_id(request.pipeline_id());
    job->set_mode(mode);
    job->set_job_name(request.job_name());
    job->set_tenant(tenant);
    job->set_job_uid(RandomHex());
    SLUICE_RETURN_IF_ERROR(Journaled(entry));
    job_id = job->job_id();
  }
  JournalEntry entry;
  entry.mutable_add_client()->set_job_id(job_id);
  entry.mutable_add_client()->set_client_id(next_id_);
  SLUICE_RETURN_IF_ERROR(Journaled(entry));
  Client& client = clients_[entry.add_client().client_id()];
  client.last_seen = now;
  for (const auto& [epoch, splits] : jobs_[job_id].epochs) {
    if (splits.done()) client.finished_before_join.insert(epoch);
  }
  GetOrCreateJobResponse out;
  out.set_job_id(job_id);
  out.set_client_id(entry.add_client().client_id());
  out.set_pipeline_id(jobs_[job_id].def.pipeline_id());
  out.set_job_uid(jobs_[job_id].def.job_uid());
  *out.mutable_element() = pipelines_[out.pipeline_id()].info.element();
  return out;
}

absl::StatusOr<DispatcherState::Client*> DispatcherState::FindClient(int64_t job_id, int64_t client_id,
                                                                     absl::Time now) {
  SLUICE_ASSIGN_OR_RETURN(Client * client, LookUpClient(job_id, client_id));
  client->last_seen = now;
  return client;
}

absl::StatusOr<DispatcherState::Client*> DispatcherState::LookUpClient(int64_t job_id, int64_t client_id) {
  auto it = clients_.find(client_id);
  if (it == clients_.end() || it->second.job_id != job_id) {
    return absl::NotFoundError(
        absl::StrCat("client ", client_id, " of job ", job_id,
                     " is unknown to the dispatcher (released; silent longer than its --client-timeout; or the "
                     "dispatcher restarted without its --work-dir journal): the epoch cannot go on exactly once"));
  }
  return &it->second;
}

absl::StatusOr<ClientHeartbeatResponse> DispatcherState::ClientHeartbeat(const ClientHeartbeatRequest& request,
                                                                         absl::Time now) {
  SLUICE_ASSIGN_OR_RETURN(Client * client, FindClient(request.job_id(), request.client_id(), now));
  client->epoch = request.epoch();
  client->samples_per_s = request.samples_per_s();
  client->wait_share = request.wait_share();
  // Only workers that have every op of the job's pipeline serve it.
  const std::vector<std::string>& ops = pipelines_[jobs_[request.job_id()].def.pipeline_id()].ops;
  ClientHeartbeatResponse out;
  for (uint64_t stream : std::exchange(client->expired_streams, {})) out.add_expired_streams(stream);
  for (const auto& [id, worker] : workers_) {
    if (!worker.Runs(ops)) continue;
    TaskInfo* task = out.add_tasks();
    task->set_worker_id(id);
    task->set_worker_address(worker.address);
    task->set_worker_cores(worker.cores);
  }
  return out;
}

absl::Status DispatcherState::ReportSplits(const ReportSplitsRequest& request, absl::Time now) {
  SLUICE_RETURN_IF_ERROR(FindClient(request.job_id(), request.client_id(), now).status());
  EpochSplits& held = Epoch(jobs_[request.job_id()], request.epoch());
  for (int64_t s : request.completed()) {
    if (!held.MayComplete(s, request.client_id())) {
      return absl::PermissionDeniedError(absl::StrCat("client ", request.client_id(), " reported split ", s, " of job ",
                                                      request.job_id(), " epoch ", request.epoch(),
                                                      " finished, but it was not handed to that client"));
    }
  }
  if (request.completed_size() > 0 || request.left_epoch()) {
    JournalEntry entry;
    *entry.mutable_splits_completed() = request;
    entry.mutable_splits_completed()->clear_abandoned();
    entry.mutable_splits_completed()->clear_dropped_streams();
    entry.mutable_splits_completed()->clear_broken_streams();
    entry.mutable_splits_completed()->clear_broken_why();
    SLUICE_RETURN_IF_ERROR(Journaled(entry));
  }
  EpochSplits& splits = Epoch(jobs_[request.job_id()], request.epoch());
  const std::string why = request.broken_why().empty() ? std::string("its stream broke")
                                                       : absl::StrCat("its stream broke: ", request.broken_why());
  for (int64_t s : request.abandoned()) splits.Abandon(s, request.client_id(), why);
  CountErrors("stream_broke", request.abandoned_size());
  // After the abandoned ones, which count their failure once.
  for (uint64_t stream : request.dropped_streams()) splits.StreamEnded(stream, request.client_id(), /*why=*/"");
  for (uint64_t stream : request.broken_streams()) splits.StreamEnded(stream, request.client_id(), why);
  return absl::OkStatus();
}

absl::Status DispatcherState::ResumeClient(const ResumeClientRequest& request, absl::Time now) {
  SLUICE_ASSIGN_OR_RETURN(Client * client, FindClient(request.job_id(), request.client_id(), now));
  Job& job = jobs_[request.job_id()];
  if (job.def.mode() != DISTRIBUTED_EPOCH) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.def.job_id(),
                                                      " is not distributed_epoch: "
                                                      "only a distributed_epoch job's progress can be resumed"));
  }
  const int64_t splits = pipelines_[job.def.pipeline_id()].info.element().num_splits();
  for (const auto* list : {&request.done(), &request.partial()}) {
    for (int64_t s : *list) {
      if (s < 0 || s >= splits) {
        return absl::InvalidArgumentError(absl::StrCat("the resumed state names split ", s, " but job ",
                                                       job.def.job_id(), "'s pipeline has ", splits, " splits"));
      }
    }
  }
  JournalEntry entry;
  ResumeClientRequest* resume = entry.mutable_resume_client();
  *resume = request;
  // Only the same job's earlier client (ids restart with a dispatcher that
  // kept no journal) gives up its splits.
  const bool same_job = !request.previous_job_uid().empty() && request.previous_job_uid() == job.def.job_uid();
  int64_t previous =
      same_job && request.previous_client_id() != request.client_id() ? request.previous_client_id() : -1;
  // A state of an ended job resumed here before: what its consumer did
  // since runs again, as in the job it was saved in.
  if (const auto resumed = job.continued.find(SavedIn(request)); !same_job && resumed != job.continued.end()) {
    previous = resumed->second;
  }
  resume->set_previous_client_id(previous);
  if (!request.previous_job_uid().empty()) resume->set_saved_in(SavedIn(request));
  // The consumer's earlier clients are gone (killed) even if their
  // heartbeats have not timed out yet.
  if (previous >= 0) {
    const int64_t root = job.Root(previous);
    std::vector<int64_t> earlier;
    for (int64_t c : job.clients) {
      if (c != request.client_id() && job.Root(c) == root) earlier.push_back(c);
    }
    for (int64_t c : earlier) {
      ReleaseClientRequest release;
      release.set_job_id(request.job_id());
      release.set_client_id(c);
      SLUICE_RETURN_IF_ERROR(ReleaseClient(release));
    }
  }
  SLUICE_RETURN_IF_ERROR(Journaled(entry));
  auto& before = client->finished_before_join;
  before.erase(before.lower_bound(request.epoch()), before.end());
  return absl::OkStatus();
}

absl::Status DispatcherState::ReleaseClient(const ReleaseClientRequest& request) {
  if (clients_.count(request.client_id()) == 0) return absl::OkStatus();
  JournalEntry entry;
  *entry.mutable_release_client() = request;
  return Journaled(entry);
}

absl::StatusOr<WorkerHeartbeatResponse> DispatcherState::WorkerHeartbeat(const WorkerHeartbeatRequest& request,
                                                                         absl::Time now) {
  int64_t id = request.worker_id();
  auto known = worker_secrets_.find(id);
  if (known == worker_secrets_.end() && request.leaving()) return WorkerHeartbeatResponse();  // never joined
  if (known == worker_secrets_.end()) {  // new, or from a dispatcher that kept no journal
    JournalEntry entry;
    JournalWorker* added = entry.mutable_add_worker();
    added->set_worker_id(next_id_);
    added->set_address(request.address());
    added->set_secret(RandomHex());
    SLUICE_RETURN_IF_ERROR(Journaled(entry));
    id = added->worker_id();
  } else if (known->second != request.secret()) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker id ", id,
                     " is another worker's: only the worker this dispatcher gave it to (with its secret) keeps "
                     "it; ",
                     request.address(), " asked with ", request.secret().empty() ? "no secret" : "a wrong secret"));
  }
  if (left_workers_.count(id) > 0) {  // a heartbeat overtaken by the worker's leave
    WorkerHeartbeatResponse out;
    out.set_worker_id(id);
    out.set_secret(worker_secrets_[id]);
    return out;
  }
  if (request.leaving()) {
    left_workers_.insert(id);
    workers_.erase(id);
    for (auto& [job_id, job] : jobs_) {
      for (auto& [epoch, splits] : job.epochs) splits.WorkerLost(id, /*count_failure=*/false);
    }
    WorkerHeartbeatResponse out;
    out.set_worker_id(id);
    return out;
  }
  Worker& worker = workers_[id];
  worker.address = request.address();
  worker.last_seen = now;
  worker.active_streams = request.active_streams();
  worker.cores = request.cores();
  worker.samples_per_s = request.samples_per_s();
  worker.ops = std::set<std::string>(request.ops().begin(), request.ops().end());
  const auto epoch_of = [this](const JournalSplit& s) -> EpochSplits* {
    auto job = jobs_.find(s.job_id());
    if (job == jobs_.end()) return nullptr;
    auto splits = job->second.epochs.find(s.epoch());
    return splits == job->second.epochs.end() ? nullptr : &splits->second;
  };
  for (int i = 0; i < request.running_size(); ++i) {
    const JournalSplit& running = request.running(i);
    const int64_t batches = i < request.running_batches_size() ? request.running_batches(i) : 0;
    const bool waits = i < request.running_waits_for_client_size() && request.running_waits_for_client(i);
    if (EpochSplits* splits = epoch_of(running)) {
      splits->Renew(running.split(), running.client_id(), id, batches, waits, now);
    }
  }
  for (const JournalSplit& dropped : request.dropped()) {
    if (EpochSplits* splits = epoch_of(dropped)) {
      splits->Dropped(dropped.split(), dropped.client_id(), id, dropped.stream_id());
    }
  }
  for (const JournalSplit& sent : request.sent()) {
    if (EpochSplits* splits = epoch_of(sent)) splits->Sent(sent.split(), sent.client_id(), id);
  }
  WorkerHeartbeatResponse out;
  out.set_worker_id(id);
  out.set_secret(worker_secrets_[id]);
  return out;
}

absl::StatusOr<std::string> DispatcherState::CapableWorker(const std::vector<std::string>& ops,
                                                           const std::set<std::string>& unreachable) const {
  auto reachable = [&](const Worker& w) { return unreachable.count(w.address) == 0; };
  const std::string lost =
      unreachable.empty() ? "" : absl::StrCat(", ", unreachable.size(), " of them refusing connections");
  for (const std::string& op : ops) {
    if (ops::OpRegistry::Global().Find(op) != nullptr) continue;  // any worker has it; checked below
    const bool anyone = std::any_of(workers_.begin(), workers_.end(),
                                    [&](const auto& w) { return reachable(w.second) && w.second.ops.count(op) > 0; });
    if (!anyone) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "' is not registered on the dispatcher and no live worker has it (", workers_.size(),
                       " workers", lost, "; start workers with --plugin <the .so that registers it>)"));
    }
  }
  if (std::none_of(workers_.begin(), workers_.end(), [&](const auto& w) { return reachable(w.second); })) {
    return absl::FailedPreconditionError(absl::StrCat("no live worker (", workers_.size(), " workers", lost, ")"));
  }
  for (const auto& [id, worker] : workers_) {
    if (reachable(worker) && worker.Runs(ops)) return worker.address;
  }
  if (std::any_of(ops.begin(), ops.end(), graph::IsPythonOp) &&
      std::none_of(workers_.begin(), workers_.end(), [&](const auto& w) { return w.second.ops.count("python") > 0; })) {
    return absl::InvalidArgumentError(absl::StrCat("the pipeline runs Python code and no live worker does (",
                                                   workers_.size(), " workers", lost,
                                                   ", started with --no-python); start workers without it"));
  }
  return absl::InvalidArgumentError(absl::StrCat("no live worker has all of the pipeline's ops (", workers_.size(),
                                                 " workers", lost, "); give every worker the same plugins"));
}

EpochSplits& DispatcherState::Epoch(Job& job, uint64_t epoch) {
  auto it = job.epochs.find(epoch);
  if (it != job.epochs.end()) return it->second;
  const Pipeline& pipeline = pipelines_[job.def.pipeline_id()];
  std::vector<int64_t> order = EpochSplitIndices(pipeline.info.element(), pipeline.def, epoch);
  return job.epochs.emplace(epoch, EpochSplits(std::move(order), options_.splits)).first->second;
}

absl::StatusOr<GetSplitResponse> DispatcherState::GetSplit(const GetSplitRequest& request, absl::Time now) {
  SLUICE_ASSIGN_OR_RETURN(Client * client, LookUpClient(request.job_id(), request.client_id()));
  Job& job = jobs_[request.job_id()];
  if (job.def.mode() != DISTRIBUTED_EPOCH) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.def.job_id(), " is not distributed_epoch"));
  }
  auto worker = workers_.find(request.worker_id());
  if (worker != workers_.end() && !worker->second.Runs(pipelines_[job.def.pipeline_id()].ops)) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", request.worker_id(), " lacks ops of job ",
                                                      job.def.job_id(), "'s pipeline: it gets none of its splits"));
  }
  const bool forgotten = job.forgotten.count(request.epoch()) > 0;
  EpochSplits::Ask ask{request.client_id(), request.worker_id(), request.stream_id(), request.seq(), now};
  GetSplitResponse out = forgotten ? GetSplitResponse() : Epoch(job, request.epoch()).Next(ask);
  if (forgotten || (out.state() == GetSplitResponse::END && client->finished_before_join.count(request.epoch()) > 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.def.job_id(), job.def.job_name().empty() ? "" : " ('" + job.def.job_name() + "')",
        " had finished epoch ", request.epoch(), " before client ", request.client_id(),
        " joined it: its samples went to the job's other consumers; read a later epoch, or give a new job name"));
  }
  if (out.state() == GetSplitResponse::FAILED) {
    CountErrors("split_failed", 1);
    const PipelineDef& def = pipelines_[job.def.pipeline_id()].def;
    out.set_skip(def.nodes_size() > 0 && def.nodes(0).source().on_corrupt() == "skip");
  }
  if (out.state() == GetSplitResponse::SPLIT || out.state() == GetSplitResponse::FAILED) {
    JournalEntry entry;
    JournalSplit* a = entry.mutable_split_assigned();
    a->set_job_id(request.job_id());
    a->set_client_id(request.client_id());
    a->set_epoch(request.epoch());
    a->set_split(out.split());
    // Journaled, not applied: Apply would treat it as a replayed assignment.
    if (journal_) SLUICE_RETURN_IF_ERROR(journal_(entry));
  }
  return out;
}

std::vector<std::string> DispatcherState::TakeDropped() { return std::exchange(dropped_, {}); }

void DispatcherState::ForgiveStall(absl::Duration stalled, absl::Time now) {
  for (auto& [id, worker] : workers_) worker.last_seen = std::min(now, worker.last_seen + stalled);
  for (auto& [id, client] : clients_) client.last_seen = std::min(now, client.last_seen + stalled);
  for (auto& [id, job] : jobs_) {
    for (auto& [epoch, splits] : job.epochs) splits.ExtendLeases(stalled);
  }
  dropped_.push_back(
      absl::StrCat("did not run for ", absl::FormatDuration(absl::Trunc(stalled, absl::Milliseconds(100))),
                   " (stopped, or its machine paused): no worker or client counts as silent for that time"));
}

absl::Status DispatcherState::Expire(absl::Time now) {
  for (auto& [id, job] : jobs_) {
    for (auto& [epoch, splits] : job.epochs) {
      const std::vector<EpochSplits::ExpiredStream> expired = splits.ExpireLeases(now);
      CountErrors("lease_expired", static_cast<int>(expired.size()));
      for (const EpochSplits::ExpiredStream& e : expired) {
        dropped_.push_back(absl::StrCat("split ", e.split, " of job ", id, ", epoch ", epoch, " (client ", e.client,
                                        ") made no progress on worker ", e.worker,
                                        " for its --split-lease: it runs "
                                        "again, and the client drops the stream"));
        auto client = clients_.find(e.client);
        if (client != clients_.end() && e.stream != 0) client->second.expired_streams.push_back(e.stream);
      }
    }
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now - it->second.last_seen <= options_.worker_timeout) {
      ++it;
      continue;
    }
    for (auto& [id, job] : jobs_) {
      for (auto& [epoch, splits] : job.epochs) splits.WorkerLost(it->first);
    }
    CountErrors("worker_lost", 1);
    dropped_.push_back(
        absl::StrCat("worker ", it->first, " at ", it->second.address, " lost: silent for ",
                     absl::FormatDuration(absl::Trunc(now - it->second.last_seen, absl::Milliseconds(100))),
                     "; its splits go to other workers"));
    it = workers_.erase(it);
  }
  std::vector<ReleaseClientRequest> silent;
  for (const auto& [id, client] : clients_) {
    if (now - client.last_seen > options_.client_timeout) {
      silent.emplace_back();
      silent.back().set_job_id(client.job_id);
      silent.back().set_client_id(id);
      dropped_.push_back(
          absl::StrCat("client ", id, " of job ", client.job_id, " dropped: silent for ",
                       absl::FormatDuration(absl::Trunc(now - client.last_seen, absl::Milliseconds(100))),
                       " (--client-timeout); its unfinished splits go to the job's other consumers"));
    }
  }
  for (const ReleaseClientRequest& r : silent) {
    SLUICE_RETURN_IF_ERROR(ReleaseClient(r));
    CountErrors("client_dropped", 1);
  }
  CollectGarbage(now);
  return absl::OkStatus();
}

void DispatcherState::CollectGarbage(absl::Time now) {
  for (auto& [id, job] : jobs_) {
    auto pipeline = pipelines_.find(job.def.pipeline_id());
    if (pipeline != pipelines_.end()) pipeline->second.last_used = now;
    uint64_t oldest = UINT64_MAX;
    for (int64_t c : job.clients) {
      auto client = clients_.find(c);
      if (client != clients_.end()) oldest = std::min(oldest, client->second.epoch);
    }
    for (auto epoch = job.epochs.begin(); epoch != job.epochs.end() && epoch->first < oldest;) {
      if (!epoch->second.done()) {
        ++epoch;
        continue;
      }
      job.forgotten.insert(epoch->first);
      epoch = job.epochs.erase(epoch);
    }
  }
  const size_t pipelines = pipelines_.size();
  for (auto it = pipelines_.begin(); it != pipelines_.end();) {
    it = now - it->second.last_used > options_.idle_pipeline_timeout ? pipelines_.erase(it) : std::next(it);
  }
  if (pipelines_.size() < pipelines) GiveBackFreedHeap();  // a definition may hold its data inline
}

std::vector<JournalEntry> DispatcherState::Snapshot() const {
  std::vector<JournalEntry> out;
  out.emplace_back().set_next_id(next_id_);
  for (const auto& [id, secret] : worker_secrets_) {
    JournalWorker* worker = out.emplace_back().mutable_add_worker();
    worker->set_worker_id(id);
    worker->set_secret(secret);
  }
  for (const auto& [id, pipeline] : pipelines_) {
    JournalPipeline* p = out.emplace_back().mutable_register_pipeline();
    *p->mutable_pipeline() = pipeline.def;
    *p->mutable_element() = pipeline.info.element();
    p->set_origin_id(pipeline.origin_id);
  }
  for (const auto& [job_id, job] : jobs_) {
    *out.emplace_back().mutable_create_job() = job.def;
    for (int64_t client : job.clients) {
      JournalClient* c = out.emplace_back().mutable_add_client();
      c->set_job_id(job_id);
      c->set_client_id(client);
    }
    for (const auto& [client, root] : job.lineage) {
      JournalClient* c = out.emplace_back().mutable_lineage();
      c->set_job_id(job_id);
      c->set_client_id(client);
      c->set_root(root);
    }
    for (const auto& [saved_in, root] : job.continued) {
      JournalClient* c = out.emplace_back().mutable_lineage();
      c->set_job_id(job_id);
      c->set_client_id(root);
      c->set_root(root);
      c->set_continues(saved_in);
    }
    for (const auto& [epoch, splits] : job.epochs) {
      for (const auto& [client, completed] : splits.CompletedByClient()) {
        ReportSplitsRequest* done = out.emplace_back().mutable_splits_completed();
        done->set_job_id(job_id);
        done->set_client_id(client);
        done->set_epoch(epoch);
        for (int64_t s : completed) done->add_completed(s);
      }
      // Replayed, a split held by a client re-runs for that client.
      for (const auto& [split, client] : splits.Held()) {
        JournalSplit* held = out.emplace_back().mutable_split_assigned();
        held->set_job_id(job_id);
        held->set_client_id(client);
        held->set_epoch(epoch);
        held->set_split(split);
      }
    }
  }
  return out;
}

DispatcherStatus DispatcherState::Status(absl::Time now, const Caller& caller) const {
  DispatcherStatus out;
  out.set_pipelines(static_cast<int32_t>(pipelines_.size()));
  for (const auto& [kind, n] : errors_) (*out.mutable_errors())[kind] = n;
  for (const auto& [id, w] : workers_) {
    WorkerStatusEntry* e = out.add_workers();
    e->set_worker_id(id);
    e->set_address(w.address);
    e->set_active_streams(w.active_streams);
    e->set_samples_per_s(w.samples_per_s);
    e->set_seconds_since_heartbeat(absl::ToDoubleSeconds(now - w.last_seen));
    e->set_ops(static_cast<int32_t>(w.ops.size()));
  }
  for (const auto& [id, job] : jobs_) {
    if (!caller.admin() && job.def.tenant() != caller.name) continue;
    JobStatusEntry* e = out.add_jobs();
    e->set_job_id(id);
    e->set_job_name(job.def.job_name());
    e->set_pipeline_id(job.def.pipeline_id());
    e->set_mode(job.def.mode());
    e->set_clients(static_cast<int32_t>(job.clients.size()));
    JobLoad load;
    uint64_t epoch = 0;
    for (int64_t c : job.clients) {
      auto client = clients_.find(c);
      if (client == clients_.end()) continue;
      load.consumed_per_s += client->second.samples_per_s;
      load.wait_share += client->second.wait_share;
      ++load.clients;
      epoch = std::max(epoch, client->second.epoch);
    }
    if (load.clients > 0) load.wait_share /= load.clients;
    static const std::vector<std::string> kNoOps;
    const auto pipeline = pipelines_.find(job.def.pipeline_id());
    const std::vector<std::string>& ops = pipeline == pipelines_.end() ? kNoOps : pipeline->second.ops;
    for (const auto& [worker_id, worker] : workers_) load.workers += worker.Runs(ops);
    e->set_samples_per_s(load.consumed_per_s);
    e->set_wait_share(load.wait_share);
    e->set_workers_needed(WorkersNeeded(load));
    e->set_workers(load.workers);
    e->set_epoch(epoch);
    auto splits = job.epochs.find(epoch);
    if (splits != job.epochs.end()) {
      e->set_splits_completed(splits->second.completed());
      e->set_num_splits(splits->second.size());
      e->set_splits_in_flight(static_cast<int64_t>(splits->second.Held().size()));
    }
  }
  return out;
}

}  // namespace sluice::service
