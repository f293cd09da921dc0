// Where a sharded epoch stands. A shard node takes its part of every global
// batch, so the rows a shard delivers never say where the epoch's stream
// stands: the shard node itself records, as each global batch ends, the
// position of the stream at its input after that global batch (a
// PositionTracker of its own fed the global batch's last row). The
// pipeline's iterator delivers one element per global batch (the shard's
// part of it, batched) and takes the record of the one it delivered.
#ifndef SLUICE_EXEC_SHARD_LOG_H_
#define SLUICE_EXEC_SHARD_LOG_H_

#include <cstdint>
#include <map>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "sluice/exec/epoch_progress.h"

namespace sluice::exec {

// Thread-safe: the shard node adds, the consumer's thread takes.
class ShardLog {
 public:
  // After `global_batches` global batches of the epoch, the stream at the
  // shard's input stood at `position`.
  void Add(int64_t global_batches, EpochPosition position);
  // The record of `global_batches`, dropping it and those before it;
  // nullopt when it was not logged.
  std::optional<EpochPosition> Take(int64_t global_batches);

 private:
  absl::Mutex mu_;
  std::map<int64_t, EpochPosition> positions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_SHARD_LOG_H_
