#include "sluice/service/epoch_reader.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/row_copier.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/log.h"
#include "sluice/service/wire_batch.h"

namespace sluice::service {
namespace {

// How often the reader looks for new workers, and how long it leaves a
// worker whose stream broke before trying it again.
constexpr absl::Duration kRecheck = absl::Milliseconds(100);
constexpr absl::Duration kRetryWorker = absl::Seconds(1);
// How long a stream's worker may be missing from the dispatcher's list
// (a restarted dispatcher lists workers as they register again) before the
// stream is dropped.
constexpr absl::Duration kUnlistedGrace = absl::Seconds(3);
// A split whose batches arrive damaged this often (failing their CRC or
// malformed) fails the epoch: corruption that repeats is the network's or
// a machine's, and running the split again would never end.
constexpr int kMaxDamagedArrivals = 3;
// Streams a worker gets for one-record splits, however many cores it has:
// each holds a shared-memory ring.
constexpr int kMaxStreamsPerWorker = 32;

}  // namespace

EpochReader::EpochReader(DistributedInput* input, exec::ExecContext* ctx, const graph::CompiledNode& node,
                         uint64_t epoch)
    : input_(input),
      ctx_(ctx),
      epoch_(epoch),
      schema_(node.output_schema),
      receive_ops_(node, input->schema()),
      exactly_once_(input->options().mode == DISTRIBUTED_EPOCH),
      max_queued_(static_cast<size_t>(std::max(1, input->options().max_outstanding))) {
  ctx_->cancel.Register(&mu_, &cv_);
  input_->Opened(this, epoch_);
  if (ctx_->ledger != nullptr) {
    const std::vector<int64_t> order = input_->SplitIndices(epoch_);
    position_of_.resize(order.size());
    for (size_t pos = 0; pos < order.size(); ++pos) position_of_[order[pos]] = static_cast<int64_t>(pos);
  }
  // The dispatcher is told outside the lock: a Cancel must not wait on it.
  const exec::EpochPosition* resumed = ctx_->ResumeOf(epoch_);
  absl::Status resuming;
  if (resumed != nullptr) {
    resuming = input_->ResumeClient(epoch_, *resumed);
    if (!resuming.ok()) {
      resuming = WithContext(resuming, absl::StrCat("resuming epoch ", epoch_, " from a saved state"));
    }
  }
  absl::MutexLock lock(&mu_);
  opened_at_ = absl::Now();
  error_ = resuming;
  if (resumed != nullptr && error_.ok()) SeedDone(*resumed->done);
  if (error_.ok()) OpenStreams();
}

void EpochReader::SeedDone(const exec::DoneRows& done) {
  const std::vector<int64_t> order = input_->SplitIndices(epoch_);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    if (done.SplitDone(static_cast<int64_t>(pos))) completed_.insert(order[pos]);
  }
  // A partial split's done records count as arrived: they are dropped when
  // they come (or never come: a worker starts the split after the first
  // ones, and filters drop some again), and the split's row count the
  // ledger gets at its end includes them, as the ledger's own count does.
  for (const EpochSplits::Partial& p : input_->PartialSplits(done)) {
    const io::Split& split = input_->splits()[p.split];
    IdRanges& seen = delivered_[p.split];
    for (const auto& [begin, end] : done.records.at(split.file)) {
      const int64_t from = std::max(begin, split.begin_record);
      const int64_t to = split.end_record < 0 ? end : std::min(end, split.end_record);
      if (from < to) seen.Add(SampleIdOf(split.file, from), SampleIdOf(split.file, to));
    }
  }
}

EpochReader::~EpochReader() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, stream] : streams_) stream->context.TryCancel();
    cv_.SignalAll();
  }
  for (auto& [id, stream] : streams_) {
    if (stream->thread.joinable()) stream->thread.join();
  }
  ctx_->cancel.Unregister(&cv_);
  // A consumer that left the loop early: the job's other consumers must
  // not wait for what it held until its pipeline goes. What it finished
  // stays finished; a split it was reading runs again whole for them; its
  // streams' late asks get nothing.
  std::optional<std::vector<uint64_t>> leaving;
  {
    absl::MutexLock lock(&mu_);
    if (exactly_once_ && !superseded_ && !EpochOver()) {
      ReportFinished();
      leaving.emplace();
      for (const auto& [id, stream] : streams_) {
        if (stream->id != 0) leaving->push_back(stream->id);
      }
    }
  }
  input_->Closed(this, epoch_, leaving);
}

