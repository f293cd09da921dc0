#include "sluice/exec/split_read_ahead.h"

#include <set>
#include <utility>

#include "sluice/exec/exec_context.h"
#include "sluice/exec/thread_start.h"

namespace sluice::exec {

namespace {

// The blocks the chunks hold (their capacity: what the budget counts), each
// block once.
int64_t PoolBytes(const std::vector<Batch>& chunks) {
  std::set<const Buffer*> seen;
  int64_t bytes = 0;
  for (const Batch& chunk : chunks) {
    for (const Column& c : chunk.columns) {
      for (const Tensor* t : {&c.values, &c.offsets}) {
        if (t->buffer() != nullptr && seen.insert(t->buffer().get()).second) bytes += t->buffer()->size();
      }
    }
  }
  return bytes;
}

}  // namespace

SplitReadAhead::SplitReadAhead(size_t splits, int threads, ReadSplit read, MemoryBudget* budget,
                               std::atomic<int64_t>* split_bytes)
    : splits_(splits),
      window_(static_cast<size_t>(threads)),
      read_(std::move(read)),
      budget_(budget),
      split_bytes_(split_bytes != nullptr ? split_bytes : &own_split_bytes_) {
  StartThreads(threads, [this](int) { Reader(); }, &readers_);  // those the system started read
}

SplitReadAhead::~SplitReadAhead() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (budget_ != nullptr) budget_->Notify();  // readers waiting for room
  for (std::thread& t : readers_) t.join();
}

bool SplitReadAhead::CanStart() const {
  return stop_ || next_to_read_ == splits_ || next_to_read_ < next_to_hand_ + window_;
}

bool SplitReadAhead::NextIsRead() const { return slots_.count(next_to_hand_) > 0; }

void SplitReadAhead::Reader() {
  while (true) {
    size_t split;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SplitReadAhead::CanStart));
      if (stop_ || next_to_read_ == splits_) return;
      split = next_to_read_++;
    }
    const int64_t reserved = WaitForRoom(split);
    if (reserved < 0) {  // stopped, or the pipeline cancelled: a consumer still waiting must hear it
      Store(split, Slot{absl::CancelledError("pipeline cancelled"), {}});
      return;
    }
    Read(split);
    if (budget_ != nullptr) budget_->Unreserve(reserved);  // the chunks are in the pool's bytes now
  }
}

int64_t SplitReadAhead::WaitForRoom(size_t split) {
  if (budget_ == nullptr) return 0;
  {
    // No room can be reserved for a split of unknown size: until one has
    // been read, the splits after the next to hand wait (8 readers started
    // at once held 2.4 times a 64 MiB budget).
    absl::MutexLock lock(&mu_);
    const auto sized = [this, split]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || split <= handed_.load() || split_bytes_->load() > 0;
    };
    mu_.Await(absl::Condition(&sized));
  }
  const int64_t wanted = split_bytes_->load();
  const bool room =
      budget_->WaitForRoom([this, split] { return !stop_ && (split > handed_.load() || !awaited_.load()); }, wanted);
  if (room && !stop_) return wanted;
  if (room) budget_->Unreserve(wanted);
  return -1;
}

void SplitReadAhead::Read(size_t split) {
  Slot slot;
  slot.status = read_(split, stop_, &slot.chunks);
  const int64_t bytes = PoolBytes(slot.chunks);
  int64_t most = split_bytes_->load();
  while (bytes > most && !split_bytes_->compare_exchange_weak(most, bytes)) {
  }
  Store(split, std::move(slot));
}

void SplitReadAhead::Store(size_t split, Slot slot) {
  absl::MutexLock lock(&mu_);
  slots_[split] = std::move(slot);
}

absl::StatusOr<bool> SplitReadAhead::Next(std::vector<Batch>* chunks) {
  absl::MutexLock lock(&mu_);
  if (next_to_hand_ == splits_) return false;
  if (readers_.empty()) return ThreadStartError("the source node's reads ahead (parallel_reads)");
  if (!NextIsRead()) {
    awaited_ = true;
    if (budget_ != nullptr) budget_->Notify();  // its reader may be waiting for room
    mu_.Await(absl::Condition(this, &SplitReadAhead::NextIsRead));
    awaited_ = false;
  }
  auto it = slots_.find(next_to_hand_);
  Slot slot = std::move(it->second);
  slots_.erase(it);
  ++next_to_hand_;  // the window moves on: a reader may start the next split
  handed_ = next_to_hand_;
  if (budget_ != nullptr) budget_->Notify();  // and the next split's reader may go on
  if (!slot.status.ok()) return slot.status;
  *chunks = std::move(slot.chunks);
  return true;
}

}  // namespace sluice::exec
