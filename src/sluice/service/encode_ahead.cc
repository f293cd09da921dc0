#include "sluice/service/encode_ahead.h"

#include "sluice/core/status_macros.h"
#include "sluice/service/wire_batch.h"

namespace sluice::service {
namespace {

// An unbatched part's rows go in messages of about a MiB, not a message a
// row (W1's 36k messages/s were its ceiling), nor a whole chunk: 128 rows
// of a MiB would be one message, too big for the client's ring and held
// whole by the client past its memory budget. A whole split can then sit
// in a stream its client has dropped: the client names the stream when it
// reports it ended, and the dispatcher re-runs what was in flight on it.
constexpr size_t kRowsMessageBytes = size_t{1} << 20;

}  // namespace

EncodeAhead::EncodeAhead(exec::PipelineIterator* it, BatchMessage header, Compression compression, ShmRingWriter* ring,
                         size_t depth, bool with_state)
    : it_(it),
      compression_(compression),
      ring_(ring),
      depth_(depth),
      with_state_(with_state),
      header_(std::move(header)) {
  if (depth_ > 0) thread_ = std::thread([this] { Run(); });
}

EncodeAhead::~EncodeAhead() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (!thread_.joinable()) return;
  it_->Cancel();  // a Next blocked in the pipeline returns at once
  thread_.join();
}

void EncodeAhead::Run() {
  absl::Status status;
  while (true) {
    Batch batch;
    bool end = false;
    status = it_->NextRows(&batch, &end, kRowsMessageBytes);
    if (!status.ok() || end) break;
    {
      absl::MutexLock lock(&mu_);
      while (ready_.size() >= depth_ && !stopping_) cv_.Wait(&mu_);
      if (stopping_) return;
    }
    absl::StatusOr<Encoded> encoded = Encode(batch);
    if (!encoded.ok()) {
      status = encoded.status();
      break;
    }
    absl::MutexLock lock(&mu_);
    ready_.push_back(*std::move(encoded));
    cv_.SignalAll();
  }
  absl::MutexLock lock(&mu_);
  status_ = status;
  finished_ = true;
  cv_.SignalAll();
}

absl::StatusOr<EncodeAhead::Encoded> EncodeAhead::Encode(const Batch& batch) {
  Encoded out;
  out.rows = batch.rows;
  if (with_state_) {  // called right after it_->Next, on the same thread
    SLUICE_ASSIGN_OR_RETURN(std::string state, it_->SaveState());
    header_.set_state(std::move(state));
  }
  SLUICE_ASSIGN_OR_RETURN(out.bytes, EncodeWireBatch(batch, header_, compression_, ring_, &out.ring_bytes));
  header_.clear_files();  // sent once per stream
  return out;
}

absl::Status EncodeAhead::Next(Encoded* out, bool* end) {
  if (depth_ == 0) {
    Batch batch;
    SLUICE_RETURN_IF_ERROR(it_->NextRows(&batch, end, kRowsMessageBytes));
    if (*end) return absl::OkStatus();
    SLUICE_ASSIGN_OR_RETURN(*out, Encode(batch));
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  while (ready_.empty() && !finished_) cv_.Wait(&mu_);
  if (!ready_.empty()) {
    *out = std::move(ready_.front());
    ready_.pop_front();
    cv_.SignalAll();
    *end = false;
    return absl::OkStatus();
  }
  *end = true;
  return status_;
}

}  // namespace sluice::service