void EpochReader::Supersede() {
  absl::MutexLock lock(&mu_);
  superseded_ = true;
  if (error_.ok()) {
    error_ = absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch_, " of job ", input_->job_id(),
                     " is read by a newer iterator of the same distributed "
                     "pipeline: one client reads an epoch once (make a new pipeline for a second consumer)"));
  }
  ctx_->failure.Set(error_);  // the batches this iterator's nodes hold are the newer one's to deliver
  for (auto& [id, stream] : streams_) stream->context.TryCancel();
  cv_.SignalAll();
  // The streams report their splits abandoned as they end: before the newer
  // reader (perhaps resuming) asks for any.
  mu_.Await(absl::Condition(
      +[](EpochReader* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return std::none_of(r->streams_.begin(), r->streams_.end(), [](const auto& s) { return s.second->running; });
      },
      this));
}

void EpochReader::OpenStreams() {
  last_open_ = absl::Now();
  const std::vector<TaskInfo> tasks = input_->Tasks();
  for (const TaskInfo& task : tasks) {
    const int lanes = StreamsPerWorker(task);
    for (int lane = 0; lane < lanes; ++lane) OpenStream(task, lane);
  }
  DropUnlistedStreams(tasks);
  DropExpiredStreams(input_->TakeExpiredStreams());
}

void EpochReader::DropExpiredStreams(const std::vector<uint64_t>& ids) {
  for (auto& [key, stream] : streams_) {
    if (!stream->running || stream->expired || std::find(ids.begin(), ids.end(), stream->id) == ids.end()) continue;
    Log("client", absl::StrCat("stream from worker ", stream->worker_id, " at ", stream->address,
                               " made no progress for the dispatcher's --split-lease (stuck in an op?): dropped; its "
                               "split runs again"));
    stream->expired = true;
    stream->context.TryCancel();
  }
}

void EpochReader::DropUnlistedStreams(const std::vector<TaskInfo>& tasks) {
  const absl::Time now = absl::Now();
  for (auto& [key, stream] : streams_) {
    const bool listed =
        std::any_of(tasks.begin(), tasks.end(), [&](const TaskInfo& t) { return t.worker_id() == stream->worker_id; });
    if (listed || !stream->running) {
      stream->unlisted_since = absl::InfiniteFuture();
      continue;
    }
    if (stream->unlisted_since == absl::InfinitePast()) continue;  // dropped already
    if (stream->unlisted_since == absl::InfiniteFuture()) stream->unlisted_since = now;
    if (now - stream->unlisted_since < kUnlistedGrace) continue;
    Log("client", absl::StrCat("worker ", stream->worker_id, " at ", stream->address,
                               " is no longer listed by the dispatcher (lost): its stream is dropped"));
    stream->context.TryCancel();
    stream->unlisted_since = absl::InfinitePast();  // cancelled once
  }
}

void EpochReader::OpenStream(const TaskInfo& task, int lane) {
  const std::pair<int64_t, int> key{task.worker_id(), lane};
  auto it = streams_.find(key);
  if (it != streams_.end()) {
    const Stream& s = *it->second;
    if (s.running || s.ended_epoch) return;
    auto failed = failed_at_.find(task.worker_id());
    if (failed != failed_at_.end() && absl::Now() - failed->second < kRetryWorker) return;
    it->second->thread.join();  // finished: joins at once
    streams_.erase(it);
  }
  auto stream = std::make_unique<Stream>();
  stream->worker_id = task.worker_id();
  stream->address = task.worker_address();
  Stream* raw = stream.get();
  streams_[key] = std::move(stream);
  raw->thread = std::thread([this, raw] { Read(raw); });
}

