#include "sluice/service/rank_stream_reader.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/exec/resume.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/log.h"
#include "sluice/service/shm_ring.h"
#include "sluice/service/wire_batch.h"

namespace sluice::service {
namespace {

// How often a reader with no worker to stream from looks again, and how
// long it leaves a worker whose stream broke before trying it again.
constexpr absl::Duration kRecheck = absl::Milliseconds(100);
constexpr absl::Duration kRetryWorker = absl::Seconds(1);
// A stream a worker ended with an error (ABORTED: a Python process that
// died making a sample, a batch damaged on the way) at the same batch this
// many times in a row: the data's failure, not a lost worker's.
constexpr int kMaxAbortsAtOneBatch = 3;

}  // namespace

RankStreamReader::RankStreamReader(DistributedInput* input, exec::ExecContext* ctx, const graph::CompiledNode& node,
                                   uint64_t epoch)
    : input_(input),
      ctx_(ctx),
      epoch_(epoch),
      receive_ops_(node, input->schema()),
      max_queued_(static_cast<size_t>(std::max(1, input->options().max_outstanding))) {
  ctx_->cancel.Register(&mu_, &cv_);
  if (const exec::EpochPosition* resumed = ctx_->ResumeOf(epoch_)) {
    resume_state_ = exec::SerializeState(input_->workers_fingerprint(), *resumed, input_->Listing());
  }
  thread_ = std::thread([this] { Run(); });
}

RankStreamReader::~RankStreamReader() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (stream_ != nullptr) stream_->TryCancel();
    cv_.SignalAll();
  }
  thread_.join();
  ctx_->cancel.Unregister(&cv_);
}

void RankStreamReader::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || ctx_->cancel.cancelled()) return;
    }
    if (absl::Status fatal = input_->Fatal(); !fatal.ok()) return Fail(fatal);
    std::optional<TaskInfo> worker = PickWorker();
    if (!worker) {
      absl::MutexLock lock(&mu_);
      cv_.WaitWithTimeout(&mu_, kRecheck);
      continue;
    }
    const grpc::Status status = Stream(*worker);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      ended_ = true;
      cv_.SignalAll();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || ctx_->cancel.cancelled() || !error_.ok()) return;
    }
    const std::string from = absl::StrCat("worker ", worker->worker_id(), " at ", worker->worker_address());
    if (!LostWorker(status)) return Fail(FromGrpc(status, from));
    if (status.error_code() == grpc::StatusCode::ABORTED) {
      aborts_in_a_row_ = aborted_at_ == arrived_ ? aborts_in_a_row_ + 1 : 1;
      aborted_at_ = arrived_;
      if (aborts_in_a_row_ >= kMaxAbortsAtOneBatch) {
        return Fail(FromGrpc(status, absl::StrCat(from, " (the shard's stream broke at batch ", arrived_, ", ",
                                                  aborts_in_a_row_, " times in a row)")));
      }
    }
    if (arrived_ > 0 && resume_state_.empty()) {
      return Fail(
          absl::UnavailableError(absl::StrCat(from, " was lost after ", arrived_, " batches that carried no position (",
                                              status.error_message(), "): another cannot go on from there")));
    }
    failed_at_[worker->worker_id()] = absl::Now();
    Log("client", absl::StrCat("stream from ", from, " broke (", status.error_message(),
                               "); the shard's stream goes on from batch ", arrived_, " on another worker"));
  }
}

std::optional<TaskInfo> RankStreamReader::PickWorker() {
  std::vector<TaskInfo> local, remote;
  for (const TaskInfo& task : input_->Tasks()) {
    auto failed = failed_at_.find(task.worker_id());
    if (failed != failed_at_.end() && absl::Now() - failed->second < kRetryWorker) continue;
    (AddressIsOnThisHost(task.worker_address()) ? local : remote).push_back(task);
  }
  const std::vector<TaskInfo>& candidates = local.empty() ? remote : local;
  if (candidates.empty()) return std::nullopt;
  return candidates[static_cast<size_t>(input_->Sharding()->index) % candidates.size()];
}

