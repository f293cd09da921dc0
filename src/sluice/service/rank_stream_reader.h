// One shard's epoch through the service. When the workers' part of a
// pipeline is sharded, its batches are one rank's part of each global batch,
// made in order by one pipeline: one worker runs it (one on this host when
// there is one, for the shared-memory ring) and streams the batches, each
// with the part's state after it (BatchMessage.state). The reader logs
// those states for the consumer's position (ctx->shard_log), and when the
// worker is lost, another goes on from the state of the last batch that
// arrived: the rank gets its exact share, in order, whatever worker dies.
#ifndef SLUICE_SERVICE_RANK_STREAM_READER_H_
#define SLUICE_SERVICE_RANK_STREAM_READER_H_

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sluice/exec/iterator.h"
#include "sluice/service/distributed_input.h"
#include "sluice/service/receive_ops.h"

namespace sluice::service {

class RankStreamReader : public exec::Iterator {
 public:
  // `node`: the pipeline's kRemote node, whose ops run as batches arrive.
  // Resumes from ctx->ResumeOf(epoch) when set.
  RankStreamReader(DistributedInput* input, exec::ExecContext* ctx, const graph::CompiledNode& node, uint64_t epoch);
  ~RankStreamReader() override;  // cancels the stream and joins its thread

  absl::Status GetNext(Batch* out, bool* end) override;

 private:
  // The thread: streams from one worker after another until the epoch ends
  // or fails.
  void Run();
  // One stream from the worker at `address`, from resume_state_: OK when it
  // sent the epoch's end, else why it stopped.
  grpc::Status Stream(const TaskInfo& worker);
  // Decodes a batch and queues it; false when the stream must stop
  // (*broken says so when it arrived damaged).
  bool Deliver(ReceivedBatch received, const std::shared_ptr<const std::vector<std::string>>& files,
               grpc::Status* broken);
  // The worker to stream from next: one on this host first, spread over the
  // candidates by shard index; none while every worker failed lately.
  std::optional<TaskInfo> PickWorker();
  void Fail(absl::Status status);

  DistributedInput* const input_;
  exec::ExecContext* const ctx_;
  const uint64_t epoch_;
  const ReceiveOps receive_ops_;
  const size_t max_queued_;
  std::string resume_state_;                 // the last arrived batch's state (thread only)
  int64_t arrived_ = 0;                      // batches, this epoch (thread only)
  std::map<int64_t, absl::Time> failed_at_;  // workers whose stream broke (thread only)
  int64_t aborted_at_ = -1;                  // the batch the last ABORTED stream broke at (thread only)
  int aborts_in_a_row_ = 0;                  // ... and how many times in a row (thread only)

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* stream_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open one, to cancel
  std::thread thread_;                                          // last: started once the rest is built
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_RANK_STREAM_READER_H_