// A stream runs one split at a time and waits between them (a dispatcher
// call, a new iterator): three streams a core kept one local worker's cores
// busy on W3's single images (658 -> 832 images/s on 2 cores; one a core
// left them idle a fifth of the time).
int EpochReader::StreamsPerWorker(const TaskInfo& task) const {
  constexpr int kStreamsPerCore = 3;
  return input_->one_record_splits() ? std::clamp(kStreamsPerCore * task.worker_cores(), 1, kMaxStreamsPerWorker) : 1;
}

// One stream's reading, from its open to its end.
struct EpochReader::StreamRead {
  std::shared_ptr<ShmRing> ring;  // a worker on this host writes into it
  std::unique_ptr<grpc::ClientReader<ReceivingBatch>> reader;
  std::shared_ptr<const std::vector<std::string>> files;
  uint64_t id = 0;            // StreamBatchesRequest's stream_id
  int64_t split = -1;         // the split whose rows are arriving
  bool ended = false;         // the worker sent the epoch's end
  bool server_ended = false;  // the worker finished the stream, with its status
  grpc::Status broken;        // set when this side gave up on the stream
};

void EpochReader::Read(Stream* stream) {
  StreamRead read;
  Open(stream, &read);
  Receive(&read);
  // Cancelling a stream the worker ended would turn its status (the
  // pipeline's error) into CANCELLED, which reads as a lost worker.
  if (!read.ended && !read.server_ended) stream->context.TryCancel();
  grpc::Status status = read.reader->Finish();
  if (!read.broken.ok()) status = read.broken;
  input_->ReturnRing(std::move(read.ring));
  Finish(stream, read, status);
}

void EpochReader::Open(Stream* stream, StreamRead* read) {
  StreamBatchesRequest request;
  read->id = absl::Uniform<uint64_t>(absl::BitGen(), 1, UINT64_MAX);
  {
    absl::MutexLock lock(&mu_);
    stream->id = read->id;
  }
  request.set_stream_id(read->id);
  read->reader = input_->OpenStream(stream->address, epoch_, std::move(request), &stream->context, &read->ring);
}

void EpochReader::Receive(StreamRead* read) {
  ReceivingBatch incoming;
  incoming.pool = ctx_->pool;
  incoming.ring = read->ring.get();
  // Compressed columns are not the bytes the ops take: DecodeBatch runs them.
  if (input_->options().compression == COMPRESSION_NONE) incoming.ops = &receive_ops_;
  while (true) {
    if (!read->reader->Read(&incoming)) {
      if (!incoming.error.ok()) {  // damaged on the way: drop the stream, re-run the split
        read->broken = grpc::Status(grpc::StatusCode::ABORTED, std::string(incoming.error.message()));
      } else {
        read->server_ended = true;
      }
      return;
    }
    const BatchMessage& message = incoming.received.header;
    if (message.files_size() > 0) {
      read->files = std::make_shared<const std::vector<std::string>>(message.files().begin(), message.files().end());
    }
    if (message.epoch_end()) {
      CountSkips(message);
      read->ended = true;
      return;
    }
    if (message.split_skipped() || message.split_end()) {
      if (message.split_skipped()) {
        SplitSkipped(message);
      } else {
        SplitEnded(message);
      }
      read->split = -1;
      continue;
    }
    read->split = message.split();
    if (!Deliver(std::move(incoming.received), read)) return;
  }
}

void EpochReader::SplitSkipped(const BatchMessage& message) {
  // Failed too often; skipped under on_corrupt "skip".
  {
    absl::MutexLock lock(&mu_);
    const int64_t arrived = delivered_[message.split()].size();
    const int64_t records = message.skipped_records() < 0 ? 1 : message.skipped_records() - arrived;
    if (completed_.insert(message.split()).second) {
      if (records > 0) ctx_->skips.Add(message.skipped_file(), records, 0, message.skip_reason());
      SplitArrived(message.split());
    }
    delivered_.erase(message.split());
  }
  if (exactly_once_) input_->ReportSplits(epoch_, {message.split()}, {});
}