grpc::Status RankStreamReader::Stream(const TaskInfo& worker) {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
    stream_ = &context;
  }
  StreamBatchesRequest request;
  request.set_resume_state(resume_state_);
  std::shared_ptr<ShmRing> ring;
  std::unique_ptr<grpc::ClientReader<ReceivingBatch>> reader =
      input_->OpenStream(worker.worker_address(), epoch_, std::move(request), &context, &ring);
  ReceivingBatch incoming;
  incoming.pool = ctx_->pool;
  incoming.ring = ring.get();
  // Compressed columns are not the bytes the ops take: DecodeBatch runs them.
  if (input_->options().compression == COMPRESSION_NONE) incoming.ops = &receive_ops_;
  std::shared_ptr<const std::vector<std::string>> files;
  grpc::Status broken;
  bool ended = false, stopped = false;
  while (!stopped && reader->Read(&incoming)) {
    const BatchMessage& message = incoming.received.header;
    if (message.files_size() > 0) {
      files = std::make_shared<const std::vector<std::string>>(message.files().begin(), message.files().end());
    }
    if (message.epoch_end()) {
      for (const SkippedRecords& s : message.skipped()) ctx_->skips.Add(s.file(), s.records(), s.bytes(), "");
      for (const std::string& m : message.skip_messages()) ctx_->skips.AddMessage(m);
      ended = true;
      break;
    }
    stopped = !Deliver(std::move(incoming.received), files, &broken);
  }
  if (!incoming.error.ok()) broken = grpc::Status(grpc::StatusCode::ABORTED, std::string(incoming.error.message()));
  // Cancelling a stream the worker ended would turn its status (the
  // pipeline's error) into CANCELLED, which reads as a lost worker.
  if (stopped || !broken.ok()) context.TryCancel();
  grpc::Status status = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
  }
  input_->ReturnRing(std::move(ring));
  if (!broken.ok()) return broken;
  if (status.ok() && !ended) return grpc::Status(grpc::StatusCode::ABORTED, "the stream ended before the epoch's end");
  return status;
}

bool RankStreamReader::Deliver(ReceivedBatch received, const std::shared_ptr<const std::vector<std::string>>& files,
                               grpc::Status* broken) {
  const int64_t bytes = received.wire_bytes;
  std::string state = received.header.state();
  absl::StatusOr<Batch> batch = DecodeBatch(std::move(received), input_->schema(), files, ctx_->pool, &receive_ops_);
  if (!batch.ok()) {  // damaged on the way: another stream goes on from the last good batch
    *broken = grpc::Status(grpc::StatusCode::ABORTED, std::string(batch.status().message()));
    return false;
  }
  if (!state.empty() && ctx_->shard_log != nullptr) {
    absl::StatusOr<exec::EpochPosition> p = exec::ParseState(state, input_->workers_fingerprint());
    if (!p.ok() || !p->shard) {
      Fail(absl::InternalError(absl::StrCat("batch ", arrived_, " of the shard's stream came with a state that does ",
                                            "not parse: ", p.status().message())));
      return false;
    }
    ctx_->shard_log->Add(p->shard->global_batches, *p);
  }
  input_->CountReceived(batch->rows, bytes);
  absl::MutexLock lock(&mu_);
  while (queue_.size() >= max_queued_ && !stopping_ && !ctx_->cancel.cancelled()) cv_.Wait(&mu_);
  if (stopping_ || ctx_->cancel.cancelled()) return false;
  queue_.push_back(*std::move(batch));
  ++arrived_;
  resume_state_ = std::move(state);
  cv_.SignalAll();
  return true;
}

void RankStreamReader::Fail(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = std::move(status);
  cv_.SignalAll();
}

absl::Status RankStreamReader::GetNext(Batch* out, bool* end) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!queue_.empty()) {
      *out = std::move(queue_.front());
      queue_.pop_front();
      cv_.SignalAll();
      *end = false;
      return absl::OkStatus();
    }
    if (!error_.ok()) return error_;
    if (ended_) {
      *end = true;
      return absl::OkStatus();
    }
    if (ctx_->cancel.cancelled()) return absl::CancelledError("the pipeline was cancelled");
    const absl::Time waiting = absl::Now();
    cv_.WaitWithTimeout(&mu_, kRecheck);
    input_->CountWait(absl::Now() - waiting);
  }
}

}  // namespace sluice::service
