// The dispatcher's work behind its RPCs, as Status-returning calls:
// validates pipelines (compiling them: the dispatcher reads the file lists
// and indexes, not the data), journals state changes under --work-dir and
// serializes access to the state. DispatcherServer adapts it to gRPC.
#ifndef SLUICE_SERVICE_DISPATCHER_IMPL_H_
#define SLUICE_SERVICE_DISPATCHER_IMPL_H_

#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service.pb.h"
#include "sluice/graph/resource_limits.h"
#include "sluice/service/dispatcher_state.h"
#include "sluice/service/journal.h"
#include "sluice/service/security.h"

namespace sluice::service {

struct DispatcherOptions {
  std::string host = "127.0.0.1";  // beyond loopback: see docs/service.md#security
  int port = 0;                    // 0: any free port (see DispatcherServer::port)
  // Empty: no journal (state is lost on restart).
  std::string work_dir;
  // Its server's, and how it calls workers (the same CA, certificate and
  // token).
  SecurityOptions security;
  DispatcherState::Options timeouts;
  // What a registered pipeline may make a process allocate.
  graph::ResourceLimits limits;
  Journal::Options journal;
  int metrics_port = -1;  // Prometheus metrics on `host` (0: any free port; -1: none)
  // False: pipelines with Python code (code a consumer sends, which workers
  // would run) are refused at registration.
  bool allow_python = true;
  // False: routine events (listening, joins) are not logged; an embedded
  // dispatcher's would land in the trainer's output.
  bool routine_logging = true;
};

// Thread-safe.
class DispatcherImpl {
 public:
  static absl::StatusOr<std::unique_ptr<DispatcherImpl>> Create(const DispatcherOptions& options);

  absl::StatusOr<RegisterPipelineResponse> RegisterPipeline(const RegisterPipelineRequest& request);
  // `caller`: the calling client; a tenant touches only its own jobs.
  absl::StatusOr<GetOrCreateJobResponse> GetOrCreateJob(const GetOrCreateJobRequest& request,
                                                        const Caller& caller = Caller());
  absl::StatusOr<ClientHeartbeatResponse> ClientHeartbeat(const ClientHeartbeatRequest& request,
                                                          const Caller& caller = Caller());
  absl::Status ReportSplits(const ReportSplitsRequest& request, const Caller& caller = Caller());
  absl::Status ReleaseClient(const ReleaseClientRequest& request, const Caller& caller = Caller());
  absl::Status ResumeClient(const ResumeClientRequest& request, const Caller& caller = Caller());
  absl::StatusOr<WorkerHeartbeatResponse> WorkerHeartbeat(const WorkerHeartbeatRequest& request);
  absl::StatusOr<GetPipelineResponse> GetPipeline(const GetPipelineRequest& request);
  absl::StatusOr<GetSplitResponse> GetSplit(const GetSplitRequest& request);
  DispatcherStatus Status(const Caller& caller = Caller());
  // Drops silent workers and clients; called every kExpireEvery. A longer
  // gap since the last call is the dispatcher's own stall, which it
  // forgives everyone (DispatcherState::ForgiveStall).
  static constexpr absl::Duration kExpireEvery = absl::Milliseconds(500);
  absl::Status Expire(absl::Time now = absl::Now());

 private:
  explicit DispatcherImpl(const DispatcherOptions& options);
  // What `def` yields, asked of a live worker that has `ops`.
  absl::StatusOr<ElementSpec> DescribeOnAWorker(const PipelineDef& def, const std::vector<std::string>& ops);
  // The address of a live worker that has `ops`, none at `unreachable`;
  // with no worker alive, waits up to the worker timeout for one. The
  // error names the op no worker has, and the dispatcher's ops.
  absl::StatusOr<std::string> WaitForCapableWorker(const std::vector<std::string>& ops,
                                                   const std::set<std::string>& unreachable);
  // What `def` yields, asked of the worker at `address`.
  absl::StatusOr<ElementSpec> DescribeOn(const std::string& address, const PipelineDef& def);
  // Runs `change` (a call on state_) under the lock, compacts the journal
  // when it is due, and returns once what the change journaled is durable:
  // the RPC answers only then, and concurrent changes share one sync.
  template <typename Change>
  auto Durably(Change change) -> decltype(change());
  // Under the lock, after a change: compacts when due; returns the sequence
  // number Sync must reach.
  uint64_t AfterChange() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // LogRoutine, unless the options turned routine logging off.
  void Routine(absl::string_view message) const;

  const std::string work_dir_;
  const SecurityOptions security_;
  const absl::Duration worker_timeout_;
  const graph::ResourceLimits limits_;
  const bool allow_python_;
  const bool routine_logging_;
  absl::Mutex mu_;
  std::unique_ptr<Journal> journal_;  // set before serving; thread-safe itself
  DispatcherState state_ ABSL_GUARDED_BY(mu_);
  absl::Time last_expire_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

template <typename Change>
auto DispatcherImpl::Durably(Change change) -> decltype(change()) {
  uint64_t seq = 0;
  auto result = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    absl::MutexLock lock(&mu_);
    auto out = change();
    seq = AfterChange();
    return out;
  }();
  if (journal_ != nullptr) {
    absl::Status synced = journal_->Sync(seq);
    if (!synced.ok()) return decltype(result)(synced);
  }
  return result;
}

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_DISPATCHER_IMPL_H_