void EpochReader::SplitEnded(const BatchMessage& message) {
  bool report;
  {
    absl::MutexLock lock(&mu_);
    if (completed_.insert(message.split()).second) {  // once, whatever re-ran
      CountSkips(message);
      SplitArrived(message.split());
    }
    delivered_.erase(message.split());
    report = held_rows_.count(message.split()) == 0;
    if (!report) ended_held_.insert(message.split());
  }
  if (exactly_once_ && report) input_->ReportSplits(epoch_, {message.split()}, {});
}

bool EpochReader::Deliver(ReceivedBatch received, StreamRead* read) {
  const int64_t bytes = received.wire_bytes;
  absl::StatusOr<Batch> batch =
      DecodeBatch(std::move(received), input_->schema(), read->files, ctx_->pool, &receive_ops_);
  if (!batch.ok()) {  // damaged on the way: drop the stream, re-run the split
    read->broken = grpc::Status(grpc::StatusCode::ABORTED, std::string(batch.status().message()));
    return false;
  }
  input_->CountReceived(batch->rows, bytes);
  absl::MutexLock lock(&mu_);
  if (exactly_once_ && !DropDelivered(read->split, &*batch)) return true;
  while (queue_.size() >= max_queued_ * std::max<size_t>(1, streams_.size()) && !stopping_ && !superseded_ &&
         !ctx_->cancel.cancelled()) {
    cv_.Wait(&mu_);
  }
  if (stopping_ || superseded_ || ctx_->cancel.cancelled()) return false;
  held_rows_[read->split] += batch->rows;
  queue_splits_.push_back(read->split);
  queue_.push_back(*std::move(batch));
  cv_.SignalAll();
  return true;
}

void EpochReader::LogBreak(const Stream& stream, const grpc::Status& status, int64_t split) {
  constexpr absl::Duration kEvery = absl::Seconds(30);
  BreakLog& log = break_logs_[stream.worker_id];
  const absl::Time now = absl::Now();
  if (now - log.logged < kEvery) {
    ++log.since;
    return;
  }
  Log("client",
      absl::StrCat("stream from worker ", stream.worker_id, " at ", stream.address, " broke (", status.error_message(),
                   ")", exactly_once_ && split >= 0 ? absl::StrCat("; split ", split, " runs again") : "",
                   log.since > 0 ? absl::StrCat("; it broke ", log.since, " more times since the last line") : ""));
  log = BreakLog{now, 0};
}

// A broken stream's worker and error, for the dispatcher to name when its
// split fails too often (cut: the dispatcher keeps it with the split).
std::string EpochReader::BrokenWhy(const Stream& stream, const grpc::Status& status) {
  constexpr size_t kMostBytes = 1000;
  std::string why = absl::StrCat("worker ", stream.worker_id, " at ", stream.address, ": ", status.error_message());
  if (why.size() <= kMostBytes) return why;
  size_t cut = kMostBytes;
  while (cut > 0 && (static_cast<unsigned char>(why[cut]) & 0xC0) == 0x80) --cut;  // a whole UTF-8 character
  return absl::StrCat(why.substr(0, cut), "...");
}

