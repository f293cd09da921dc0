// The dispatcher's state, free of RPC and files: pipelines (deduplicated by
// fingerprint), jobs and their clients, workers, and per distributed_epoch
// job and epoch where each split is. Changes that must survive a restart go
// through a journal callback before they apply; Apply() replays them. Every
// call takes `now`, so timeouts are tested without sleeping.
#ifndef SLUICE_SERVICE_DISPATCHER_STATE_H_
#define SLUICE_SERVICE_DISPATCHER_STATE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service.pb.h"
#include "sluice/service/epoch_splits.h"
#include "sluice/service/security.h"

namespace sluice::service {

// Thread-compatible: the dispatcher serializes calls.
class DispatcherState {
 public:
  struct Options {
    absl::Duration worker_timeout = absl::Seconds(5);
    // A consumer silent this long is dropped and its splits go to the
    // job's other consumers.
    absl::Duration client_timeout = absl::Seconds(5);
    SplitPolicy splits;
    // A pipeline no job uses is forgotten after this long.
    absl::Duration idle_pipeline_timeout = absl::Minutes(10);
  };
  // Persists an entry before it applies; an error fails the call.
  using JournalFn = std::function<absl::Status(const JournalEntry&)>;

  DispatcherState(Options options, JournalFn journal);

  // Replays one journaled change.
  void Apply(const JournalEntry& entry);
  // After a replay: the replayed clients count as heard from `now`, so a
  // dispatcher that was down longer than the client timeout does not drop
  // them before their next heartbeat reaches it.
  void Recovered(absl::Time now);

  // Returns the pipeline's id; `element` is what its validation found.
  // `origin_id`: the fingerprint of the definition before its files were
  // pinned, its Python code by identity (graph::DefinitionFingerprint;
  // default: `def`'s own fingerprint).
  absl::StatusOr<std::string> RegisterPipeline(const PipelineDef& def, const ElementSpec& element,
                                               const std::string& origin_id = "");
  // nullptr when unknown.
  const RegisterPipelineResponse* FindPipeline(const std::string& id) const;
  const PipelineDef* FindPipelineDef(const std::string& id) const;

  // Job names are the tenant's own: two tenants' "train" are two jobs.
  absl::StatusOr<GetOrCreateJobResponse> GetOrCreateJob(const GetOrCreateJobRequest& request, const std::string& tenant,
                                                        absl::Time now);
  // PermissionDenied unless `caller` is an admin or the tenant of job
  // `job_id` (OK for unknown jobs: the call itself says so).
  absl::Status CheckTenant(int64_t job_id, const Caller& caller) const;
  absl::StatusOr<ClientHeartbeatResponse> ClientHeartbeat(const ClientHeartbeatRequest& request, absl::Time now);
  absl::Status ReportSplits(const ReportSplitsRequest& request, absl::Time now);
  absl::Status ReleaseClient(const ReleaseClientRequest& request);
  // The client takes over the progress its consumer saved (see
  // EpochSplits::Resume): the job's earlier client named in `request` is
  // released first. InvalidArgument for a split the pipeline lacks.
  absl::Status ResumeClient(const ResumeClientRequest& request, absl::Time now);
  // A worker keeps the id it asks for when this dispatcher (or the journal
  // it replayed) handed it out, with the secret that came with it; an id
  // this dispatcher never gave gets a new one; a known id with the wrong
  // secret is PermissionDenied (no worker can take over another's record).
  absl::StatusOr<WorkerHeartbeatResponse> WorkerHeartbeat(const WorkerHeartbeatRequest& request, absl::Time now);
  // The address of a live worker that runs every op of `ops`, none of
  // those at `unreachable` (they refused a call: lost, for this decision,
  // though their heartbeats have not yet timed out). InvalidArgument naming
  // the first op no other live worker has (or saying that none has them all).
  absl::StatusOr<std::string> CapableWorker(const std::vector<std::string>& ops,
                                            const std::set<std::string>& unreachable = {}) const;
  // Workers heard from within the worker timeout.
  int workers() const { return static_cast<int>(workers_.size()); }
  absl::StatusOr<GetSplitResponse> GetSplit(const GetSplitRequest& request, absl::Time now);

  // Entries that, replayed into an empty state, rebuild this one (a
  // compacted journal): what a restart needs, not the history.
  std::vector<JournalEntry> Snapshot() const;

