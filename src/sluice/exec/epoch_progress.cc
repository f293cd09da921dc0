#include "sluice/exec/epoch_progress.h"

#include "sluice/core/rng.h"

namespace sluice::exec {

std::vector<io::Split> EpochSplitOrder(const graph::CompiledNode& source, uint64_t seed, uint64_t epoch) {
  std::vector<io::Split> splits = source.format->MakeSplits();
  if (source.shuffle_splits) {  // Fisher-Yates keyed by (seed, node, epoch)
    SampleRng rng(seed, OpKey(source.name, 0), epoch, 0);
    for (size_t i = splits.size(); i > 1; --i) std::swap(splits[i - 1], splits[rng.NextU32() % i]);
  }
  return splits;
}

std::shared_ptr<const std::vector<io::Split>> SplitOrders::Get(uint64_t epoch) {
  // A repeat's source draws the next epoch's order while the iterator still
  // delivers the last one's: keep a few.
  constexpr size_t kKept = 4;
  absl::MutexLock lock(&mu_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto order = std::make_shared<const std::vector<io::Split>>(EpochSplitOrder(source_, seed_, epoch));
  orders_.emplace(epoch, order);
  if (orders_.size() > kKept) orders_.erase(orders_.begin());
  return order;
}

void RepeatSeams::Add(int64_t rows_before, int64_t i) {
  absl::MutexLock lock(&mu_);
  seams_.emplace_back(rows_before, i);
}

std::optional<int64_t> RepeatSeams::Find(int64_t row) {
  absl::MutexLock lock(&mu_);
  std::optional<int64_t> found;
  while (!seams_.empty() && seams_.front().first <= row) {
    found = seams_.front().second;
    if (seams_.size() == 1 || seams_[1].first > row) break;
    seams_.pop_front();
  }
  return found;
}

}  // namespace sluice::exec