void EpochReader::Finish(Stream* stream, const StreamRead& read, const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  stream->ended_epoch = read.ended;
  const int64_t split = read.split;
  if (!read.ended && !stopping_) {
    if (!read.broken.ok() && split >= 0 && ++damaged_[split] >= kMaxDamagedArrivals) {
      if (error_.ok()) {
        error_ = absl::DataLossError(absl::StrCat("job ", input_->job_id(), ": split ", split, " arrived damaged ",
                                                  damaged_[split], " times from worker ", stream->worker_id, " at ",
                                                  stream->address, " (last: ", read.broken.error_message(),
                                                  "): something between that worker and this client corrupts data"));
      }
    } else if (LostWorker(status)) {
      failed_at_[stream->worker_id] = absl::Now();
      // A dropped stream's line was its drop's; one the consumer cancelled
      // (Ctrl-C) broke as it was told to.
      if (!superseded_ && !stream->expired && !ctx_->cancel.cancelled()) LogBreak(*stream, status, split);
      // Queued before the stream counts as ended: a superseding reader
      // waits for that, then for the reports to reach the dispatcher. The
      // splits the worker sent whole into the stream after `split`, unread,
      // or ran when it died, run again too (the dispatcher knows them by
      // the stream).
      // A stream dropped because the dispatcher found its worker lost
      // reports nothing: the dispatcher gave its split out again already,
      // and another stream may be running it for this client now. One
      // whose split's lease ran out reports only that it ended (its split
      // was given out again; the others it carried run again, counting no
      // failure).
      std::vector<int64_t> abandoned;
      if (split >= 0 && !stream->expired) abandoned.push_back(split);
      const bool unlisted = stream->unlisted_since == absl::InfinitePast();
      if (exactly_once_ && !unlisted) {
        input_->ReportSplits(epoch_, {}, abandoned, read.id, /*dropped=*/!read.broken.ok() || stream->expired,
                             BrokenWhy(*stream, status));
      }
    } else if (error_.ok()) {
      error_ = FromGrpc(status, absl::StrCat("worker ", stream->worker_id, " at ", stream->address));
    }
  }
  stream->running = false;
  cv_.SignalAll();
}

void EpochReader::CountSkips(const BatchMessage& marker) {
  for (const SkippedRecords& s : marker.skipped()) ctx_->skips.Add(s.file(), s.records(), s.bytes(), "");
  for (const std::string& m : marker.skip_messages()) ctx_->skips.AddMessage(m);
}

void EpochReader::SplitArrived(int64_t split) {
  auto seen = delivered_.find(split);
  const int64_t rows = seen == delivered_.end() ? 0 : seen->second.size();
  if (ctx_->ledger != nullptr && split >= 0 && split < static_cast<int64_t>(position_of_.size())) {
    ctx_->ledger->SplitEnded(position_of_[split], rows);
  }
}

bool EpochReader::DropDelivered(int64_t split, Batch* batch) {
  if (completed_.count(split) > 0) return false;  // a re-run of a finished split
  IdRanges& seen = delivered_[split];
  std::vector<int64_t> keep;
  // Run by run of consecutive ids: a fresh run is kept whole.
  for (int64_t r = 0; r < batch->rows;) {
    const int64_t first = batch->provenance.SampleId(r);
    int64_t end_row = r + 1;
    while (end_row < batch->rows && first >= 0 && batch->provenance.SampleId(end_row) == first + (end_row - r)) {
      ++end_row;
    }
    const int64_t end_id = first + (end_row - r);
    if (!seen.Overlaps(first, end_id)) {
      for (int64_t k = r; k < end_row; ++k) keep.push_back(k);
      seen.Add(first, end_id);
    } else {
      for (int64_t k = r; k < end_row; ++k) {
        const int64_t id = first + (k - r);
        if (seen.Overlaps(id, id + 1)) continue;
        keep.push_back(k);
        seen.Add(id, id + 1);
      }
    }
    r = end_row;
  }
  if (keep.size() == static_cast<size_t>(batch->rows)) return true;
  if (keep.empty()) return false;
  exec::RowCopier copier(schema_, static_cast<int64_t>(keep.size()), ctx_->pool);
  for (int64_t r : keep) copier.Append(*batch, r, r + 1);
  *batch = copier.Finish();
  return true;
}

bool EpochReader::EpochOver() const {
  bool any_ended = false;
  for (const auto& [id, stream] : streams_) {
    if (stream->running) return false;
    any_ended |= stream->ended_epoch;
  }
  return any_ended && queue_.empty();
}