  // Drops workers and clients silent for longer than their timeouts.
  absl::Status Expire(absl::Time now);
  // The dispatcher did not run for `stalled` up to `now` (stopped, a paused
  // VM, a long fsync), which is no one's silence: everyone heard from in
  // that time counts as heard from up to `stalled` later (at most `now`),
  // and every lease runs `stalled` longer.
  void ForgiveStall(absl::Duration stalled, absl::Time now);
  // The workers and clients Expire dropped since the last call, each in
  // words.
  std::vector<std::string> TakeDropped();
  // What `caller` may see: a client tenant only its own jobs.
  DispatcherStatus Status(absl::Time now, const Caller& caller = Caller()) const;

 private:
  // Apply, one entry kind each.
  void ApplyRegisterPipeline(const JournalPipeline& r);
  void ApplyCreateJob(const JournalJob& j);
  void ApplyAddClient(const JournalClient& c);
  void ApplyReleaseClient(const ReleaseClientRequest& r);
  void ApplySplitsCompleted(const ReportSplitsRequest& r);
  void ApplyResumeClient(const ResumeClientRequest& r);
  void ApplyLineage(const JournalClient& l);
  void ApplySplitAssigned(const JournalSplit& a);

  struct Pipeline {
    PipelineDef def;
    RegisterPipelineResponse info;
    std::vector<std::string> ops;  // what a worker needs to run it
    absl::Time last_used;          // registered, or used by a job
    std::string origin_id;         // the definition the client sent
  };
  struct Client {
    int64_t job_id = 0;
    absl::Time last_seen;
    uint64_t epoch = 0;
    double samples_per_s = 0;
    double wait_share = 0;
    // The job's epochs that were over when the client joined: asking for
    // one is an error, not an empty epoch.
    std::set<uint64_t> finished_before_join;
    // Its streams whose split's lease ran out, for its next heartbeat.
    std::vector<uint64_t> expired_streams;
  };
  struct Worker {
    std::string address;
    absl::Time last_seen;
    int active_streams = 0;
    int cores = 0;
    double samples_per_s = 0;
    std::set<std::string> ops;

    bool Runs(const std::vector<std::string>& needed) const {
      return std::all_of(needed.begin(), needed.end(), [this](const std::string& op) { return ops.count(op) > 0; });
    }
  };
  struct Job {
    JournalJob def;
    std::set<int64_t> clients;
    std::map<uint64_t, EpochSplits> epochs;
    // Epochs finished and forgotten (every client was past them): one asked
    // for again must not start afresh, handing its samples out twice.
    std::set<uint64_t> forgotten;
    // A client that resumed a saved state continues its consumer: by
    // client, the consumer's first client. Resuming a state again takes
    // back what every client of that consumer did since.
    std::map<int64_t, int64_t> lineage;
    // A state saved in another job (ended since) resumed in this one: by
    // the saved job's uid and client ("uid/client"), the root of the
    // consumer that resumed it. Resuming it again continues that consumer.
    std::map<std::string, int64_t> continued;
    int64_t Root(int64_t client) const {
      auto it = lineage.find(client);
      return it == lineage.end() ? client : it->second;
    }
  };

  // A call from the client itself: it is alive at `now`.
  absl::StatusOr<Client*> FindClient(int64_t job_id, int64_t client_id, absl::Time now);
  // A call on the client's behalf (a worker's): it says nothing of whether
  // the client is alive. A stopped consumer, whose streams' workers go on
  // asking for its splits, must still be dropped after its timeout.
  absl::StatusOr<Client*> LookUpClient(int64_t job_id, int64_t client_id);
  // Forgets epochs every client of `job` is past, and pipelines idle for
  // longer than their timeout.
  void CollectGarbage(absl::Time now);
  EpochSplits& Epoch(Job& job, uint64_t epoch);
  absl::Status Journaled(const JournalEntry& entry);
  // Adds `n` faults of `kind` (none: no series for it).
  void CountErrors(const std::string& kind, int64_t n) {
    if (n > 0) errors_[kind] += n;
  }

  Options options_;
  JournalFn journal_;
  std::map<std::string, Pipeline> pipelines_;
  std::map<int64_t, Job> jobs_;
  std::map<std::pair<std::string, std::string>, int64_t> named_jobs_;  // by tenant and name
  std::map<int64_t, Client> clients_;
  std::map<int64_t, Worker> workers_;              // live
  std::vector<std::string> dropped_;               // workers and clients dropped by Expire, for the log
  std::map<int64_t, std::string> worker_secrets_;  // every id handed out
  // Ids of workers that said they leave: a heartbeat sent before the leave
  // but heard after it must not bring the worker back.
  std::set<int64_t> left_workers_;
  int64_t next_id_ = 1;                    // jobs, clients and workers share one sequence
  std::map<std::string, int64_t> errors_;  // DispatcherStatus.errors
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_DISPATCHER_STATE_H_
