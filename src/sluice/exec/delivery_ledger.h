// Which rows of an epoch are done when they are not delivered in order
// (unordered mode): delivered, or dropped by a filter or a map under
// on_corrupt "skip". A saved state holds the splits all done and the
// records done in the others; a resumed epoch reads the rest, so it gets
// exactly the samples left (the same multiset), each with its own draws.
#ifndef SLUICE_EXEC_DELIVERY_LEDGER_H_
#define SLUICE_EXEC_DELIVERY_LEDGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/batch.h"
#include "sluice/io/file_split.h"

namespace sluice::exec {

// Record ranges [begin, end) by file.
using RecordRanges = std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>>;

// What of an epoch is done: splits by their index in the epoch's order,
// records of the others by file.
struct DoneRows {
  int64_t splits_below = 0;     // every split before this one
  std::vector<int64_t> splits;  // and these, after it (ascending)
  RecordRanges records;

  bool SplitDone(int64_t split) const {
    return split < splits_below || std::binary_search(splits.begin(), splits.end(), split);
  }
  // Whether `record` of `file` is in `records`.
  bool RecordDone(int32_t file, int64_t record) const;
  // The first record of `split` after the done records it starts with
  // (its begin_record when the first is not done).
  int64_t DonePrefixEnd(const io::Split& split) const;
};

// Thread-safe.
class DeliveryLedger {
 public:
  // `start`: what was done before (a resumed epoch); its records must lie in
  // splits not done.
  DeliveryLedger(std::shared_ptr<const std::vector<io::Split>> order, DoneRows start);

  // Rows [begin, end) of a batch are done. FailedPrecondition when one's
  // origin is unknown or in none of the splits.
  absl::Status Done(const Provenance& provenance, int64_t begin, int64_t end);
  // The source made `rows` rows of split `split` (its index in the order),
  // all it has.
  void SplitEnded(int64_t split, int64_t rows);
  DoneRows Snapshot() const;

 private:
  struct Partial {
    int64_t done = 0;
    int64_t rows = -1;  // -1: the source is not through it yet
    std::vector<int64_t> records;
  };
  // The split of `order_` that holds record `record` of `file`; -1: none.
  int64_t SplitOf(int32_t file, int64_t record) const;
  void CompleteIfDone(int64_t split, Partial& partial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const std::vector<io::Split>> order_;
  struct Entry {
    int32_t file;
    int64_t begin;
    int64_t split;
  };
  std::vector<Entry> by_file_;  // sorted by (file, begin)
  mutable absl::Mutex mu_;
  std::vector<bool> complete_ ABSL_GUARDED_BY(mu_);
  int64_t below_ ABSL_GUARDED_BY(mu_) = 0;  // every split before is complete
  std::unordered_map<int64_t, Partial> partial_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_DELIVERY_LEDGER_H_
