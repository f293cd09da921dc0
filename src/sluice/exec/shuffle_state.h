// What a shuffle buffer needs to save and restore where it stands, without
// storing samples: its draws are keyed by (seed, node, epoch, draw), and each
// emptied slot takes the next input row, so which input rows the buffer holds
// after `emitted` draws follows from the draw count alone (ReplayShuffle).
// A restored buffer re-reads its input from the oldest row still held.
#ifndef SLUICE_EXEC_SHUFFLE_STATE_H_
#define SLUICE_EXEC_SHUFFLE_STATE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/batch.h"

namespace sluice::exec {

// Input rows are numbered in the order the shuffle reads them, from 0 at
// the epoch's start.
struct ShufflePosition {
  int64_t emitted = 0;  // rows drawn so far
  // The oldest input row still in the buffer (the next to read when empty).
  int64_t oldest = 0;
  int64_t input_rows = -1;  // the input's rows when it had ended; -1: not yet
};

// The slot a draw picks among `size` rows.
size_t ShuffleDraw(uint64_t seed, uint64_t key, uint64_t epoch, int64_t draw, size_t size);

// The buffer after some draws: the input row each slot holds, and the
// next input row to read.
struct ShuffleReplay {
  std::vector<int64_t> slots;
  int64_t next = 0;
};

// The buffer of `buffer_size` rows after p.emitted draws.
ShuffleReplay ReplayShuffle(uint64_t seed, uint64_t key, uint64_t epoch, int64_t buffer_size, const ShufflePosition& p);

// Which input rows are still in the buffer, oldest first: a window from the
// oldest held row to the newest.
class HeldRows {
 public:
  void Reset(int64_t first) {
    base_ = first;
    window_.clear();
  }
  // The next input row (numbered base + window size), held or passed over.
  void Add(const RowOrigin& origin, bool held) { window_.push_back({origin, held}); }
  void Release(int64_t row);
  int64_t oldest() const { return base_; }
  // Origin of the oldest held row; unknown (file -1) when none is held.
  RowOrigin oldest_origin() const { return window_.empty() ? RowOrigin{} : window_.front().origin; }

 private:
  struct Row {
    RowOrigin origin;
    bool held;
  };
  int64_t base_ = 0;
  std::deque<Row> window_;
};

// Where the shuffle stood after emitting the row of `sample_id` in epoch
// `epoch` (a repeat's epochs see the same samples).
struct ShuffleMark {
  uint64_t epoch = 0;
  int64_t sample_id = -1;
  ShufflePosition position;
  RowOrigin oldest_origin;  // file -1: the buffer was empty
};

// The marks of rows emitted but not yet delivered, for the pipeline's
// iterator: rows run ahead of delivery through maps and prefetches.
// Thread-safe.
class ShuffleLog {
 public:
  void Add(const std::vector<ShuffleMark>& marks);
  // The mark of `sample_id`'s emission in `epoch`, dropping it and those
  // before it (rows filtered out after the shuffle); nullopt when not logged.
  std::optional<ShuffleMark> Take(uint64_t epoch, int64_t sample_id);
  // No one takes marks any more (the position is lost): keeps none.
  void Stop();

 private:
  absl::Mutex mu_;
  std::deque<ShuffleMark> marks_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_SHUFFLE_STATE_H_
