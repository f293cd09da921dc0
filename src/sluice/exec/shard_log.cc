#include "sluice/exec/shard_log.h"

#include <utility>

namespace sluice::exec {

void ShardLog::Add(int64_t global_batches, EpochPosition position) {
  absl::MutexLock lock(&mu_);
  positions_[global_batches] = std::move(position);
}

std::optional<EpochPosition> ShardLog::Take(int64_t global_batches) {
  absl::MutexLock lock(&mu_);
  auto it = positions_.find(global_batches);
  if (it == positions_.end()) return std::nullopt;
  EpochPosition p = std::move(it->second);
  positions_.erase(positions_.begin(), std::next(it));
  return p;
}

}  // namespace sluice::exec
