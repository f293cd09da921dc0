// A worker's work behind its RPCs: it runs the workers' part of a job's
// pipeline for one client and epoch (all of it in parallel_epochs, the
// splits the dispatcher hands out in distributed_epoch) and hands each
// encoded batch to the stream. WorkerServer adapts it to gRPC.
#ifndef SLUICE_SERVICE_WORKER_IMPL_H_
#define SLUICE_SERVICE_WORKER_IMPL_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service.grpc.pb.h"
#include "sluice/exec/pipeline.h"
#include "sluice/service/security.h"
#include "sluice/service/shm_ring.h"

namespace sluice::service {

struct WorkerOptions {
  std::string dispatcher;  // host:port
  int threads = 0;         // compute threads per stream; 0: the pipeline's
  SecurityOptions security;
  // How long a stream retries an unreachable dispatcher (a restart) before
  // it gives up.
  absl::Duration dispatcher_grace = absl::Seconds(60);
  // False: a pipeline with Python code (a python op, a Python dataset),
  // which a consumer sent and this worker would run, is refused.
  bool allow_python = true;
  // A compiled pipeline no stream has used for this long is dropped.
  absl::Duration pipeline_idle = absl::Minutes(10);
};

// Thread-safe.
class WorkerImpl {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerImpl>> Create(WorkerOptions options);

  // Sends the job's elements for the request's client and epoch through
  // `write`, as serialized BatchMessages (false: the client went away).
  // `cancelled` is polled between batches.
  using WriteFn = std::function<bool(grpc::ByteBuffer*)>;
  absl::Status StreamBatches(const StreamBatchesRequest& request, const WriteFn& write,
                             const std::function<bool()>& cancelled);
  // One heartbeat to the dispatcher (registering on the first), with the
  // ops this worker can run. An id the dispatcher says is another worker's
  // is forgotten (Aborted): the next beat registers afresh.
  absl::Status Heartbeat();
  // What the pipeline part yields, compiled with this worker's ops.
  absl::StatusOr<ElementSpec> Describe(const DescribePipelineRequest& request) const;
  WorkerStatus Status() const;
  // A stream failed with `code` (WorkerStatus.errors).
  void CountError(absl::StatusCode code);
  // Shutting down: streams end after their current split (UNAVAILABLE, so
  // clients take the rest elsewhere) and new ones are refused.
  void StartDraining() { draining_ = true; }
  int active_streams() const { return active_streams_.load(); }
  // The last heartbeat: the dispatcher forgets this worker at once.
  absl::Status Leave();
  void set_address(std::string address) {
    absl::MutexLock lock(&mu_);
    address_ = std::move(address);
  }

