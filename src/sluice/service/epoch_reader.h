// One epoch of a distributed pipeline on the consumer's side: a stream per
// worker (a few per worker core, for splits of one record), each on its own
// thread, feeding one bounded queue. In
// distributed_epoch it keeps, per split in flight, the identities of the
// samples delivered, so when a worker dies and its split is run again
// elsewhere, the samples that already arrived are dropped: every sample
// exactly once. It rebatches the workers' per-split batches to the batch
// size, so the consumer sees the batches an in-process run would make.
//
// A resumed epoch (ctx->ResumeOf) first has the dispatcher take over the
// saved progress, then drops the samples the state counts done wherever
// they arrive. When the pipeline tracks its position, each split's end
// tells the ledger how many samples the split has.
#ifndef SLUICE_SERVICE_EPOCH_READER_H_
#define SLUICE_SERVICE_EPOCH_READER_H_

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/row_copier.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/distributed_input.h"
#include "sluice/service/id_ranges.h"
#include "sluice/service/receive_ops.h"

namespace sluice::service {

class EpochReader : public exec::Iterator {
 public:
  // `node`: the pipeline's kRemote node, whose ops run as batches arrive.
  EpochReader(DistributedInput* input, exec::ExecContext* ctx, const graph::CompiledNode& node, uint64_t epoch);
  ~EpochReader() override;  // cancels and joins the streams

  absl::Status GetNext(Batch* out, bool* end) override;
  void LimitNextRows(int64_t rows) override;
  // A newer reader of the same client and epoch took over: this one stops
  // its streams (their splits go back to the client) and fails from now on.
  void Supersede();

 private:
  struct Stream {
    int64_t worker_id = 0;
    std::string address;
    grpc::ClientContext context;
    std::thread thread;
    bool running = true;
    bool ended_epoch = false;
    uint64_t id = 0;                                     // StreamBatchesRequest's stream_id, once opened
    absl::Time unlisted_since = absl::InfiniteFuture();  // when the dispatcher stopped listing its worker
    bool expired = false;  // dropped: its split's lease ran out (the dispatcher gave the split out again)
  };

  struct StreamRead;

