#include "sluice/service/encode_ahead.h"

#include "sluice/service/wire_batch.h"

namespace sluice::service {

EncodeAhead::EncodeAhead(exec::PipelineIterator* it, BatchMessage header, Compression compression,
                         ShmRingWriter* ring, size_t depth)
    : it_(it), compression_(compression), ring_(ring), depth_(depth), header_(std::move(header)) {
  thread_ = std::thread([this] { Run(); });
}

EncodeAhead::~EncodeAhead() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  it_->Cancel();  // a Next blocked in the pipeline returns at once
  thread_.join();
}

void EncodeAhead::Run() {
  absl::Status status;
  while (true) {
    Batch batch;
    bool end = false;
    status = it_->Next(&batch, &end);
    if (!status.ok() || end) break;
    uint64_t ring_bytes = 0;
    absl::StatusOr<grpc::ByteBuffer> bytes = EncodeWireBatch(batch, header_, compression_, ring_, &ring_bytes);
    if (!bytes.ok()) {
      status = bytes.status();
      break;
    }
    header_.clear_files();  // sent once per stream
    absl::MutexLock lock(&mu_);
    while (ready_.size() >= depth_ && !stopping_) cv_.Wait(&mu_);
    if (stopping_) return;
    ready_.push_back(Encoded{*std::move(bytes), batch.rows, ring_bytes});
    cv_.SignalAll();
  }
  absl::MutexLock lock(&mu_);
  status_ = status;
  finished_ = true;
  cv_.SignalAll();
}

absl::Status EncodeAhead::Next(Encoded* out, bool* end) {
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