bool EpochReader::TakeRebatched(bool at_end, Batch* out) {
  const ElementSpec& element = input_->element();
  if (pending_.empty()) return false;
  if (!element.batched()) {  // no more than a batch node after this one batches next: it holds none past its batch
    PopPending(next_rows_, out);
    next_rows_ = 1;
    return true;
  }
  const int64_t size = element.batch_size();
  if (pending_rows_ < size && (!at_end || element.drop_remainder())) return false;
  if (pending_.front().rows == size) {  // a whole batch: no copy
    PopPending(size, out);
    return true;
  }
  const int64_t rows = std::min(size, pending_rows_);
  exec::RowCopier copier(schema_, rows, ctx_->pool);
  while (copier.rows() < rows) TakePending(&copier, rows - copier.rows());
  *out = copier.Finish();
  return true;
}

void EpochReader::PopPending(int64_t rows, Batch* out) {
  Batch& front = pending_.front();
  const int64_t split = pending_splits_.front();
  if (rows >= front.rows) {
    *out = std::move(front);
    pending_.pop_front();
    pending_splits_.pop_front();
  } else {
    *out = front.Slice(0, rows);
    front = front.Slice(rows, front.rows);
  }
  pending_rows_ -= out->rows;
  if (!input_->element().batched()) Taken(split, out->rows);
}

void EpochReader::TakePending(exec::RowCopier* copier, int64_t max_rows) {
  const size_t batches = pending_.size();
  pending_rows_ -= copier->TakeFront(&pending_, max_rows);
  if (pending_.size() < batches) pending_splits_.pop_front();
}

void EpochReader::Taken(int64_t split, int64_t rows) {
  auto held = held_rows_.find(split);
  if (held == held_rows_.end() || (held->second -= rows) > 0) return;
  held_rows_.erase(held);
  if (ended_held_.erase(split) > 0) finished_.push_back(split);
}

void EpochReader::LimitNextRows(int64_t rows) {
  absl::MutexLock lock(&mu_);
  next_rows_ = std::max<int64_t>(1, rows);
}

absl::Status EpochReader::GetNext(Batch* out, bool* end) {
  absl::MutexLock lock(&mu_);
  absl::Status s = NextLocked(out, end);
  ReportFinished();
  return s;
}

void EpochReader::ReportFinished() {
  if (finished_.empty()) return;
  std::vector<int64_t> finished;
  finished.swap(finished_);
  // Outside the lock: a Cancel must not wait on the dispatcher.
  mu_.Unlock();
  if (exactly_once_) input_->ReportSplits(epoch_, finished, {});
  mu_.Lock();
}

absl::Status EpochReader::NextLocked(Batch* out, bool* end) {
  while (true) {
    if (!error_.ok()) return error_;
    if (ctx_->cancel.cancelled()) return absl::CancelledError("pipeline cancelled");
    if (absl::Status fatal = input_->Fatal(); !fatal.ok()) return fatal;
    if (absl::Now() - last_open_ > kRecheck) OpenStreams();
    if (TakeRebatched(false, out)) {
      *end = false;
      return absl::OkStatus();
    }
    if (!queue_.empty()) {
      pending_rows_ += queue_.front().rows;
      // Batches the workers made count as taken here: at most a batch's
      // rows wait in pending_, and the epoch's last ones wait there for
      // the workers' end, which waits for this report. Rows are taken as
      // they are handed out (PopPending).
      if (input_->element().batched()) Taken(queue_splits_.front(), queue_.front().rows);
      pending_splits_.push_back(queue_splits_.front());
      pending_.push_back(std::move(queue_.front()));
      queue_.pop_front();
      queue_splits_.pop_front();
      cv_.SignalAll();
      continue;
    }
    if (EpochOver()) {
      *end = !TakeRebatched(true, out);
      return absl::OkStatus();
    }
    if (streams_.empty() && !waiting_logged_ && absl::Now() - opened_at_ > absl::Seconds(2)) {
      Log("client", absl::StrCat("job ", input_->job_id(), ": waiting for workers"));
      waiting_logged_ = true;
    }
    if (!finished_.empty()) {  // before waiting: the workers' epoch end may wait for this report
      ReportFinished();
      continue;
    }
    const absl::Time waiting = absl::Now();
    cv_.WaitWithTimeout(&mu_, kRecheck);
    input_->CountWait(absl::Now() - waiting);
  }
}

}  // namespace sluice::service