  // A stream's thread: opens it, receives until it ends, then records how.
  void Read(Stream* stream);
  void Open(Stream* stream, StreamRead* read);
  void Receive(StreamRead* read);
  // A split's end marker, or its skipped marker (it failed too often and
  // on_corrupt is "skip"): counted once, whatever re-ran, and reported.
  void SplitEnded(const BatchMessage& message);
  void SplitSkipped(const BatchMessage& message);
  // Decodes a batch of read->split and queues its rows not delivered
  // before; false when the stream must stop (damaged on the way, or the
  // reader stops).
  bool Deliver(ReceivedBatch received, StreamRead* read);
  // Why the stream ended: a lost worker (its split runs again), damage that
  // repeats (DataLoss) or the pipeline's own error.
  void Finish(Stream* stream, const StreamRead& read, const grpc::Status& status);
  static std::string BrokenWhy(const Stream& stream, const grpc::Status& status);
  // Logs a stream's break: a worker's first, then at most one line every
  // 30 s, counting those between.
  void LogBreak(const Stream& stream, const grpc::Status& status, int64_t split) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds what a worker skipped (a split_end or epoch_end marker's counts).
  void CountSkips(const BatchMessage& marker);
  // Drops rows of `batch` already delivered for its split (or done in the
  // state it resumed from); false when none is left. REQUIRES: mu_ held.
  bool DropDelivered(int64_t split, Batch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every sample of `split` arrived (the first time it ends): tells the
  // ledger how many there were. REQUIRES: mu_ held.
  void SplitArrived(int64_t split) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A resumed epoch: what the state counts done is done. REQUIRES: mu_ held.
  void SeedDone(const exec::DoneRows& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens streams to listed workers that have none, and drops those of
  // workers no longer listed. REQUIRES: mu_ held.
  void OpenStreams() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancels the running streams of workers the dispatcher has not listed
  // for a while (it found them lost): a hung worker's open stream would
  // keep the epoch from ending. REQUIRES: mu_ held.
  void DropUnlistedStreams(const std::vector<TaskInfo>& tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancels the running streams whose split's lease ran out (`ids`): stuck
  // in a kernel that never returns, they would ask for no other split, and
  // the epoch could not end; the lanes open again. REQUIRES: mu_ held.
  void DropExpiredStreams(const std::vector<uint64_t>& ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens (or opens again, once finished) the stream of `task`'s `lane`.
  void OpenStream(const TaskInfo& task, int lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int StreamsPerWorker(const TaskInfo& task) const;
  bool EpochOver() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next batch of the batch size from pending_ (or the remainder at the end).
  bool TakeRebatched(bool at_end, Batch* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `rows` of `split` left for the consumer (rows the workers did not
  // batch) or for rebatching (batches they made): a split whose every row
  // arrived and left is reported finished (to finished_), not before. A
  // consumer that leaves with rows of a split still queued has that split
  // re-issued, not lost.
  void Taken(int64_t split, int64_t rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Up to `max_rows` rows from pending_'s front into `copier`.
  void TakePending(exec::RowCopier* copier, int64_t max_rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Up to `rows` rows off pending_'s front batch, no copy (Taken where the
  // workers did not batch).
  void PopPending(int64_t rows, Batch* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NextLocked(Batch* out, bool* end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the dispatcher of the splits in finished_, with mu_ let go
  // meanwhile: as an element is handed out, and before the consumer waits
  // (a split's last rows may wait in pending_ for the epoch's end, which
  // the workers send only once every split is reported).
  void ReportFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  DistributedInput* const input_;
  exec::ExecContext* const ctx_;
  const uint64_t epoch_;
  const Schema schema_;  // of the batches handed on: with the receive ops' outputs
  const ReceiveOps receive_ops_;
  const bool exactly_once_;
  const size_t max_queued_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  // By worker and lane: a worker runs a job's one-record splits on several
  // streams at once (StreamsPerWorker), its other splits on one.
  std::map<std::pair<int64_t, int>, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, absl::Time> failed_at_ ABSL_GUARDED_BY(mu_);  // workers whose stream broke
  // By worker: when its last break was logged, and the breaks since. A
  // worker no stream reaches (an address that does not resolve) broke
  // once a second, each with a line.
  struct BreakLog {
    absl::Time logged = absl::InfinitePast();
    int64_t since = 0;
  };
  std::map<int64_t, BreakLog> break_logs_ ABSL_GUARDED_BY(mu_);
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> queue_splits_ ABSL_GUARDED_BY(mu_);  // the split of each queued batch
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> completed_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, IdRanges> delivered_ ABSL_GUARDED_BY(mu_);  // by split in flight: the ids handed on
  std::map<int64_t, int> damaged_ ABSL_GUARDED_BY(mu_);         // by split: its arrivals that failed to decode
  std::vector<int64_t> position_of_;                // by split: its place in the epoch's order (for the ledger)
  std::deque<Batch> pending_ ABSL_GUARDED_BY(mu_);  // rebatching
  std::deque<int64_t> pending_splits_ ABSL_GUARDED_BY(mu_);    // the split of each pending batch
  std::map<int64_t, int64_t> held_rows_ ABSL_GUARDED_BY(mu_);  // by split, not yet Taken
  std::set<int64_t> ended_held_ ABSL_GUARDED_BY(mu_);          // all arrived, some rows still held
  std::vector<int64_t> finished_ ABSL_GUARDED_BY(mu_);         // to report
  int64_t pending_rows_ ABSL_GUARDED_BY(mu_) = 0;
  // Rows the next GetNext may hand out where the workers did not batch
  // (LimitNextRows); one unless the consumer said.
  int64_t next_rows_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Time opened_at_ ABSL_GUARDED_BY(mu_);
  absl::Time last_open_ ABSL_GUARDED_BY(mu_);
  bool waiting_logged_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool superseded_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_EPOCH_READER_H_
