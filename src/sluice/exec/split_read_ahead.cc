#include "sluice/exec/split_read_ahead.h"

#include <utility>

namespace sluice::exec {

SplitReadAhead::SplitReadAhead(size_t splits, int threads, ReadSplit read)
    : splits_(splits), window_(static_cast<size_t>(threads)), read_(std::move(read)) {
  for (int i = 0; i < threads; ++i) readers_.emplace_back([this] { Reader(); });
}

SplitReadAhead::~SplitReadAhead() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
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
    Slot slot;
    slot.status = read_(split, stop_, &slot.chunks);
    absl::MutexLock lock(&mu_);
    slots_[split] = std::move(slot);
  }
}

absl::StatusOr<bool> SplitReadAhead::Next(std::vector<Batch>* chunks) {
  absl::MutexLock lock(&mu_);
  if (next_to_hand_ == splits_) return false;
  mu_.Await(absl::Condition(this, &SplitReadAhead::NextIsRead));
  auto it = slots_.find(next_to_hand_);
  Slot slot = std::move(it->second);
  slots_.erase(it);
  ++next_to_hand_;  // the window moves on: a reader may start the next split
  if (!slot.status.ok()) return slot.status;
  *chunks = std::move(slot.chunks);
  return true;
}

}  // namespace sluice::exec
