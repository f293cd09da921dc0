// The consumer's side of a pipeline split at a distribute node: registers
// the workers' part with the dispatcher, joins (or creates) the job, keeps
// the client alive with heartbeats that also bring the list of workers, and
// opens one EpochReader per epoch, which the local part of the pipeline
// reads as its first node.
#ifndef SLUICE_SERVICE_DISTRIBUTED_INPUT_H_
#define SLUICE_SERVICE_DISTRIBUTED_INPUT_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service.grpc.pb.h"
#include "sluice/exec/iterator.h"
#include "sluice/service/epoch_splits.h"
#include "sluice/service/security.h"
#include "sluice/service/shm_ring.h"
#include "sluice/service/wire_batch.h"

namespace sluice::service {

struct ClientOptions {
  std::string dispatcher;  // host:port
  ProcessingMode mode = DISTRIBUTED_EPOCH;
  std::string job_name;
  Compression compression = COMPRESSION_NONE;
  int max_outstanding = 4;  // batches in flight per worker stream
  absl::Duration connect_timeout = absl::Seconds(30);
  // Unreachable longer than this mid-epoch, the dispatcher is given up on.
  absl::Duration dispatcher_timeout = absl::Seconds(60);
  // Workers on this host write batches into a shared-memory ring of this
  // many bytes per stream (shm_ring.h); 0: every batch over TCP. When
  // `shared_memory_auto`, a ring grows to hold a few of the part's batches.
  size_t shared_memory_bytes = size_t{64} << 20;
  bool shared_memory_auto = true;
  SecurityOptions security;
};

// Thread-safe.
class EpochReader;

class DistributedInput : public exec::RemoteInput {
 public:
  static absl::StatusOr<std::shared_ptr<DistributedInput>> Connect(ClientOptions options,
                                                                   const PipelineDef& workers_part);
  ~DistributedInput() override;  // leaves the job

  std::unique_ptr<exec::Iterator> Open(exec::ExecContext* ctx, const graph::CompiledNode& node,
                                       uint64_t epoch) override;
  int64_t Cardinality() const override;
  absl::Status CheckResumable() const override;
  std::vector<io::Split> SplitOrder(uint64_t epoch) const override;
  void Identify(exec::EpochPosition* p) const override;
  std::optional<graph::ShardSpec> Sharding() const override { return sharding_; }
  std::string Listing() const override { return element_.listing(); }
  int64_t HeldBytes() const override;
  void LimitHeldBytes(int64_t bytes, std::function<void(int64_t)> held_changed) override;

  const ElementSpec& element() const { return element_; }
  const Schema& schema() const { return schema_; }
  const ClientOptions& options() const { return options_; }
  const std::string& pipeline_id() const { return pipeline_id_; }
  // The pipeline's splits, before any shuffle.
  const std::vector<io::Split>& splits() const { return splits_; }
  // distributed_epoch over splits of one record each (an image folder, a
  // file list): a stream carries one split at a time, so a worker gets a
  // few streams per core, or it would run one image at a time.
  bool one_record_splits() const { return one_record_splits_; }
  int64_t job_id() const { return job_id_; }
  int64_t client_id() const { return client_id_; }

  // The workers the dispatcher listed last.
  std::vector<TaskInfo> Tasks() const;
  // The streams whose split's lease ran out, as heartbeats brought them
  // since the last call.
  std::vector<uint64_t> TakeExpiredStreams();
  // Why reading cannot go on: the dispatcher unreachable for longer than
  // the timeout, or no longer knowing this client. OK while it can.
  absl::Status Fatal() const;
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);
  // Opens a stream of `epoch`'s batches from the worker at `address`
  // (`request` adds to the job's fields, e.g. a resume state), offering it a
  // ring (*ring) when the worker is on this host.
  std::unique_ptr<grpc::ClientReader<ReceivingBatch>> OpenStream(const std::string& address, uint64_t epoch,
                                                                 StreamBatchesRequest request,
                                                                 grpc::ClientContext* context,
                                                                 std::shared_ptr<ShmRing>* ring);
  // A sharded part's: the fingerprint of the workers' part, which its
  // states carry (exec/resume.h).
  const std::string& workers_fingerprint() const { return workers_fingerprint_; }
  // Reports splits of `epoch`: queued, and sent by the heartbeat thread at
  // once (retried while the dispatcher restarts), so a stream never waits
  // on the dispatcher. `ended_stream`: a stream (StreamBatchesRequest's
  // stream_id) that ended before the epoch's end, 0 for none; `dropped`:
  // this client dropped it, else it broke under it.
  void ReportSplits(uint64_t epoch, const std::vector<int64_t>& completed, const std::vector<int64_t>& abandoned,
                    uint64_t ended_stream = 0, bool dropped = false, const std::string& broken_why = "");
  // Feeds the next heartbeat's throughput figures, and its share of time
  // the consumer waited for data.
  void CountReceived(int64_t samples, int64_t bytes);
  // A ring for a new stream to offer: an idle one, or a new one; null when
  // rings are off or /dev/shm has no room for one (said once).
  std::shared_ptr<ShmRing> TakeRing();
  // A stream's ring after the stream ended: kept for the next stream
  // unless a worker still holds it.
  void ReturnRing(std::shared_ptr<ShmRing> ring);
  void CountWait(absl::Duration waited);
  // The pipeline's split indices in epoch `epoch`'s order (the order a
  // saved position counts splits in).
  std::vector<int64_t> SplitIndices(uint64_t epoch) const;
  // The splits some (not all) of whose records `done` counts, each with its
  // first record after the done ones it starts with.
  std::vector<EpochSplits::Partial> PartialSplits(const exec::DoneRows& done) const;
  // Tells the dispatcher that this client goes on from `resumed` in
  // `epoch` (see ResumeClientRequest).
  absl::Status ResumeClient(uint64_t epoch, const exec::EpochPosition& resumed);
  // The reader of `epoch` opened (superseding an older one of the same
  // epoch: one client reads an epoch once), and closed; `leaving` (its
  // streams) when it closed before the epoch's end and no newer reader of
  // the epoch replaced it: the dispatcher gives what it held to others.
  void Opened(EpochReader* reader, uint64_t epoch);
  void Closed(EpochReader* reader, uint64_t epoch, const std::optional<std::vector<uint64_t>>& leaving);
  // Keeps `owned` (an embedded cluster) alive as long as this input;
  // `failure` (its own failure, OK while it works) becomes this input's
  // Fatal().
  void KeepAlive(std::shared_ptr<void> owned, std::function<absl::Status()> failure) {
    owned_ = std::move(owned);
    owned_failure_ = std::move(failure);
  }

