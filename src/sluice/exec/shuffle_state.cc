#include "sluice/exec/shuffle_state.h"

#include <algorithm>
#include <limits>

#include "sluice/core/rng.h"

namespace sluice::exec {

size_t ShuffleDraw(uint64_t seed, uint64_t key, uint64_t epoch, int64_t draw, size_t size) {
  SampleRng rng(seed, key, epoch, static_cast<uint64_t>(draw));
  return rng.NextU32() % size;
}

ShuffleReplay ReplayShuffle(uint64_t seed, uint64_t key, uint64_t epoch, int64_t buffer_size,
                            const ShufflePosition& p) {
  const int64_t input_rows = p.input_rows >= 0 ? p.input_rows : std::numeric_limits<int64_t>::max();
  ShuffleReplay r;
  r.next = std::min(buffer_size, input_rows);
  r.slots.reserve(static_cast<size_t>(r.next));
  for (int64_t row = 0; row < r.next; ++row) r.slots.push_back(row);
  for (int64_t draw = 0; draw < p.emitted && !r.slots.empty(); ++draw) {
    const size_t i = ShuffleDraw(seed, key, epoch, draw, r.slots.size());
    if (r.next < input_rows) {
      r.slots[i] = r.next++;
    } else {
      r.slots[i] = r.slots.back();
      r.slots.pop_back();
    }
  }
  return r;
}

void HeldRows::Release(int64_t row) {
  window_[static_cast<size_t>(row - base_)].held = false;
  while (!window_.empty() && !window_.front().held) {
    window_.pop_front();
    ++base_;
  }
}

void ShuffleLog::Add(const std::vector<ShuffleMark>& marks) {
  absl::MutexLock lock(&mu_);
  if (!stopped_) marks_.insert(marks_.end(), marks.begin(), marks.end());
}

void ShuffleLog::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  marks_.clear();
}

std::optional<ShuffleMark> ShuffleLog::Take(uint64_t epoch, int64_t sample_id) {
  absl::MutexLock lock(&mu_);
  const auto it = std::find_if(marks_.begin(), marks_.end(),
                               [&](const ShuffleMark& m) { return m.sample_id == sample_id && m.epoch == epoch; });
  if (it == marks_.end()) return std::nullopt;
  const ShuffleMark mark = *it;
  marks_.erase(marks_.begin(), it + 1);
  return mark;
}

}  // namespace sluice::exec