 private:
  // A heartbeat carrying who this worker is: its id, secret and address.
  WorkerHeartbeatRequest Identity() const;
  explicit WorkerImpl(WorkerOptions options);
  // Pipeline `id`, built from the dispatcher's definition on first use and
  // kept while in use (dropped after options_.pipeline_idle unused).
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> GetPipeline(const std::string& id);
  // The cached pipeline `id` (null when none), dropping idle ones.
  std::shared_ptr<const exec::Pipeline> FindPipeline(const std::string& id);
  // Takes the pipelines no stream holds that were last used before
  // options_.pipeline_idle ago out of the cache; a held one counts as used
  // now. The caller drops them after releasing mu_ (DropPipelines): a
  // pipeline pinning a million files takes a GB and a while to free, and
  // every stream and beat waits on mu_.
  std::vector<std::shared_ptr<const exec::Pipeline>> TakeIdlePipelines() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropPipelines(std::vector<std::shared_ptr<const exec::Pipeline>> idle) ABSL_LOCKS_EXCLUDED(mu_);
  // The dispatcher's next split for the stream, retrying while it restarts
  // (a retry repeats `ask`, so a lost reply hands out nothing twice).
  absl::StatusOr<GetSplitResponse> NextSplit(const GetSplitRequest& ask, const std::function<bool()>& cancelled);
  // Runs the split `next` names for the stream (from its first_record):
  // its batches then its split_end marker. `ring`: the client's, if this
  // worker could claim it.
  // Marks run `run` as waiting for its client to take a batch, or not.
  void SetWriting(uint64_t run, bool writing);
  absl::Status RunSplit(const exec::Pipeline& pipeline, const StreamBatchesRequest& request,
                        const GetSplitResponse& next, BatchMessage* header, ShmRingWriter* ring, const WriteFn& write,
                        const std::function<bool()>& cancelled);
  // A split the dispatcher says failed too often: skipped (told to the
  // client), or the stream's error.
  absl::Status FailedSplit(const exec::Pipeline& pipeline, const StreamBatchesRequest& request,
                           const GetSplitResponse& failed, const WriteFn& write);
  // PermissionDenied when `def` runs Python code and this worker may not.
  absl::Status CheckPython(const PipelineDef& def) const;
  // Runs `it` to its end, sending each batch tagged with `split` (and with
  // the iterator's state after it when `with_state`). `one_record`: `it`
  // makes one message, so nothing is encoded ahead of the next.
  absl::Status SendAll(exec::PipelineIterator* it, const StreamBatchesRequest& request, int64_t split,
                       BatchMessage* header, ShmRingWriter* ring, const WriteFn& write,
                       const std::function<bool()>& cancelled, bool with_state = false, bool one_record = false);
  // parallel_epochs: the pipeline's whole epoch, or the rest of it from the
  // request's resume state; a sharded part's batches carry their state, from
  // which another worker can go on. What it skipped goes into `epoch_end`.
  absl::Status SendEpoch(const exec::Pipeline& pipeline, const StreamBatchesRequest& request, BatchMessage* header,
                         ShmRingWriter* ring, const WriteFn& write, const std::function<bool()>& cancelled,
                         BatchMessage* epoch_end);

  const WorkerOptions options_;
  // The registry's ops (plugins are loaded before a worker starts).
  const std::vector<std::string> ops_;
  std::unique_ptr<::sluice::Dispatcher::Stub> dispatcher_;
  std::atomic<int64_t> worker_id_{0};
  std::atomic<int> active_streams_{0};
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> samples_sent_{0};
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> samples_sent_shared_memory_{0};
  absl::Mutex build_mu_;  // one pipeline built at a time (GetPipeline)
  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);  // where clients reach this worker
  std::string secret_ ABSL_GUARDED_BY(mu_);   // keeps worker_id_ ours at the dispatcher
  // The last heartbeat's time and samples_sent_ then: its rate since.
  absl::Time last_beat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t sent_at_last_beat_ ABSL_GUARDED_BY(mu_) = 0;
  // Compiled pipelines by id; one unused for options_.pipeline_idle is
  // dropped.
  struct CachedPipeline {
    std::shared_ptr<const exec::Pipeline> pipeline;
    absl::Time last_used;
  };
  std::map<std::string, CachedPipeline> pipelines_ ABSL_GUARDED_BY(mu_);
  // The splits its streams are running and the batches each has sent so
  // far, by run, for the heartbeat: progress renews a split's lease.
  struct Running {
    JournalSplit split;
    int64_t batches = 0;
    // Records (or rows) its Python processes began within chunks not yet
    // out (a slow dataset's items, a slow op's rows): progress too. Null
    // until its iterator is made.
    std::shared_ptr<const std::atomic<int64_t>> records_begun;
    bool writing = false;  // waiting for the client to take a batch
  };
  std::map<uint64_t, Running> running_ ABSL_GUARDED_BY(mu_);
  // Splits whose stream ended before their end, for the next heartbeat.
  std::vector<JournalSplit> dropped_ ABSL_GUARDED_BY(mu_);
  // Splits sent whole into their streams, for the next heartbeat.
  std::vector<JournalSplit> sent_ ABSL_GUARDED_BY(mu_);
  uint64_t next_run_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> errors_ ABSL_GUARDED_BY(mu_);  // by status code name
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_WORKER_IMPL_H_