 private:
  explicit DistributedInput(ClientOptions options) : options_(std::move(options)) {}
  absl::Status Heartbeat(absl::Duration timeout);
  // A heartbeat's or report's deadline: 10 s at most, and no later than
  // dispatcher_timeout after `unreachable_since` (the start of the first
  // call left unanswered; InfiniteFuture: none was), which a hung
  // dispatcher must not outlast.
  absl::Duration DispatcherCallTimeout(absl::Time unreachable_since = absl::InfiniteFuture()) const;
  // The heartbeat thread: beats until stopped, backing off while the
  // dispatcher is unreachable, and sets fatal_ when it must give up.
  void BeatUntilStopped();
  // Counts this consumer of its named job in this process, and logs when
  // the process already had one (job_consumers.h).
  void WarnOfAnotherConsumerHere();
  // Sends `reports` in order, removing each once the dispatcher has it.
  absl::Status SendReports(std::vector<ReportSplitsRequest>* reports, absl::Duration timeout);

  std::shared_ptr<void> owned_;  // first: destroyed last
  std::function<absl::Status()> owned_failure_;
  const ClientOptions options_;
  std::unique_ptr<::sluice::Dispatcher::Stub> dispatcher_;
  PipelineDef workers_part_;
  ElementSpec element_;
  Schema schema_;
  std::vector<io::Split> splits_;  // the pipeline's, before any shuffle
  bool one_record_splits_ = false;
  std::optional<graph::ShardSpec> sharding_;
  std::string workers_fingerprint_;
  size_t ring_bytes_ = 0;  // of each stream's ring
  std::string pipeline_id_;
  std::string job_uid_;
  int64_t job_id_ = 0;
  int64_t client_id_ = 0;
  std::atomic<uint64_t> epoch_{0};

  mutable absl::Mutex mu_;
  std::vector<TaskInfo> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> expired_streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<ShmRing>> idle_rings_ ABSL_GUARDED_BY(mu_);
  bool rings_failed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t rings_held_ ABSL_GUARDED_BY(mu_) = 0;  // made and not dropped
  int64_t held_limit_ ABSL_GUARDED_BY(mu_) = 0;  // the rings' share of the budget; 0: none set
  std::function<void(int64_t)> held_changed_ ABSL_GUARDED_BY(mu_);
  bool rings_limited_ ABSL_GUARDED_BY(mu_) = false;  // said once that a stream went over TCP for it
  // Whether one ring more stays within held_limit_; says so once if not.
  bool RingFits() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One batch's bytes as the workers send it (ragged columns count nothing).
  size_t BatchBytes() const;
  absl::Duration waited_ ABSL_GUARDED_BY(mu_);
  absl::Time last_heartbeat_ ABSL_GUARDED_BY(mu_);
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::vector<ReportSplitsRequest> reports_ ABSL_GUARDED_BY(mu_);  // for the heartbeat thread to send
  int64_t unsent_reports_ ABSL_GUARDED_BY(mu_) = 0;                // queued, or sent and not yet answered
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::shared_ptr<void> job_consumer_;  // counts this consumer of a named job (job_consumers.h)
  std::thread heartbeats_;

  absl::Mutex readers_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::map<uint64_t, EpochReader*> readers_ ABSL_GUARDED_BY(readers_mu_);  // open, by epoch
  std::set<uint64_t> started_ ABSL_GUARDED_BY(readers_mu_);                // opened from their start
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_DISTRIBUTED_INPUT_H_
