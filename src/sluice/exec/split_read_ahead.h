// Reads the splits of an epoch ahead on several threads and hands each on
// whole, in the epoch's order: the rows reading one split at a time gives,
// at the rate of several readers (tf.data's parallel interleave, but
// deterministic and in order). At most `threads` splits are read or held
// ahead of the one the consumer is waiting for, so memory stays bounded by
// that many splits: small splits (split_records) keep it small.
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

class SplitReadAhead {
 public:
  // Reads split `split` into `chunks`, giving up when `stop` becomes true.
  using ReadSplit =
      std::function<absl::Status(size_t split, const std::atomic<bool>& stop, std::vector<Batch>* chunks)>;

  SplitReadAhead(size_t splits, int threads, ReadSplit read);
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
  // Await conditions.
  bool CanStart() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextIsRead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t splits_;
  const size_t window_;
  const ReadSplit read_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  size_t next_to_read_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_to_hand_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<size_t, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> readers_;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_SPLIT_READ_AHEAD_H_
