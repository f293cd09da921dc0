#include "sluice/exec/epoch_progress.h"

#include <algorithm>
#include <numeric>

#include "sluice/core/rng.h"

namespace sluice::exec {

std::vector<int64_t> ShuffledSplitOrder(int64_t n, uint64_t seed, const std::string& source, uint64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), 0);
  SampleRng rng(seed, OpKey(source, 0), epoch, 0);  // Fisher-Yates
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.NextU32() % i]);
  return order;
}

uint64_t RecordOrderKey(uint64_t seed, const std::string& source, uint64_t epoch) {
  SampleRng rng(seed, OpKey(source, 1), epoch, 0);  // op 0 draws the split order
  return (uint64_t{rng.NextU32()} << 32) | rng.NextU32();
}

std::vector<io::Split> EpochSplitOrder(const graph::CompiledNode& source, uint64_t seed, uint64_t epoch) {
  std::vector<io::Split> splits = source.format->MakeSplits();
  if (!source.shuffle_splits) return splits;
  std::vector<io::Split> shuffled;
  shuffled.reserve(splits.size());
  for (int64_t s : ShuffledSplitOrder(static_cast<int64_t>(splits.size()), seed, source.name, epoch)) {
    shuffled.push_back(splits[s]);
  }
  return shuffled;
}

std::shared_ptr<const std::vector<io::Split>> SplitOrders::Get(uint64_t epoch) {
  // A repeat's source draws the next epoch's order while the iterator still
  // delivers the last one's: keep a few.
  constexpr size_t kKept = 4;
  absl::MutexLock lock(&mu_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto order = std::make_shared<const std::vector<io::Split>>(make_(epoch));
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
