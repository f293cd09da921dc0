// Reads the splits of an epoch ahead on several threads and hands each on
// whole, in the epoch's order: the rows reading one split at a time gives,
// at the rate of several readers (tf.data's parallel interleave, but
// deterministic and in order). At most `threads` splits are read or held
// ahead of the one the consumer is waiting for, so memory stays bounded by
// that many splits: small splits (split_records) keep it small. With a
// memory budget, a split read ahead also waits for room for one more
// split's bytes (the most one has taken, none before the first is read);
// the split the consumer needs next waits too, until the consumer waits for
// it: then it never does, so the pipeline makes progress at any budget.
#ifndef SLUICE_EXEC_SPLIT_READ_AHEAD_H_
#define SLUICE_EXEC_SPLIT_READ_AHEAD_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/batch.h"

namespace sluice::exec {

class MemoryBudget;

class SplitReadAhead {
 public:
  // Reads split `split` into `chunks`, giving up when `stop` becomes true.
  using ReadSplit =
      std::function<absl::Status(size_t split, const std::atomic<bool>& stop, std::vector<Batch>* chunks)>;

  // `budget` may be null (no waiting for room). `split_bytes`, the most
  // bytes a split has held, may outlive this read-ahead (the next epoch's
  // starts from it); null: its own.
  SplitReadAhead(size_t splits, int threads, ReadSplit read, MemoryBudget* budget = nullptr,
                 std::atomic<int64_t>* split_bytes = nullptr);
  // Stops the readers (a split being read is abandoned) and joins them.
  ~SplitReadAhead();
  SplitReadAhead(const SplitReadAhead&) = delete;
  SplitReadAhead& operator=(const SplitReadAhead&) = delete;

  // The next split's chunks, in order; false once every split was handed
  // on. A split's read error comes at its turn, after the splits before it.
  absl::StatusOr<bool> Next(std::vector<Batch>* chunks);

 private:
  struct Slot {
    absl::Status status;
    std::vector<Batch> chunks;
  };
  void Reader();
  // Waits until one more split fits the budget, unless `split` is the one
  // the consumer waits for; returns the bytes reserved, or -1 when stopped.
  // The split it takes next may be read while it works on the one before
  // only if that fits: reading it then at any cost held two splits at a
  // budget smaller than one.
  int64_t WaitForRoom(size_t split);
  void Read(size_t split);
  void Store(size_t split, Slot slot);
  // Await conditions.
  bool CanStart() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextIsRead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t splits_;
  const size_t window_;
  const ReadSplit read_;
  MemoryBudget* const budget_;
  std::atomic<bool> stop_{false};
  // next_to_hand_, for WaitForRoom's condition outside mu_.
  std::atomic<size_t> handed_{0};
  // Whether the consumer waits in Next for a split not yet read.
  std::atomic<bool> awaited_{false};
  // The most bytes one split has held: the room a split read ahead waits for.
  std::atomic<int64_t> own_split_bytes_{0};
  std::atomic<int64_t>* const split_bytes_;
  mutable absl::Mutex mu_;
  size_t next_to_read_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_to_hand_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<size_t, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> readers_;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_SPLIT_READ_AHEAD_H_
